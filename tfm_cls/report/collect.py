"""Everything the report page shows, computed from a finished run and one labelled split.

`collect(run_dir, data, split)` returns a plain dict (JSON-able numbers, lists and strings); the
page (tfm_cls.report.page) only lays it out. Nothing is written here: a bad run or bad data fails
before the run directory is touched.

What a section holds depends on what the head's outputs are (`kind`): `classes` (single-label),
`label_sets` (multi-label: thresholds) or `values` (regression); sentence pairs are any of them.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from tfm_cls import runs as R
from tfm_cls.classify.baseline import out_of_fold_probabilities, reported, run_baseline
from tfm_cls.classify.calibration import (
    ECE_BINS,
    accuracy_shift,
    calibrated_ece_noise,
    expected_calibration_error,
    reliability,
)
from tfm_cls.classify.heads import head_for
from tfm_cls.classify.metrics import confusion
from tfm_cls.classify.predict import run_head, run_policy, texts_logits
from tfm_cls.errors import DataError, RunDirError, TfmClsError
from tfm_cls.io import read_json
from tfm_cls.model.bag import ARCHITECTURE as BAG_ARCHITECTURE
from tfm_cls.model.classifier import describe_config
from tfm_cls.report.attribution import integrated_gradients
from tfm_cls.report.attribution import method as attribution_method
from tfm_cls.report.label_errors import label_set_errors, likely_label_errors, value_errors
from tfm_cls.runtime.heads import softmax

logger = logging.getLogger(__name__)

EXAMPLES = 8
"""Rows in each error table (each gets its attributions)."""
LABEL_ERRORS_SHOWN = 20
MAX_TRAIN_SCORED = 20_000
"""Training examples scored for the label-error ranking (a seeded sample of larger splits)."""


def kind_of(head: Any) -> str:
    """What the head's outputs are: values (regression), label_sets (per-label thresholds) or classes."""
    if head.value_target:
        return "values"
    return "label_sets" if head.decision_fields else "classes"


def _texts(ds: Any) -> tuple[list[str], list[str] | None, np.ndarray]:
    """The texts, second texts (pairs) and targets of a split (class ids, multi-hot, values)."""
    texts = [str(t) for t in ds["text"]]
    pairs = [str(t) for t in ds["text_pair"]] if "text_pair" in ds.column_names else None
    values = ds["label"]
    first = values[0] if len(values) else 0
    if isinstance(first, list):
        targets = np.asarray(values, dtype=np.float32)  # [N, C] multi-hot
    elif isinstance(first, float):
        targets = np.asarray(values, dtype=np.float32)
    else:
        targets = np.asarray(values, dtype=np.int64)
    return texts, pairs, targets


def load_splits(run: Any, data: str | None, split: str) -> tuple[Any, Any | None, str]:
    """(the split to report on, the training split or None, where they come from). `data`: a
    labelled file or folder (labels mapped onto the run's by name; another label name is a
    DataError); None: the run's own data."""
    from tfm_cls.data.sources import load_data, load_eval_split

    cfg = run.config.data
    own = None
    try:
        own = load_data(cfg)
    except TfmClsError as err:
        if data is None:
            raise
        logger.warning("the run's own data cannot be loaded (%s): no training split unless %s holds one", err, data)
    if own is not None and own.labels != run.labels:
        raise DataError(f"the run's data now has classes {own.labels}, the model {run.labels}")
    if data is not None:
        evaluated = load_eval_split(cfg, data, split, run.labels)
        train = own.splits["train"] if own is not None else None
        if train is None and Path(data).is_dir():
            try:
                train = load_eval_split(cfg, data, "train", run.labels)
            except DataError:
                train = None
        return evaluated, train, f"{data} ({split})"
    if split not in own.splits:
        raise DataError(f"the run's data has no {split!r} split (it has {sorted(own.splits)}); pass --split")
    return own.splits[split], own.splits["train"], f"{own.source} ({split})"


def _check_finished(run_dir: Path) -> None:
    missing = [name for name in (R.CONFIG_FILE, R.WEIGHTS_FILE, R.METRICS_FILE) if not (run_dir / name).is_file()]
    if missing:
        raise RunDirError(f"{run_dir} is not a finished run ({', '.join(missing)} missing): train it to the end first")


def _lengths(run: Any, texts: list[str], pairs: list[str] | None) -> np.ndarray:
    """Tokens of each text (pair) before any truncation, [CLS] and [SEP] included."""
    tokenizer = Tokenizer.from_str(run.tokenizer.to_str())
    tokenizer.no_truncation()
    tokenizer.no_padding()
    encodings = tokenizer.encode_batch(list(zip(texts, pairs)) if pairs is not None else texts) if texts else []
    return np.asarray([len(e.ids) for e in encodings], dtype=np.int64)


def _per_example(kind: str, head: Any, scores: np.ndarray, targets: np.ndarray) -> dict[str, np.ndarray]:
    """correct [N] (values: |error| within 10 % of the target range), confidence [N] and the
    predicted output (class ids, multi-hot, values)."""
    if kind == "values":
        error = np.abs(scores - targets)
        scale = max(float(np.ptp(targets)) if len(targets) else 1.0, 1e-9)
        return {"correct": error <= 0.1 * scale, "confidence": -error, "predicted": scores}
    if kind == "label_sets":
        predicted = head.predicted(scores)
        return {"correct": (predicted == targets.astype(np.int64)).all(axis=1),
                "confidence": np.maximum(scores, 1 - scores).mean(axis=1), "predicted": predicted}
    return {"correct": scores.argmax(1) == targets, "confidence": scores.max(1), "predicted": scores.argmax(1)}


def _describe(kind: str, labels: list[str], value: Any) -> str:
    """A target or prediction as text."""
    if kind == "values":
        return f"{float(value):.3f}"
    if kind == "label_sets":
        names = [labels[j] for j in np.flatnonzero(np.asarray(value) > 0.5)]
        return ", ".join(names) if names else "(none)"
    return labels[int(value)]


def _tokens(run: Any, text: str, pair: str | None, attributions: np.ndarray, encoding: Any) -> list[dict[str, Any]]:
    """The texts cut into spans: tokens with their attribution, the gaps between them plain."""
    sources = [text, pair] if pair is not None else [text]
    out: list[dict[str, Any]] = []
    cursor = [0, 0]
    for i, (seq, (start, end)) in enumerate(zip(encoding.sequence_ids, encoding.offsets)):
        if seq is None or end <= start:
            continue
        if seq == 1 and cursor[1] == 0 and out:
            out.append({"text": "\n", "score": None, "pair_break": True})
        src = sources[seq]
        if start > cursor[seq]:
            out.append({"text": src[cursor[seq]:start], "score": None})
        if start >= cursor[seq]:
            out.append({"text": src[start:end], "score": float(attributions[i])})
            cursor[seq] = end
        else:  # pieces sharing characters (byte-level BPE): add to the span before
            out[-1]["score"] = float((out[-1]["score"] or 0.0) + attributions[i])
    for seq, src in enumerate(sources):
        if cursor[seq] < len(src):
            out.append({"text": src[cursor[seq]:] + (" [cut]" if seq == len(sources) - 1 else ""), "score": None,
                        "cut": True})
    return out


def _attributed(run: Any, kind: str, text: str, pair: str | None, target: int) -> list[dict[str, Any]]:
    encoding = run.tokenizer.encode(text, pair) if pair is not None else run.tokenizer.encode(text)
    types = list(encoding.type_ids) if pair is not None else None
    scores = integrated_gradients(run.model, list(encoding.ids), types, target)
    return _tokens(run, text, pair, scores, encoding)


def _examples(run: Any, kind: str, rows: np.ndarray, ex: dict[str, Any], labels: list[str]) -> list[dict[str, Any]]:
    out = []
    for i in rows:
        i = int(i)
        scores = ex["scores"][i]
        if kind == "values":
            target = 0
        else:
            target = int(np.argmax(scores))
        out.append({
            "index": i, "given": _describe(kind, labels, ex["targets"][i]),
            "predicted": _describe(kind, labels, ex["predicted"][i]),
            "confidence": float(ex["confidence"][i]) if kind != "values" else float(scores),
            "truncated": bool(ex["truncated"][i]), "tokens": _attributed(run, kind, ex["texts"][i],
                                                                          ex["pairs"][i] if ex["pairs"] else None, target),
            "attributed_to": labels[target] if kind != "values" else "the value",
        })
    return out


def _length_buckets(lengths: np.ndarray, max_length: int, correct: np.ndarray, truncated: list[bool],
                    windows: list[int]) -> list[dict[str, Any]]:
    edges = [0, max(max_length // 4, 1), max(max_length // 2, 2), max_length, None]
    out = []
    for low, high in zip(edges[:-1], edges[1:]):
        inside = lengths > low if high is None else (lengths > low) & (lengths <= high)
        n = int(inside.sum())
        out.append({"range": f"{low + 1}-{high}" if high is not None else f"> {low}", "examples": n,
                    "accuracy": float(correct[inside].mean()) if n else None,
                    "truncated": int(np.asarray(truncated, dtype=bool)[inside].sum()),
                    "chunked": int((np.asarray(windows) > 1)[inside].sum())})
    return out


def _size(path: Path) -> str:
    size = path.stat().st_size
    return f"{size / 2**20:.1f} MB" if size >= 2**20 else f"{size / 1024:.0f} KB"


def _summary(run: Any, run_dir: Path, metrics: dict[str, Any], head: Any) -> dict[str, Any]:
    mc = run.model.config
    onnx = run_dir / R.ONNX_FILE
    test = metrics.get("test") or {}
    return {
        "name": run.config.name, "task": head.task + (" (sentence pairs)" if run.config.data.text_pair_column else ""),
        "data": (metrics.get("data") or {}).get("source", ""),
        "examples": {k.removesuffix("_examples"): v for k, v in (metrics.get("data") or {}).items()
                     if k.endswith("_examples")},
        "model": f"{describe_config(mc)}, "
                 f"{metrics.get('num_parameters', sum(p.numel() for p in run.model.parameters())):,} parameters"
                 + (f", fine-tuned from {run.config.model.init_from}"  # a bag of terms has no encoder to tune
                    if run.config.model.init_from and mc.get("architecture") != BAG_ARCHITECTURE else ""),
        "size": f"model.safetensors {_size(run_dir / R.WEIGHTS_FILE)}"
                + (f", model.onnx {_size(onnx)}" if onnx.is_file() else ""),
        "speed": (f"{test['texts_per_second']:.0f} texts/s (PyTorch evaluation of test on {metrics.get('device')})"
                  if "texts_per_second" in test else None),
        "train": f"{metrics.get('train_seconds', 0):.0f} s, {metrics.get('steps')} steps, best at step "
                 f"{metrics.get('best_step')} (validation {metrics.get('best_metric')})",
        "splits": {split: {k: metrics[split][k] for k in head.summary_keys if k in metrics[split]}
                   for split in ("validation", "test") if split in metrics},
        "baselines": reported(metrics),  # the run's own (train.baseline), {name: {split: metrics}}
        "calibration": metrics.get("calibration"),
        "candidates": metrics.get("candidates"),
    }


def collect(run_dir: str | Path, data: str | None = None, split: str = "test",
            given: tuple[Any, Any | None, str] | None = None) -> dict[str, Any]:
    """The content of RUN/report.html (see the module docstring). `given`: (the split, the
    training split or None, their source) as datasets already loaded (TextClassifier.report)."""
    from tfm_cls.runs import load_run

    started = time.perf_counter()
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run directory {run_dir} does not exist")
    _check_finished(run_dir)
    run = load_run(run_dir)
    metrics = read_json(run_dir / R.METRICS_FILE)
    head = run_head(run)
    kind = kind_of(head)
    labels = run.labels
    evaluated, train, source = given if given is not None else load_splits(run, data, split)
    texts, pairs, targets = _texts(evaluated)
    if not texts:
        raise DataError(f"{source}: no examples to report on")
    policy = run_policy(run)
    logits, truncated, windows = texts_logits(run, texts, pairs, policy=policy)
    scores = head.scores(logits)
    split_metrics = head.metrics(logits, targets, labels)
    ex = {"texts": texts, "pairs": pairs, "targets": targets, "scores": scores, "truncated": truncated,
          **_per_example(kind, head, scores, targets)}
    content: dict[str, Any] = {"kind": kind, "labels": labels, "source": source, "split": split,
                               "summary": _summary(run, run_dir, metrics, head), "examples": len(texts),
                               "metrics": {k: split_metrics[k] for k in head.summary_keys if k in split_metrics},
                               "temperature": head.temperature}
    # per class / per label / values
    if kind == "classes":
        content["per_class"] = split_metrics["per_class"]
        content["confusion"] = confusion(targets, ex["predicted"], len(labels)).tolist()
    elif kind == "label_sets":
        thresholds = head.current_thresholds(len(labels))
        content["per_class"] = {name: {**v, "threshold": float(t)}
                                for (name, v), t in zip(split_metrics["per_label"].items(), thresholds)}
    else:
        content["values"] = {"true": targets.astype(float).tolist(), "predicted": scores.astype(float).tolist()}
    # calibration
    if kind == "classes":
        raw = softmax(logits.astype(np.float64))
        content["calibration"] = {
            "bins": ECE_BINS, "before": reliability(raw, targets), "after": reliability(scores, targets),
            "ece_before": expected_calibration_error(raw, targets),
            "ece_after": expected_calibration_error(scores, targets),
            "noise": calibrated_ece_noise(scores)}  # what sampling alone gives calibrated scores on these texts
        fitted = metrics.get("validation") or {}
        own_validation = data is None and split == "validation"
        known = "accuracy" in fitted and "examples" in fitted and "accuracy" in split_metrics
        if head.temperature != 1.0 and not own_validation and known:
            content["calibration"]["fitted_on"] = {
                "accuracy": fitted["accuracy"], "examples": fitted["examples"],
                "shift": accuracy_shift(fitted["accuracy"], fitted["examples"], split_metrics["accuracy"], len(texts))}
    elif kind == "label_sets":
        flat = scores.reshape(-1).astype(np.float64)
        binary = np.stack([1 - flat, flat], axis=1)  # each (text, label) a yes / no prediction
        truth = targets.reshape(-1).astype(np.int64)
        content["calibration"] = {"bins": ECE_BINS, "before": reliability(binary, truth),
                                  "ece_before": expected_calibration_error(binary, truth), "per_label": True}
    else:
        content["calibration"] = None
    # errors
    order = np.argsort(-ex["confidence"], kind="stable")  # most confident first
    wrong = [i for i in order if not ex["correct"][i]][:EXAMPLES]
    right = [i for i in order[::-1] if ex["correct"][i]][:EXAMPLES]
    content["errors"] = {"wrong": _examples(run, kind, np.asarray(wrong, dtype=np.int64), ex, labels),
                         "unsure": _examples(run, kind, np.asarray(right, dtype=np.int64), ex, labels),
                         "method": attribution_method(run.model)}
    max_length = int(run.tokenizer.truncation["max_length"]) if run.tokenizer.truncation else int(run.model.config["max_len"])
    content["lengths"] = {"max_length": max_length, "chunk": policy.chunk,
                          "buckets": _length_buckets(_lengths(run, texts, pairs), max_length, ex["correct"],
                                                     truncated, windows)}
    content["label_errors"] = _label_errors(run, head, kind, train, labels)
    content["baseline"] = _baseline(run, kind, train, {"texts": texts, "pairs": pairs, "targets": targets},
                                    split_metrics, labels)
    content["seconds"] = time.perf_counter() - started
    return content


def _sample(n: int, limit: int, seed: int) -> np.ndarray:
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def _ranked(kind: str, scores: np.ndarray, targets: np.ndarray, labels: list[str], texts: list[str],
            pairs: list[str] | None, rows: np.ndarray) -> dict[str, Any]:
    """The label-error ranking of training rows from their scores, and its first rows to show."""
    if kind == "classes":
        found = likely_label_errors(scores, targets)
        suggest = [labels[int(j)] if j >= 0 else "-" for j in found["confident"]]
        strength = 1 - found["self_confidence"]
    elif kind == "label_sets":
        found = label_set_errors(scores, targets)
        suggest = [f"{labels[j]}: {'no' if targets[i, j] > 0.5 else 'yes'}" for i, j in enumerate(found["worst_label"])]
        strength = found["gap"]
    else:
        found = value_errors(scores, targets)
        suggest = [f"{v:.3f}" for v in scores]
        strength = np.abs(found["z"])
    shown = []
    for i in found["ranking"][:LABEL_ERRORS_SHOWN]:
        i = int(i)
        shown.append({"index": int(rows[i]), "text": texts[i] + (f"  ||  {pairs[i]}" if pairs is not None else ""),
                      "given": _describe(kind, labels, targets[i]), "suggested": suggest[i],
                      "strength": float(strength[i])})
    return {"issues": found["issues"], "rows": shown, "ranking": [int(rows[i]) for i in found["ranking"]]}


def _label_errors(run: Any, head: Any, kind: str, train: Any, labels: list[str]) -> dict[str, Any] | None:
    """The model's ranking (in-sample probabilities) and, for single-label runs, the same method on
    out-of-fold probabilities of the TF-IDF baseline (5 folds: each text scored by a model that
    never saw it)."""
    if train is None:
        return None
    texts, pairs, targets = _texts(train)
    rows = _sample(len(texts), MAX_TRAIN_SCORED, run.config.seed)
    texts, targets = [texts[i] for i in rows], targets[rows]
    pairs = [pairs[i] for i in rows] if pairs is not None else None
    logits, _, _ = texts_logits(run, texts, pairs)
    model = _ranked(kind, head.scores(logits), targets, labels, texts, pairs, rows)
    method = {"classes": "confident learning (Northcutt et al. 2021): per-class thresholds, issues ranked by "
                         "self-confidence",
              "label_sets": "the label each example's probability most contradicts (|given - p|)",
              "values": "standardised residuals (|z|)"}[kind]
    out = {"method": method, "scored": len(rows), "of": len(train), "model": model, "out_of_fold": None}
    if kind == "classes" and len(rows) >= 50:
        start = time.perf_counter()
        oof = out_of_fold_probabilities(texts, pairs, targets, len(labels), seed=run.config.seed)
        out["out_of_fold"] = {**_ranked(kind, oof, targets, labels, texts, pairs, rows), "folds": 5,
                              "seconds": time.perf_counter() - start}
    return out


def _baseline(run: Any, kind: str, train: Any, test: dict[str, Any], model_metrics: dict[str, Any],
              labels: list[str]) -> dict[str, Any] | None:
    if train is None:
        return None
    texts, pairs, targets = _texts(train)
    result = run_baseline(kind, {"texts": texts, "pairs": pairs, "targets": targets}, test, len(labels))
    fresh = head_for(run.config)  # the baseline's own decisions: 0.5 thresholds, raw scores
    metrics = fresh.metrics(result["logits"], test["targets"], labels)
    keys = [k for k in fresh.summary_keys if k != "loss"]
    return {"model": result["model"], "seconds": result["seconds"], "train_examples": len(texts),
            "metrics": {k: metrics[k] for k in keys}, "transformer": {k: model_metrics[k] for k in keys}}
