"""The run's candidates and its one choice: every deployable the run made, scored on validation, and
the cheapest of those that hold the best score. What reaches the user is the choice, not the
checkpoint the loop happened to keep.

    choice = choose(task)          # tfm_cls.classify.finish, before calibration and the test split
    task.model, task.task_head     # now the chosen model and its head (thresholds tuned on its logits)
    choice.front                   # [{name, validation, test, texts_per_second, size_mb, ...}] -> metrics.json

The candidates a run can make (`candidate_models`):

    wide_and_deep   the best checkpoint: the fine-tuned encoder plus the fitted bag-of-terms branch
    bag_of_terms    that branch alone and the bias fitted with it (tfm_cls.model.bag): the TF-IDF + linear
                    model fitted over the runtime's own tokens, a graph with no encoder. Only where the
                    branch was warm-started, i.e. fitted as a model of its own (tfm_cls.bag.warm_start)
    bag_of_terms_N  a second bag of its own, other n-grams in more rows (`wide.second_bag_ngrams`; the
                    recipe's where the tokens are characters): tfm_cls.bag.second
    encoder         the model of a run without a branch (the one candidate: nothing to choose)

The rule (`pick`): the best candidate by validation `train.best_metric`; a candidate holds that score
where no candidate beats it by more than one paired standard error (`paired_se`: the bootstrap over
the texts of the difference between the two, both decided by their own tuned rule; for accuracy one
text more, `tolerance`), each pair
compared on every text both have held-out logits for: the validation texts, and the training texts
where both are bags whose out-of-fold logits the warm start kept (`train_out_of_fold`; up to
MAX_TRAIN_EVIDENCE of them). Validation alone cannot resolve what the folds can: on tnews the bag of
triples led the bag of pairs by 0.41 point on 5,336 validation texts (SE 0.36) and by 0.39 on those and
48,024 training texts out of fold (SE 0.11); on test by 0.64 (docs/recipe.md). Of the candidates
holding the score the one with the most texts per second (`texts_per_second`: the PyTorch model on one
thread over validation texts, the cost a deployment pays per text) ships, where "most" allows the
timing's own noise: of those within SPEED_NOISE of the fastest, the smallest file ships (a tiny
encoder and its bag of terms time alike on a shared CPU, and which one reads faster would be
chance; the size is exact). One standard error,
not a fixed margin, so the tolerance shrinks with a larger validation split and never trades a
difference the split can resolve for speed; and on a 0-1 metric a candidate holds only where the best's
lead over it plus one paired SE is at most MAX_LOSS, so a split too small to resolve anything does not
trade an unbounded loss for speed either. docs/recipe.md measures the rule on sets it was not
chosen on.

Every candidate not shipped is kept in RUN/candidates/NAME/ (model_config.json, model.safetensors):
`tfm-cls export --run RUN --candidate NAME` exports it instead.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tfm_cls import runs as R
from tfm_cls.bag.compare import BOOTSTRAP_SAMPLES, COUNTED, MAX_LOSS, UNBOUNDED, _lead, paired_se, tolerance
from tfm_cls.bag.second import second_bag, train_out_of_fold
from tfm_cls.bag.warm_start import branch_bias
from tfm_cls.classify.predict import evaluate
from tfm_cls.data.tokenized import TokenizedSplit, collate
from tfm_cls.data.tokenizer import PAD_ID
from tfm_cls.io import write_json
from tfm_cls.model.bag import ARCHITECTURE as BAG_ARCHITECTURE
from tfm_cls.model.bag import BagOfTermsClassifier
from tfm_cls.runs import CANDIDATES_DIR
from tfm_cls.training import budget
from tfm_cls.training.best import is_better
from tfm_cls.training.clock import WallClock
from tfm_cls.weights import save_weights

logger = logging.getLogger(__name__)

SPEED_ROWS = 256
"""At most this many validation rows are timed per candidate (SPEED_SECONDS bounds it too)."""
SPEED_SECONDS = 10.0
MIN_SPEED_SECONDS = 0.5
"""A split whose rows take less than this is timed over again until this long has passed (one pass of
30 texts through a tiny model is a few milliseconds: a timer's noise, not a speed)."""
SPEED_NOISE = 0.10
"""Texts/s within this fraction of the fastest holding candidate's count as alike (one-thread timings of
the same model on a loaded 2-core box vary by several percent); the smaller of those ships."""
MAX_TRAIN_EVIDENCE = 50_000
"""At most this many training texts' out-of-fold logits (a seeded sample) join a comparison: the
bootstrap's draw counts are [BOOTSTRAP_SAMPLES, texts], and past this the SE is under 0.1 point."""


@dataclasses.dataclass
class Scored:
    """One candidate: its model, its head (decision rule tuned on its own validation logits), its
    validation metrics and logits, and its cost."""

    name: str
    model: nn.Module
    head: Any
    validation: dict[str, Any]
    logits: np.ndarray
    texts_per_second: float = 0.0
    size_mb: float = 0.0
    out_of_fold: np.ndarray | None = None
    """Logits [N_train, ...] of the training texts by fits that did not see them (a bag whose folds the
    warm start fitted), or None."""
    same_as: str | None = None
    """The candidate whose logits this one computes too (`same_logits`: a wide-and-deep model whose loop
    kept step 0 is its bag of terms), which scores the test split for both; None for a model of its own."""
    as_fitted: nn.Module | None = None
    """This bag as fitted, where the one it ships is smaller (`smaller_bag`): what a twin computes (`same_as`)."""


@dataclasses.dataclass
class Choice:
    chosen: Scored
    candidates: list[Scored]
    front: list[dict[str, Any]]
    rule: str


def candidate_models(task: Any) -> dict[str, nn.Module]:
    """The deployables of a trained task's model (the best weights loaded), by name."""
    model, cfg = task.model, task.cfg
    warm = getattr(getattr(cfg, "wide", None), "warm_start", False)
    if model.config.get("architecture") == BAG_ARCHITECTURE:
        return {"bag_of_terms": model}
    if getattr(model, "wide", None) is None or not warm:
        return {"encoder" if getattr(model, "wide", None) is None else "wide_and_deep": model}
    max_len = int(task.splits["train"].lengths.max(initial=1))
    # the warm start's own bias: the trained head's moved with the encoder (on tnews5k the bag with
    # it scored 0.472 on validation, as fitted 0.480)
    bag = BagOfTermsClassifier.from_wide_and_deep(model, max(max_len, 2), branch_bias(task.run_dir))
    models = {"wide_and_deep": model, "bag_of_terms": bag}
    second = second_bag(cfg, task.run_dir, next(model.parameters()).device)
    if second is not None:
        models[second[0]] = second[1]
    return models


def same_logits(model: nn.Module, bag: nn.Module) -> bool:
    """Whether a wide-and-deep `model` computes `bag`'s logits (the bag made of its branch): its encoder's
    head still all zeros, as the warm start left it (the loop kept step 0, or took none), and its bias
    the bag's, so logits = 0 . pooled + bias + branch. The encoder then reads every text for nothing: on
    tnews at 5 minutes its test pass took 90 s to repeat the bag's score (docs/recipe.md)."""
    head, bias = getattr(model, "head", None), getattr(bag, "bias", None)
    return (isinstance(head, nn.Linear) and isinstance(bias, Tensor) and getattr(model, "wide", None) is not None
            and not head.weight.any() and torch.equal(head.bias.detach(), bias.detach().to(head.bias)))


def size_mb(model: nn.Module) -> float:
    """The weights' size in MB (parameters and buffers as stored: what the .onnx file mostly is)."""
    return sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 1e6


@torch.no_grad()
def texts_per_second(model: nn.Module, split: TokenizedSplit, pad_id: int, batch_size: int = 32,
                     rows: int = SPEED_ROWS, seconds: float = SPEED_SECONDS) -> float:
    """Texts a second of `model` on one CPU thread over the split's first `rows` rows in batches of
    `batch_size` (one batch first, untimed, to warm up; stops after `seconds`; a split read in less
    than MIN_SPEED_SECONDS is read again until then). A windowed split counts its rows per example."""
    model_was_training, threads = model.training, torch.get_num_threads()
    model.eval()
    torch.set_num_threads(1)
    try:
        indices = list(range(min(rows, split.num_rows)))
        batches = [indices[i:i + batch_size] for i in range(0, len(indices), batch_size)]
        device = next(model.parameters()).device
        inputs = []
        for batch_rows in batches:
            batch = collate(split, batch_rows, pad_id)
            inputs.append((len(batch_rows), [batch[key].to(device) for key in ("input_ids", "attention_mask",
                                                                             "token_type_ids") if key in batch]))
        if inputs:
            model(*inputs[0][1])  # warm-up, untimed
        # every batch once (or until `seconds`), then round again until MIN_SPEED_SECONDS have passed
        timed, started, elapsed = 0, time.perf_counter(), 0.0
        while inputs and elapsed < min(MIN_SPEED_SECONDS, seconds):
            for count, tensors in inputs:
                model(*tensors)
                timed += count
                elapsed = time.perf_counter() - started
                if elapsed > seconds:
                    break
        elapsed = max(elapsed, 1e-9)
    finally:
        torch.set_num_threads(threads)
        model.train(model_was_training)
    rows_per_text = split.num_rows / max(len(split), 1)
    return timed / rows_per_text / elapsed


def pick(scored: list[Scored], metric: str, targets: np.ndarray, labels: list[str],
         train_targets: np.ndarray | None = None) -> tuple[Scored, list[dict[str, Any]]]:
    """The rule of the module docstring: the best by validation `metric`; the candidates no other beats by
    more than one paired SE (`_lead`, `tolerance`; `train_targets`: the training texts' targets where candidates
    carry out-of-fold logits of them) and, on a 0-1 metric, that the best leads by at most MAX_LOSS at one
    paired SE above its lead (`loss_bound`) hold its score (the best alone where comparisons disagree in a
    circle); of those the fastest (the smallest among those within SPEED_NOISE of the fastest).
    Returns the chosen candidate and, per candidate, its tolerance (the lead over it that beats, against the best),
    the texts that comparison counted, whether it holds the best score, who beat it, and (0-1 metrics)
    its loss bound against the best."""
    best = scored[0]
    for candidate in scored[1:]:
        if is_better(metric, candidate.validation[metric], best.validation[metric]):
            best = candidate
    leads: dict[tuple[int, int], tuple[float, float, int, float]] = {}  # (lead, tolerance, texts, SE)
    for i, a in enumerate(scored):
        for j in range(i + 1, len(scored)):
            lead, beats, count, se = _lead(a, scored[j], metric, targets, labels, train_targets)
            leads[i, j], leads[j, i] = (lead, beats, count, se), (-lead, beats, count, se)
    b = scored.index(best)
    rows = []
    for i in range(len(scored)):
        beaten_by = [scored[j].name for j in range(len(scored)) if j != i and leads[j, i][0] > leads[j, i][1]]
        row = {"tolerance": 0.0 if i == b else leads[b, i][1],
               "compared_texts": len(targets) if i == b else leads[b, i][2],
               "holds_best": not beaten_by, "beaten_by": beaten_by}
        if metric not in UNBOUNDED:
            row["loss_bound"] = 0.0 if i == b else max(leads[b, i][0], 0.0) + leads[b, i][3]
            row["holds_best"] = row["holds_best"] and row["loss_bound"] <= MAX_LOSS
        rows.append(row)
    if not any(row["holds_best"] for row in rows):
        rows[b]["holds_best"] = True
    holding = [c for c, row in zip(scored, rows) if row["holds_best"]]
    fastest = max(c.texts_per_second for c in holding)
    alike = [c for c in holding if c.texts_per_second >= (1.0 - SPEED_NOISE) * fastest]
    return min(alike, key=lambda c: (c.size_mb, -c.texts_per_second)), rows


def _training_evidence(task: Any, names: list[str]) -> tuple[np.ndarray | None, dict[str, np.ndarray]]:
    """The training texts' targets and, by candidate name, their out-of-fold logits (the bags whose
    folds were fitted), on one seeded sample of at most MAX_TRAIN_EVIDENCE texts; (None, {}) where
    fewer than two candidates have them or a training text is read as several windows."""
    train = task.splits.get("train")
    bags = [name for name in names if name.startswith("bag_of_terms")]
    if len(bags) < 2 or train is None or train.windows is not None or train.num_rows == 0:
        return None, {}
    shape = (train.num_rows, int(task.model.config["num_classes"]))
    found = {name: logits for name in bags
             if (logits := train_out_of_fold(task.run_dir, name, shape)) is not None}
    if len(found) < 2:
        return None, {}
    rows = np.arange(train.num_rows)
    if len(rows) > MAX_TRAIN_EVIDENCE:
        rows = np.sort(np.random.default_rng(0).choice(rows, MAX_TRAIN_EVIDENCE, replace=False))
    return train.labels[rows], {name: logits[rows] for name, logits in found.items()}


def choose(task: Any, clock: WallClock | None = None) -> Choice | None:
    """Score the task's candidates on validation, pick one (`pick`), and make it the task's model and
    head; None where there is nothing to choose (one candidate, or no validation split). A chosen bag
    ships smaller where its score holds (`smaller_bag`), while `clock` affords it."""
    models = candidate_models(task)
    validation = task.splits.get("validation")
    if len(models) < 2 or validation is None or validation.num_rows == 0:
        return None
    cfg, env, labels = task.cfg, task.env, task.labels
    metric = cfg.train.best_metric if cfg.train.best_metric else task.task_head.summary_keys[0]
    pad_id = task.pad_id if task.pad_id is not None else PAD_ID
    train_targets, out_of_fold = _training_evidence(task, list(models))
    scored = []
    cached = getattr(task, "best_validation", None)  # the loop scored the best weights already
    for name, model in models.items():
        head = copy.deepcopy(task.task_head)
        if model is task.model and cached is not None:
            metrics, logits = cached
            head.tune(logits, validation.labels)  # as evaluate(tune=True) did: the same logits, the same rule
        else:
            metrics, logits = evaluate(model, validation, labels, cfg.train.eval_batch_size, env.device, pad_id,
                                       env=env, amp=task.amp, head=head, tune=True)
        twin = "bag_of_terms" if name == "wide_and_deep" and same_logits(model, models["bag_of_terms"]) else None
        scored.append(Scored(name, model, head, metrics, logits, texts_per_second(model, validation, pad_id),
                             size_mb(model), out_of_fold.get(name), twin))
        logger.info("candidate %s: validation %s %.4f, %.1f texts/s on one thread, %.1f MB", name, metric,
                    metrics[metric], scored[-1].texts_per_second, scored[-1].size_mb)
    chosen, rows = pick(scored, metric, validation.labels, labels, train_targets)
    front = [{"name": c.name, "validation": {metric: c.validation[metric]}, "texts_per_second": c.texts_per_second,
              "size_mb": c.size_mb, **row, **({"same_logits_as": c.same_as} if c.same_as else {}),
              "chosen": c is chosen, "saved_in": "." if c is chosen else f"{CANDIDATES_DIR}/{c.name}"}
             for c, row in zip(scored, rows)]
    evidence = (f"; two bags also on {len(train_targets)} training texts' out-of-fold logits"
                if train_targets is not None and sum(c.out_of_fold is not None for c in scored) > 1 else "")
    rule = (f"best validation {metric}, then the most texts/s among the candidates that no other beats by more than "
            f"one paired standard error (bootstrap, {BOOTSTRAP_SAMPLES} resamples of the {validation.num_rows} "
            f"validation texts{evidence}{'; plus one text' if metric in COUNTED else ''})"
            f"{'' if metric in UNBOUNDED else f' and whose loss to the best is at most {MAX_LOSS:g} at one SE above the lead'}"
            f", the smallest of those within {SPEED_NOISE:.0%} of the fastest")
    best_row = max(front, key=lambda r: (r["tolerance"] == 0.0))
    logger.info("chosen: %s (%s); best on validation: %s", chosen.name, rule, best_row["name"])
    for row in front:
        if row["beaten_by"]:
            logger.info("candidate %s does not hold the score: beaten by %s by more than its tolerance",
                        row["name"], ", ".join(row["beaten_by"]))
        elif not row["holds_best"] and "loss_bound" in row:
            logger.info("candidate %s does not hold the score: it may trail %s by %.4f (lead + one paired SE), "
                        "over the %g it may lose", row["name"], best_row["name"], row["loss_bound"], MAX_LOSS)
    tables = smaller_bag(chosen, task, validation, metric, clock)
    if tables is not None:  # what the chosen bag ships as: its front row says it (metrics.json `candidates`)
        row = next(row for row in front if row["chosen"])
        row.update(bag_tables=tables, validation={metric: chosen.validation[metric]}, size_mb=chosen.size_mb)
    task.model, task.task_head = chosen.model, chosen.head
    return Choice(chosen, scored, front, rule)


def smaller_bag(chosen: Scored, task: Any, validation: TokenizedSplit, metric: str,
                clock: WallClock | None = None) -> dict[str, Any] | None:
    """A chosen bag of terms ships on the int8 grid with only the terms it needs, where that holds the fitted
    bag's validation score (tfm_cls.bag.shrink.smallest_holding). The int8 grid with every term holds by the
    choice's own rule, a precision change as `tfm-cls quantize` gates one: the fitted bag leads it by no
    more than `tolerance` (one paired standard error, one text more for a metric that counts texts) and
    never by more than INT8_GATE. Fewer terms change the model: they hold only where validation scores
    them no lower than the fitted bag (within one paired SE, the first version lost 0.31-0.42 on tnews' and
    ag_news' test; docs/recipe.md). `chosen` then holds that model, its head tuned on its own logits, its
    validation scores and size. Other candidates stay as fitted; a metric lower-is-better (UNBOUNDED) is not
    shrunk on. Returns what was tried and kept (tfm_cls.bag.shrink.ShrinkReport), or None."""
    if not chosen.name.startswith("bag_of_terms") or metric in UNBOUNDED \
            or getattr(chosen.model.wide, "weighting", None) != "tfidf":
        return None
    from tfm_cls.bag.shrink import INT8_GATE, held_terms, smallest_holding

    cfg, env, pad_id = task.cfg, task.env, task.pad_id if task.pad_id is not None else PAD_ID
    targets, fitted = validation.labels, chosen.validation[metric]
    every_term = int(held_terms(chosen.model).sum())
    made: dict[int, tuple[dict[str, Any], np.ndarray, Any]] = {}

    def judge(model: nn.Module) -> tuple[float, bool]:
        head = copy.deepcopy(task.task_head)
        metrics, logits = evaluate(model, validation, task.labels, cfg.train.eval_batch_size, env.device, pad_id,
                                   env=env, amp=task.amp, head=head, tune=True)
        made[id(model)] = metrics, logits, head
        lead = fitted - metrics[metric]
        if int(held_terms(model).sum()) < every_term:  # terms dropped: no validation score lost
            return metrics[metric], lead <= 0.0
        se = paired_se(chosen.head, metric, chosen.logits, logits, targets, task.labels, head_b=head)
        return metrics[metric], lead <= min(tolerance(metric, se, len(targets)), INT8_GATE)

    # a try: the table rounded and pruned, then a validation pass; the first is estimated by the choice's own
    # validation pass of the bag, the next by the last try, each SHRINK_MARGIN times over
    smaller, report = smallest_holding(
        chosen.model, judge, fitted,
        lambda seconds: clock is None or clock.affords_before_writing(budget.SHRINK_MARGIN * seconds),
        estimate=chosen.validation.get("seconds", 0.0))
    if smaller is not chosen.model:
        chosen.validation, chosen.logits, chosen.head = made[id(smaller)]
        chosen.as_fitted, chosen.model, chosen.size_mb = chosen.model, smaller, size_mb(smaller.compacted())
    return dataclasses.asdict(report)


def save_candidates(run_dir: Path, choice: Choice, labels: list[str]) -> None:
    """The chosen model becomes the run's model (model_config.json, model.safetensors); every other
    candidate goes to RUN/candidates/NAME/ with its own decision rule (a multi-label model's tuned
    thresholds; finish_run writes the chosen one's). Each file is written atomically."""
    # the others first: a run killed in between still holds the trained model (finish_run reads it back)
    for candidate in sorted(choice.candidates, key=lambda c: c is choice.chosen):
        folder = run_dir if candidate is choice.chosen else run_dir / CANDIDATES_DIR / candidate.name
        folder.mkdir(parents=True, exist_ok=True)
        save_weights(candidate.model, folder / R.WEIGHTS_FILE)
        write_json(folder / R.MODEL_CONFIG_FILE, candidate.model.config)
        if candidate is not choice.chosen:
            candidate.head.save_decision(folder, labels)


def trained_weights(run_dir: Path) -> Path:
    """Where the trained model's best weights are: RUN/model.safetensors, unless a finish that chose
    another candidate was interrupted after moving them to RUN/candidates/ (the loop's model is the
    first candidate, `candidate_models`)."""
    for name in ("wide_and_deep", "encoder"):
        moved = run_dir / CANDIDATES_DIR / name / R.WEIGHTS_FILE
        if moved.is_file():
            return moved
    return run_dir / R.WEIGHTS_FILE


def scoring_seconds(candidate: Scored, texts: int) -> float:
    """What scoring `texts` test texts with `candidate` should take: its validation pass's time scaled to
    them, or at its measured texts/s, whichever is longer. A warm-started model's first evaluation
    scores its bag alone (tfm_cls.classify.task): where that is the best, its validation pass took a
    bag's time (ag_news: 2 s for 500 texts, so 30 s for the 7,600 of test, which the encoder then read
    in 190 s, 38 s past the budget)."""
    scaled = candidate.validation.get("seconds", 0.0) * texts / max(candidate.validation.get("examples", 1), 1)
    timed = texts / candidate.texts_per_second if candidate.texts_per_second > 0 else 0.0
    return max(scaled, timed)


def score_test(choice: Choice, task: Any, chosen_test: dict[str, Any] | None,
               clock: WallClock | None = None) -> list[str]:
    """Each candidate's test score into the front (reported, never chosen on); the chosen one's is
    `chosen_test` (finish_run scored it already), and one computing another's logits (`same_as`) takes
    that one's, or where that one ships shrunk, is scored by that bag as fitted (`as_fitted`). A candidate whose scoring the wall clock does not afford (`scoring_seconds`) is left
    unscored; returns what was skipped."""
    test = task.splits.get("test")
    skipped: list[str] = []
    if test is None:
        return skipped
    cfg, env, pad_id = task.cfg, task.env, task.pad_id if task.pad_id is not None else PAD_ID
    rows = {candidate.name: row for candidate, row in zip(choice.candidates, choice.front)}
    # the twins last: each takes its model's score once that is there
    for candidate, row in sorted(zip(choice.candidates, choice.front), key=lambda pair: pair[0].same_as is not None):
        metric = next(iter(row["validation"]))
        twin = next((c for c in choice.candidates if c.name == candidate.same_as), None)
        if candidate is not choice.chosen and twin is not None and twin.as_fitted is None:
            row["test"] = dict(rows[twin.name]["test"]) if rows[twin.name].get("test") is not None else None
            continue
        model = twin.as_fitted if candidate is not choice.chosen and twin is not None else candidate.model
        if candidate is choice.chosen and chosen_test is not None:
            row["test"] = {metric: chosen_test[metric]}
            continue
        needed = scoring_seconds(twin if twin is not None and model is twin.as_fitted else candidate, len(test))
        if clock is not None and not clock.affords_scoring(needed):
            row["test"] = None
            skipped.append(f"{candidate.name} not scored on test (~{needed:.0f} s; {max(clock.left(), 0):.0f} s left)")
            logger.warning("wall-clock budget: %s", skipped[-1])
            continue
        # a twin of a shrunk bag: the bag as fitted computes its logits, at a bag's cost
        metrics, _ = evaluate(model, test, task.labels, cfg.train.eval_batch_size, env.device, pad_id,
                              env=env, amp=task.amp, head=copy.deepcopy(candidate.head))
        row["test"] = {metric: metrics[metric]}
    return skipped
