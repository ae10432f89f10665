"""Classification training (`tfm-cls train`), the recipe: read top to bottom.

    train(cfg, data=None)  ->  data -> tokenizer -> model -> Engine(ClassificationTask).fit() -> finish_run
                               few labelled texts (`contrastive`): Engine(ContrastiveTask).fit() -> fit_head

Everything here is a library piece put in order: the data (tfm_cls.data.sources: cfg.data loaded, or the
splits handed in, e.g. the Python API's texts), the tokenizer and model built here, the
classification task (tfm_cls.classify.task) run by the one engine (tfm_cls.training.engine), and the
end of the run (tfm_cls.classify.finish): the best weights scored on validation and test, metrics,
report, figures and the model card.

Under torchrun every process runs this on its shard of each global batch (docs/distributed.md):
evaluation gathers every rank's predictions, and only rank 0 writes the run directory.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import torch
import yaml
from datasets import DatasetDict
from tokenizers import Tokenizer
from torch import nn

from tfm_cls import runs as R
from tfm_cls.bag.few_labels import cross_validate
from tfm_cls.bag.second import fit_second_bag
from tfm_cls.bag.warm_start import start_wide
from tfm_cls.classify.finish import finish_run
from tfm_cls.classify.heads import check_loss_weights, head_for
from tfm_cls.classify.task import ClassificationTask, probe_cost, segment_kwargs
from tfm_cls.config import ClassifierConfig, WideConfig, save_config
from tfm_cls.data.char_grams import branch_terms
from tfm_cls.data.sources import ClassificationData, eval_sample, load_data, train_sample
from tfm_cls.data.tokenized import TOKENIZE_BLOCK, tokenize_dataset, tokenize_splits
from tfm_cls.data.tokenizer import (
    PAD_ID,
    UNK,
    auto_max_length,
    configure_truncation,
    extend_vocabulary,
    load_tokenizer,
    long_text_of,
    marker_ids,
    max_length_of,
    resolved_lengths,
    save_tokenizer,
    train_tokenizer,
    unknown_characters,
)
from tfm_cls.errors import ConfigError
from tfm_cls.io import read_json, write_json
from tfm_cls.model.classifier import token_limit
from tfm_cls.train.contrastive import fit_contrastive
from tfm_cls.train.end_sample import scored_in_budget
from tfm_cls.training import budget
from tfm_cls.training import distributed as D
from tfm_cls.training.clock import WallClock
from tfm_cls.training.engine import Engine, ScalarSink, TrainState, job, start_process
from tfm_cls.training.stages import StageLog
from tfm_cls.training.tensorboard import TensorBoardSink
from tfm_cls.weights import save_weights

logger = logging.getLogger(__name__)


def prepare_run_dir(cfg: ClassifierConfig, *, resume: bool, overwrite: bool) -> Path:
    """Check the run directory may take this run (runs.prepare_run_dir) and create it. A length
    left `auto` matches the number a run of the same config saved (resolution is deterministic)."""
    return R.prepare_run_dir(
        _as_saved(cfg), config_file=R.CONFIG_FILE, run_files=R.CLASSIFIER_FILES, kind="", resume=resume,
        overwrite=overwrite,
    )


def _as_saved(cfg: ClassifierConfig) -> ClassifierConfig:
    """`cfg` with its `auto` lengths replaced by those the run directory's config.yaml resolved, and the
    samples its budget chose (`data.max_train_samples`, `max_eval_samples`, where `cfg` names none)."""
    saved_file = cfg.resolved_run_dir() / R.CONFIG_FILE
    if not saved_file.is_file():
        return cfg
    saved = yaml.safe_load(saved_file.read_text(encoding="utf-8")) or {}
    cfg = _with_saved_samples(cfg, saved)
    if "auto" not in (cfg.tokenizer.max_length, cfg.model.max_len):
        return cfg
    length, limit = saved.get("tokenizer", {}).get("max_length"), saved.get("model", {}).get("max_len")
    if not isinstance(length, int) or not isinstance(limit, int):
        return cfg
    return resolved_lengths(cfg, length, limit if cfg.model.max_len == "auto" else cfg.model.max_len)


def _with_saved_samples(cfg: ClassifierConfig, saved: dict[str, Any]) -> ClassifierConfig:
    """`cfg` with the samples a run directory's config (`saved`, its config.yaml read) names and `cfg` does not:
    the training sample (`_rows_in_budget`) and the validation and test cap (tfm_cls.train.end_sample)."""
    data = saved.get("data") if isinstance(saved.get("data"), dict) else {}
    named = {key: data.get(key) for key in ("max_train_samples", "max_eval_samples")
             if getattr(cfg.data, key) is None and isinstance(data.get(key), int)}
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, **named)) if named else cfg


def _names_labels(cfg: ClassifierConfig) -> bool:
    """Whether a loss weighting names labels (train.class_weight / multi_label.pos_weight mapping)."""
    return isinstance(cfg.train.class_weight, dict) or isinstance(cfg.multi_label.pos_weight, dict)


def _vocabulary_texts(data: ClassificationData) -> list[str]:
    """The training texts a vocabulary is built from: both sides of a pair."""
    columns = data.splits["train"].with_format("arrow")  # each column read as one list, not a row at a time
    texts = columns["text"].to_pylist()
    if "text_pair" in columns.column_names:
        texts += columns["text_pair"].to_pylist()
    return texts


def _extended(model: nn.Module, tokenizer: Tokenizer, texts: list[str], limit: int,
              env: D.DistEnv) -> tuple[nn.Module, Tokenizer]:
    """`tokenizer.extend_vocab`: the checkpoint's vocabulary plus up to `limit` characters it reads
    as [UNK] in the training texts, and the model's embedding grown to match."""
    from tfm_cls.init_from import with_vocabulary

    unknown = D.on_main(env, unknown_characters, tokenizer, texts)
    if not unknown:
        logger.info("tokenizer.extend_vocab: every character of the training texts is in the vocabulary")
        return model, tokenizer
    extended = extend_vocabulary(tokenizer, unknown[:limit])
    logger.info("tokenizer.extend_vocab: %d of %d characters read as [UNK] added (%s...); vocabulary %d -> %d",
                min(limit, len(unknown)), len(unknown), "".join(unknown[:10]), tokenizer.get_vocab_size(),
                extended.get_vocab_size())
    return with_vocabulary(model, extended.get_vocab_size(), tokenizer.token_to_id(UNK)), extended


def build_model_and_tokenizer(
    cfg: ClassifierConfig, data: ClassificationData, run_dir: Path, resume: bool, env: D.DistEnv | None = None,
) -> tuple[nn.Module, Tokenizer]:
    """The classifier and its tokenizer: from `model.init_from`, or trained on the training texts.
    Under DDP rank 0 reads the run directory or trains the tokenizer and hands it to the others
    (the run directory need not be on a disk every node sees)."""
    env = env or D.DistEnv()
    num_classes = head_for(cfg).num_outputs(len(data.labels))
    auto = cfg.tokenizer.max_length == "auto"
    if resume:  # exactly what the interrupted run built (weights come from the checkpoint)
        tokenizer = D.on_main(env, load_tokenizer, run_dir / R.TOKENIZER_FILE)
        model = R.build_model(D.on_main(env, read_json, run_dir / R.MODEL_CONFIG_FILE))
    elif cfg.model.init_from:
        from tfm_cls.init_from import load_pretrained

        model, tokenizer = load_pretrained(cfg.model.init_from, cfg.model, num_classes, cfg.wide.model_kwargs())
        if cfg.tokenizer.extend_vocab:
            model, tokenizer = _extended(model, tokenizer, _vocabulary_texts(data), cfg.tokenizer.extend_vocab, env)
        length = cfg.tokenizer.max_length
        if auto:
            length = D.on_main(env, auto_max_length, tokenizer, data.splits["train"]["text"], cfg.tokenizer,
                               token_limit(model.config))
        tokenizer = configure_truncation(tokenizer, length)
        model = _bag_of_text_terms(model, cfg.wide, tokenizer)
    else:
        texts = _vocabulary_texts(data)
        if cfg.tokenizer.extend_vocab:
            logger.warning("tokenizer.extend_vocab=%d is for a pretrained vocabulary (model.init_from); a "
                           "tokenizer trained on the texts reads their characters already", cfg.tokenizer.extend_vocab)
        # `auto` lengths: the tokenizer (whose vocabulary does not depend on them) measures the
        # training texts, and the model's position table is sized to the length chosen.
        limit = None if cfg.model.max_len == "auto" or cfg.wide.encoder_length is not None else cfg.model.max_len
        tokenizer = D.on_main(env, train_tokenizer, texts, cfg.tokenizer, limit)
        max_len = max_length_of(tokenizer) if cfg.model.max_len == "auto" else cfg.model.max_len
        model_kwargs = dataclasses.replace(cfg.model, max_len=max_len).model_kwargs()
        entries, char_table = branch_terms(cfg.wide, tokenizer, tokenizer.get_vocab_size())
        model = R.build_model(
            dict(vocab_size=tokenizer.get_vocab_size(), num_classes=num_classes, pad_token_id=PAD_ID,
                 **model_kwargs, **cfg.wide.model_kwargs(), **entries, **segment_kwargs(cfg))
        )
        if char_table is not None:
            model.wide.set_char_grams(char_table)
    if not resume:
        head_for(cfg).start_output(model, data.splits["train"]["label"])
    max_length, max_len = max_length_of(tokenizer), model.config["max_len"]
    if max_length > (token_limit(model.config) or max_length):
        raise ConfigError(
            f"tokenizer.max_length={max_length} exceeds the model's positional encoding (max_len={max_len}); "
            "lower tokenizer.max_length"
        )
    if tokenizer.get_vocab_size() > model.config["vocab_size"]:
        raise ConfigError(
            f"tokenizer has {tokenizer.get_vocab_size()} tokens but the model's embedding only {model.config['vocab_size']}"
        )
    return model, tokenizer


def _bag_of_text_terms(model: nn.Module, wide: WideConfig, tokenizer: Tokenizer) -> nn.Module:
    """A pretrained model whose wide branch (if any) reads its tokenizer's terms (`branch_terms`): rebuilt
    from its config with them, the encoder's and head's weights kept (the branch is fitted later). The
    checkpoint is loaded before its tokenizer is known; a model built for a trained tokenizer gets
    them at once."""
    entries, char_table = branch_terms(wide, tokenizer, model.config["vocab_size"])
    if not model.config.get("wide") or not entries:
        return model
    rebuilt = R.build_model({**model.config, **entries})
    shapes = {key: value.shape for key, value in rebuilt.state_dict().items()}
    # every weight kept but the branch's tables the character view resizes (unfitted yet: zeros, ones)
    rebuilt.load_state_dict({k: v for k, v in model.state_dict().items() if shapes.get(k) == v.shape}, strict=False)
    if char_table is not None:
        rebuilt.wide.set_char_grams(char_table)
    return rebuilt


def _finish_rows(cfg: ClassifierConfig, splits: dict[str, Any]) -> int:
    """Texts the end of the run scores with the trained model: validation once (the loop's last
    evaluation, the engine's) and test once, for the shipped model (tfm_cls.classify.finish; the
    candidates' validation scores reuse the loop's). A candidate not shipped is scored on test only
    where the clock affords it then (tfm_cls.bag.candidates.score_test), so it is not reserved:
    reserving it kept tnews (48k texts, 5 minutes) from any step with 188 s left."""
    return sum(len(splits[name]) for name in ("validation", "test") if name in splits)


def _seconds_per_text(cfg: ClassifierConfig, model: nn.Module, split: Any, device: torch.device) -> float:
    """What scoring a text of `split` costs the model, from a probe of its rows (their lengths, never their
    labels; tfm_cls.classify.task.probe_cost)."""
    seconds, examples = probe_cost(model, split, model.config.get("pad_token_id") or PAD_ID,
                                   cfg.train.eval_batch_size, device)
    return seconds / max(examples, 1)


def _plan_loop(cfg: ClassifierConfig, splits: dict[str, Any], clock: WallClock, seconds_per_text: float | None) -> None:
    """Under a budget, before a warm start: what the end of the run would need to score the trained model
    (`seconds_per_text`: a probe of its cost, `_end_in_budget`) decides whether the encoder's loop is held
    its share (WallClock.plan_loop)."""
    validation = splits.get("validation")
    if seconds_per_text is None or not (cfg.wide.enabled and cfg.wide.warm_start) or validation is None \
            or validation.num_rows == 0:
        return
    clock.plan_loop(clock.reserve_at(seconds_per_text))


def _end_in_budget(cfg: ClassifierConfig, model: nn.Module, data: ClassificationData, splits: dict[str, Any],
                   run: _Run, head_rows: int = 0) -> tuple[ClassifierConfig, ClassificationData, dict[str, Any],
                                                           float | None]:
    """Under a budget, one process, on a fresh run: what scoring a text costs `model`, the one the end of the
    run scores (probed on the first split it scores), sizes validation and test to the budget
    (tfm_cls.train.end_sample); the clock is told the texts the end scores (plus `head_rows`: the few-label
    head's pass over the training texts) and the config saved again where it changed. Returns (cfg, data,
    splits, the probe's seconds a text; None where nothing was probed)."""
    clock = run.clock
    split = next((splits[name] for name in ("validation", "test") if name in splits and splits[name].num_rows), None)
    if clock.budget is None or split is None or run.env.distributed:
        return cfg, data, splits, None
    seconds = _seconds_per_text(cfg, model, split, run.env.device)
    if not run.resume:
        capped = scored_in_budget(cfg, data, splits, clock, seconds)
        if capped[0] is not cfg:
            cfg, data, splits = capped
            save_config(cfg, run.run_dir / R.CONFIG_FILE)
    clock.set_finish_rows(_finish_rows(cfg, splits) + head_rows)
    return cfg, data, splits, seconds


def _rows_in_budget(cfg: ClassifierConfig, data: ClassificationData, tokenizer: Tokenizer, policy: Any,
                    clock: WallClock) -> tuple[ClassifierConfig, ClassificationData]:
    """Under a budget, with more than TOKENIZE_BLOCK training texts: the cost of tokenizing one, timed on
    TOKENIZE_PROBE of them, decides whether all fit in TOKENIZE_SHARE of the budget (tfm_cls.training.budget);
    where they do not, the data's training split becomes a seeded sample of as many as fit
    (`data.max_train_samples`, recorded in the run's config, said in the clock's shrunk). Else (cfg, data)
    as they were."""
    train = data.splits["train"]
    n = len(train)
    if clock.budget is None or n <= TOKENIZE_BLOCK:
        return cfg, data
    shuffled = train.shuffle(seed=cfg.data.split_seed)
    took = []
    probe = budget.TOKENIZE_PROBE
    for size in (probe // 10, probe):  # the difference: a text's cost, less a map's fixed cost
        started = time.monotonic()
        tokenize_dataset(shuffled.select(range(size)), tokenizer, "tokenize (probe)", policy)
        took.append(time.monotonic() - started)
    per_text = max(took[1] - took[0], 0.5 * took[1]) / (probe - probe // 10)
    affordable = clock.rows_in_share(budget.TOKENIZE_SHARE, per_text)
    share = clock.share(budget.TOKENIZE_SHARE)
    logger.info("tokenize: %.2f ms a training text (probe of %d): all %d ~%.0f s, the share %.0f s",
                1e3 * per_text, probe, n, per_text * n, share)
    if affordable >= n:
        return cfg, data
    affordable = max(affordable, TOKENIZE_BLOCK)
    clock.shrink(f"trained on a sample of {affordable} of {n} training texts (tokenizing all was measured to need "
                 f"~{per_text * n:.0f} s, {budget.TOKENIZE_SHARE:.0%} of the budget is {share:.0f} s)")
    return _sampled(cfg, data, affordable)


def _sampled(cfg: ClassifierConfig, data: ClassificationData, rows: int) -> tuple[ClassifierConfig, ClassificationData]:
    """The config and data with a seeded sample of `rows` training texts (`data.max_train_samples`, the
    same sample tfm_cls.data.sources draws for it)."""
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, max_train_samples=rows))
    train = train_sample(data.splits["train"], cfg.data)
    return cfg, dataclasses.replace(data, splits=DatasetDict({**data.splits, "train": train}))


def _saved_sample(cfg: ClassifierConfig, data: ClassificationData, run_dir: Path) -> tuple[ClassifierConfig,
                                                                                            ClassificationData]:
    """A resumed run's samples where the interrupted run's budget chose them (its config.yaml's
    data.max_train_samples, max_eval_samples) and this config names none: the same seeded samples again."""
    saved_file = run_dir / R.CONFIG_FILE
    if not saved_file.is_file():
        return cfg, data
    saved = _with_saved_samples(cfg, yaml.safe_load(saved_file.read_text(encoding="utf-8")) or {})
    rows, cap = saved.data.max_train_samples, saved.data.max_eval_samples
    if cap is not None and cap != cfg.data.max_eval_samples:
        logger.info("resume: the interrupted run's validation and test sample (data.max_eval_samples %d)", cap)
        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, max_eval_samples=cap))
        data = dataclasses.replace(data, splits=DatasetDict({name: eval_sample(split, cfg.data) if name != "train"
                                                             else split for name, split in data.splits.items()}))
    if cfg.data.max_train_samples is not None or rows is None or rows >= len(data.splits["train"]):
        return cfg, data
    logger.info("resume: the interrupted run's sample of %d training texts (its data.max_train_samples)", rows)
    return _sampled(cfg, data, rows)


@dataclasses.dataclass
class _Run:
    """What every stage of one run reads: its directory, this process's place in the job (DDP), its
    precision, whether it resumes, the run's one clock and its stage log (metrics.json `stages`)."""

    run_dir: Path
    env: D.DistEnv
    amp: Any
    resume: bool
    clock: WallClock
    stages: StageLog


def _few_labels(cfg: ClassifierConfig, model: nn.Module, splits: dict[str, Any], data: ClassificationData,
                run: _Run, bag_skips: list[int]) -> dict[str, Any]:
    """The few-label regime: the classical model against the encoder by cross-validation on the labelled
    texts (tfm_cls.bag.few_labels, one process); the bag of terms ships where it wins,
    else the contrastive fine-tuning and its fitted head, stopped where the time left is what the end
    of the run is measured to need (`train.wall_minutes`)."""
    run_dir, env, amp, clock, stages = run.run_dir, run.env, run.amp, run.clock, run.stages
    with stages.stage("few-label choice"):
        choice = (cross_validate(cfg, model, splits["train"], data.labels, bag_skips, clock)
                  if not env.distributed else None)
    extra = {"stages": list(stages.rows)}
    if choice is not None:
        extra["candidates"] = {"rule": choice.rule, "chosen": choice.chosen, "front": choice.front}
    # the end scores the chosen model: the bag, or the encoder after its head's pass over the training texts
    shipped = choice.bag if choice is not None and choice.bag is not None else model
    cfg, data, splits, seconds = _end_in_budget(cfg, shipped, data, splits, run,
                                                0 if shipped is not model else len(splits["train"]))
    if seconds is not None:  # no validation pass in the loop times the model: the probe does
        clock.measured(seconds, 1)
    if choice is not None and choice.bag is not None:
        model = choice.bag
        if env.is_main:
            write_json(run_dir / R.MODEL_CONFIG_FILE, model.config)
            save_weights(model, run_dir / R.WEIGHTS_FILE)
        state = TrainState(best_step=0, stopped="few labels: the cross-validation chose the bag of terms (no fine-tuning)")
        with stages.stage("finish"):
            return finish_run(ClassificationTask(cfg, model, splits, data.labels, run_dir, env, amp), data, state, 0.0,
                              extra=extra, clock=clock)
    with stages.stage("encoder"):
        state, passes = fit_contrastive(cfg, model, splits["train"], run_dir, env, amp, run.resume, clock,
                                        frozen=None if choice is None else choice.vectors)
    extra["stages"] = list(stages.rows)
    with stages.stage("finish"):
        return finish_run(ClassificationTask(cfg, model, splits, data.labels, run_dir, env, amp), data, state, passes,
                          extra=extra, clock=clock)


def train(
    cfg: ClassifierConfig, data: ClassificationData | None = None, *, resume: bool = False, overwrite: bool = False,
    sinks: list[ScalarSink] | None = None, score_test: bool = True, started: float | None = None,
    stages: StageLog | None = None,
) -> dict[str, Any]:
    """Train, evaluate and write the run directory; returns the contents of metrics.json.
    Under torchrun, every process calls this (DDP; docs/distributed.md).

    `data`: the splits to train on instead of loading cfg.data (e.g. tfm_cls.data.sources.data_from_rows,
    the Python API's texts); without a test split, nothing is tested (tfm_cls.classify.finish).
    `sinks` receive the engine's scalars besides TensorBoard (e.g. a tuning trial's pruner);
    `score_test=False` drops the test split right after loading, before anything is tokenized or
    scored: metrics.json then holds validation only (hyperparameter search, tfm_cls.tune).
    `started`: the time.monotonic() the run's `train.wall_minutes` counts from (default: now; the
    command line gives its process's start, tfm_cls.training.clock.process_started). `stages`: the job's
    stage log where the caller ran stages of its own first (the command line's read and plan)."""
    started = time.monotonic() if started is None else started
    if data is None and _names_labels(cfg):  # a {label: weight} mapping is checked before anything is written
        data = load_data(cfg.data)
    if data is not None:
        check_loss_weights(cfg, data.labels)
    stages = stages or StageLog()  # each stage's seconds and peak memory: the log, and metrics.json `stages`
    with job(cfg.train.device, lambda: prepare_run_dir(cfg, resume=resume, overwrite=overwrite)) as (env, run_dir):
        amp = start_process(cfg.train, cfg.seed, env)
        # the run's one clock; the rows the end of the run scores are set once tokenized
        run = _Run(run_dir, env, amp, resume, WallClock(cfg.train.wall_minutes, started), stages)
        data = _read(cfg, data, run, score_test)
        cfg, model, tokenizer = _model_and_tokenizer(cfg, data, run)
        cfg, data, splits = _tokenized(cfg, data, tokenizer, run)
        if cfg.contrastive.iterations:  # few labelled texts: pairs, then a fitted head (tfm_cls.train.contrastive)
            return _few_labels(cfg, model, splits, data, run, cfg.wide.skip_ids(marker_ids(tokenizer)))
        cfg, data, splits, seconds = _end_in_budget(cfg, model, data, splits, run)  # the encoder's, scored at the end
        offsets = _fit_bags(cfg, model, splits, data, run, seconds)
        return _train_encoder(cfg, model, splits, data, offsets, run, sinks)


def _read(cfg: ClassifierConfig, data: ClassificationData | None, run: _Run, score_test: bool) -> ClassificationData:
    """The splits handed in, else cfg.data read (rank 0 first: it fills the datasets cache, the others read it);
    without `score_test` a copy without the test split (the caller's data keep theirs)."""
    if data is None:
        with run.stages.stage("read"), D.main_first(run.env):
            data = load_data(cfg.data)
    if not score_test:
        data = dataclasses.replace(data, splits=DatasetDict({k: v for k, v in data.splits.items() if k != "test"}))
    return data


def _model_and_tokenizer(cfg: ClassifierConfig, data: ClassificationData,
                         run: _Run) -> tuple[ClassifierConfig, nn.Module, Tokenizer]:
    """The model and its tokenizer (`build_model_and_tokenizer`) on the run's device, written to the run
    directory (rank 0), and the config with its `auto` lengths resolved to numbers (saved so)."""
    env, run_dir = run.env, run.run_dir
    with run.stages.stage("tokenizer and model"):
        model, tokenizer = build_model_and_tokenizer(cfg, data, run_dir, run.resume, env)
    cfg = resolved_lengths(cfg, max_length_of(tokenizer), model.config["max_len"] if cfg.model.max_len == "auto"
                           else cfg.model.max_len)  # saved below as numbers
    model.to(env.device)
    if env.distributed:  # same initial weights everywhere (DDP broadcasts rank 0's), own dropout masks
        torch.manual_seed(cfg.seed + env.rank)
    if env.is_main:
        write_json(run_dir / R.MODEL_CONFIG_FILE, model.config)
        write_json(run_dir / R.LABELS_FILE, data.labels)
        save_tokenizer(tokenizer, run_dir / R.TOKENIZER_FILE)
    return cfg, model, tokenizer


def _tokenized(cfg: ClassifierConfig, data: ClassificationData, tokenizer: Tokenizer,
               run: _Run) -> tuple[ClassifierConfig, ClassificationData, dict[str, Any]]:
    """The splits tokenized, on the training rows the budget affords (`_rows_in_budget`; resumed: the
    interrupted run's sample); the clock told the rows the end of the run scores, the config saved (rank 0).
    Returns the config and data (a sample's where one was drawn) and the tokenized splits."""
    env = run.env
    policy = long_text_of(cfg.tokenizer, cfg.inference)
    with run.stages.stage("tokenize"), D.main_first(env):
        if run.resume:  # the interrupted run's sample, where its budget chose one
            cfg, data = _saved_sample(cfg, data, run.run_dir)
        elif not env.distributed:  # the ranks' timings could decide differently
            cfg, data = _rows_in_budget(cfg, data, tokenizer, policy, run.clock)
        # few labels read whole (inference.chunk): the training texts' windows too, for the head's vectors
        splits = tokenize_splits(data.splits, tokenizer, policy, train_windows=cfg.train.window == "random"
                                 or bool(cfg.contrastive.iterations and cfg.inference.chunk))
    run.clock.set_finish_rows(_finish_rows(cfg, splits))
    if env.is_main:
        save_config(cfg, run.run_dir / R.CONFIG_FILE)
    return cfg, data, splits


def _fit_bags(cfg: ClassifierConfig, model: nn.Module, splits: dict[str, Any], data: ClassificationData,
              run: _Run, seconds_per_text: float | None) -> Any:
    """The wide branch (tfm_cls.bag.warm_start): its IDF table and warm start on a fresh run, and the
    warm start's training offsets [rows, C] (None without one), which the task adds to the logits in its
    loss; and the second bag, a candidate of the run's choice (tfm_cls.bag.second). `seconds_per_text`: the
    encoder's probed cost (`_end_in_budget`), which plans the loop's share."""
    env, clock = run.env, run.clock
    with run.stages.stage("bags"):
        if not run.resume and not env.distributed:  # one process: the ranks' timings could plan differently
            _plan_loop(cfg, splits, clock, seconds_per_text)
        offsets = start_wide(cfg, model, splits, data.labels, run.run_dir, resume=run.resume, env=env, clock=clock)
        if not run.resume and env.is_main:  # another view of the words, a candidate of the run's choice
            fit_second_bag(cfg, model, splits, data.labels, run.run_dir, clock)
    return offsets


def _train_encoder(cfg: ClassifierConfig, model: nn.Module, splits: dict[str, Any], data: ClassificationData,
                   offsets: Any, run: _Run, sinks: list[ScalarSink] | None) -> dict[str, Any]:
    """The encoder trained by the engine (ClassificationTask, the bags' `offsets` in its loss; TensorBoard
    and `sinks` receive its scalars), then the end of the run (tfm_cls.classify.finish); returns metrics.json's
    contents."""
    env, amp, run_dir, stages = run.env, run.amp, run.run_dir, run.stages
    task = ClassificationTask(cfg, model, splits, data.labels, run_dir, env, amp, offsets=offsets)
    logger.info(
        "model: %.2fM parameters, %d layers, d_model %d, device %s, %s",
        sum(p.numel() for p in model.parameters()) / 1e6, len(model.encoder.layers), model.config["d_model"],
        env.device, amp.name,
    )
    board = TensorBoardSink.open(run_dir, cfg.train.tensorboard, fresh=not run.resume) if env.is_main else None
    try:
        engine = Engine(task, cfg.train, env, amp, run_dir, sinks=[s for s in (board, *(sinks or [])) if s],
                        clock=run.clock)
        warmup = cfg.train.warmup_steps
        if warmup is not None and warmup >= engine.planned_steps:
            logger.warning(
                "train.warmup_steps=%d is not below the %d planned steps: the learning rate never reaches "
                "train.lr=%g; lower train.warmup_steps (or set train.warmup_ratio)", warmup, engine.planned_steps,
                cfg.train.lr,
            )
        with stages.stage("encoder"):
            state = engine.fit(run.resume)
        with stages.stage("finish"):
            return finish_run(task, data, state, state.epoch + state.position / engine.batches_per_epoch, board,
                              clock=run.clock, extra={"stages": list(stages.rows)})
    finally:
        if board is not None:
            board.close()
