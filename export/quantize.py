"""Dynamic int8 quantization of an exported classifier, gated on the task's own metric.

`quantize_and_evaluate` writes an int8 copy of model.onnx (weights int8, activations quantized on
the fly by onnxruntime.quantization.quantize_dynamic), evaluates the fp32 and the int8 model on a
labelled file with the deployment code path (export/infer.py), and keeps the int8 file only when
the task's metric (accuracy; multi-label micro-F1 at the file's thresholds; regression Pearson x 100)
drops by at most `threshold` points. Metadata (tokenizer, labels, ...) is carried over.
No torch here.
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnxruntime.quantization import QuantType, quantize_dynamic
from tfm_cls.export.infer import Classifier, InferenceError, Stats, decoded_lines

from tfm_cls.errors import QuantizeError
from tfm_cls.io import write_json

logger = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.5  # accuracy points


@dataclass
class QuantizeReport:
    fp32_path: str
    int8_path: str
    data: str
    examples: int
    accuracy_fp32: float
    accuracy_int8: float
    drop_points: float
    agreement: float
    """Fraction of examples where fp32 and int8 predict the same label."""
    size_fp32_mb: float
    size_int8_mb: float
    threshold_points: float
    accepted: bool
    metric: str = "accuracy"
    """The gate's metric, the task's own: accuracy (single-label), micro_f1 (multi-label, with the
    file's thresholds) or pearson (regression); accuracy_fp32 / accuracy_int8 hold its values."""

    def __str__(self) -> str:
        verdict = "kept" if self.accepted else "REFUSED (drop above threshold, int8 file not written)"
        return (
            f"int8 quantization on {self.examples} examples of {self.data}:\n"
            f"  {self.metric} fp32 {100 * self.accuracy_fp32:.2f}%  int8 {100 * self.accuracy_int8:.2f}%  "
            f"change {-self.drop_points:+.2f} points (threshold -{self.threshold_points:g})\n"
            f"  predictions agree on {100 * self.agreement:.2f}%; size {self.size_fp32_mb:.1f} MB -> "
            f"{self.size_int8_mb:.1f} MB\n  {self.int8_path}: {verdict}"
        )


class _ErrorsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextlib.contextmanager
def _quiet_quantizer():
    """onnxruntime.quantization logs one INFO line per tensor, and a generic advice WARNING,
    through the root logger (`logging.info`): drop those records (a filter on the root logger sees only direct calls,
    not our own records propagating to its handlers)."""
    quiet = _ErrorsOnly()
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        yield
    finally:
        root.removeFilter(quiet)


def quantize_model(fp32_path: str | Path, int8_path: str | Path, per_channel: bool = False) -> Path:
    """Dynamic int8 quantization of MatMul/Gemm weights; one self-contained file, metadata kept."""
    fp32_path, int8_path = Path(fp32_path), Path(int8_path)
    source = onnx.load(str(fp32_path))
    with tempfile.TemporaryDirectory(dir=int8_path.parent) as tmp, _quiet_quantizer():
        raw = Path(tmp) / "int8.onnx"
        quantize_dynamic(
            model_input=str(fp32_path),
            model_output=str(raw),
            weight_type=QuantType.QInt8,
            per_channel=per_channel,
            op_types_to_quantize=["MatMul", "Gemm"],
        )
        model = onnx.load(str(raw))
    # quantize_dynamic keeps metadata today; set it from the source anyway so a change there
    # cannot silently strip the tokenizer and labels from the deployable file.
    meta = {p.key: p.value for p in source.metadata_props}
    meta["tfm_cls.quantization"] = json.dumps(
        {"method": "dynamic", "weights": "int8", "per_channel": per_channel, "onnxruntime": onnxruntime.__version__}
    )
    onnx.helper.set_model_props(model, meta)
    onnx.save(model, str(int8_path))
    return int8_path


def read_labelled(
    path: str | Path, labels: list[str], text_field: str = "text", label_field: str = "label", limit: int | None = None
) -> tuple[list[str], np.ndarray]:
    """Texts and label indices from a .jsonl or .csv file; a label is an index or a label name."""
    path = Path(path)
    if not path.is_file():
        raise QuantizeError(f"labelled data file not found: {path}")
    index = {name: i for i, name in enumerate(labels)}

    def label_of(value, where: str) -> int:
        if isinstance(value, str) and value in index:
            return index[value]
        try:
            i = int(value)
        except (TypeError, ValueError):
            i = -1
        if not 0 <= i < len(labels) or isinstance(value, float) and not value.is_integer():
            raise QuantizeError(f"{where}: label {value!r} is neither an index in [0, {len(labels)}) nor one of {labels}")
        return i

    texts, ys = [], []
    try:
        return _read_labelled(path, texts, ys, text_field, label_field, limit, label_of)
    except InferenceError as err:  # invalid UTF-8, from the one line reader
        raise QuantizeError(str(err)) from None


def _read_labelled(path, texts, ys, text_field, label_field, limit, label_of) -> tuple[list[str], np.ndarray]:
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        with path.open("rb") as f:
            for lineno, line in decoded_lines(f, str(path), "error", Stats()):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as err:
                    raise QuantizeError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
                if not isinstance(obj, dict) or text_field not in obj or label_field not in obj:
                    raise QuantizeError(f"{path}:{lineno}: expected an object with {text_field!r} and {label_field!r}")
                texts.append(str(obj[text_field]))
                ys.append(label_of(obj[label_field], f"{path}:{lineno}"))
                if limit and len(texts) >= limit:
                    break
    elif path.suffix.lower() == ".csv":
        with path.open("rb") as f:
            reader = csv.DictReader(text for _, text in decoded_lines(f, str(path), "error", Stats()))
            if not reader.fieldnames or text_field not in reader.fieldnames or label_field not in reader.fieldnames:
                raise QuantizeError(f"{path}: expected columns {text_field!r} and {label_field!r}, got {reader.fieldnames}")
            for row in reader:
                texts.append(row[text_field])
                ys.append(label_of(row[label_field], f"{path}:{reader.line_num}"))
                if limit and len(texts) >= limit:
                    break
    else:
        raise QuantizeError(f"{path}: expected a .jsonl or .csv file of labelled texts")
    if not texts:
        raise QuantizeError(f"{path}: no labelled examples")
    return texts, np.asarray(ys)


def read_task_labelled(
    path: str | Path, clf: Classifier, text_field: str, label_field: str, pair_field: str, limit: int | None
) -> tuple[list[str], list[str] | None, np.ndarray]:
    """Texts, second texts (pair models) and targets from a .jsonl file for a multi-label (label
    lists of names or ids -> multi-hot [N, C]), regression (floats [N]) or pair model."""
    path = Path(path)
    if not path.is_file():
        raise QuantizeError(f"labelled data file not found: {path}")
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        raise QuantizeError(f"{path}: a {clf.head} or sentence-pair model is evaluated on a .jsonl file")
    index = {name: i for i, name in enumerate(clf.labels)}
    texts, pairs, ys = [], [], []
    with path.open("rb") as f:  # the one line reader: invalid UTF-8 is an error naming the line
        for lineno, line in decoded_lines(f, str(path), "error", Stats()):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise QuantizeError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            need = [text_field, label_field] + ([pair_field] if clf.pair else [])
            if not isinstance(obj, dict) or any(k not in obj for k in need):
                raise QuantizeError(f"{path}:{lineno}: expected an object with {need}")
            value, where = obj[label_field], f"{path}:{lineno}"
            if clf.head == "regression":
                try:
                    ys.append(float(value))
                except (TypeError, ValueError):
                    raise QuantizeError(f"{where}: regression target {value!r} is not a number") from None
            elif clf.head == "multi_label":
                hot = np.zeros(len(clf.labels), dtype=np.int64)
                for item in value if isinstance(value, list) else [value]:
                    i = index.get(item, item) if isinstance(item, str) else item
                    if not isinstance(i, int) or not 0 <= i < len(clf.labels):
                        raise QuantizeError(f"{where}: label {item!r} is neither an index in [0, {len(clf.labels)}) nor one of {clf.labels}")
                    hot[i] = 1
                ys.append(hot)
            else:
                i = index.get(value, value) if isinstance(value, str) else value
                if not isinstance(i, int) or not 0 <= i < len(clf.labels):
                    raise QuantizeError(f"{where}: label {value!r} is neither an index in [0, {len(clf.labels)}) nor one of {clf.labels}")
                ys.append(i)
            texts.append(str(obj[text_field]))
            if clf.pair:
                pairs.append(str(obj[pair_field]))
            if limit and len(texts) >= limit:
                break
    if not texts:
        raise QuantizeError(f"{path}: no labelled examples")
    return texts, (pairs if clf.pair else None), np.asarray(ys)


def task_metric(clf: Classifier, scores: np.ndarray, y: np.ndarray) -> tuple[str, float, np.ndarray]:
    """(name, value, predictions) of the gate's metric for the model's head."""
    if clf.head == "regression":
        pearson = float(np.corrcoef(scores, y)[0, 1]) if np.ptp(scores) > 0 and np.ptp(y) > 0 else 0.0
        return "pearson", pearson, scores
    if clf.head == "multi_label":
        pred = clf.decide(scores).astype(np.int64)
        tp = float((pred & y).sum())
        micro_f1 = 2 * tp / max(float(pred.sum() + y.sum()), 1e-9)
        return "micro_f1", micro_f1, pred
    pred = scores.argmax(axis=1)
    return "accuracy", float((pred == y).mean()), pred


def _agreement(a: np.ndarray, b: np.ndarray, head: str) -> float:
    if head == "regression":  # agreement of values: within 1% of the gold range is "the same"
        return float((np.abs(a - b) <= 0.01 * max(float(np.ptp(a)), 1e-9)).mean())
    if a.ndim == 2:
        return float((a == b).all(axis=1).mean())
    return float((a == b).mean())


def predict(model_path: str | Path, texts: list[str], batch_size: int = 64, threads: int = 0) -> np.ndarray:
    """Predicted label indices with the deployment code path."""
    probs, _ = Classifier(str(model_path), threads=threads).predict_proba(texts, batch_size)
    return probs.argmax(axis=1)


def quantize_and_evaluate(
    fp32_path: str | Path,
    data_path: str | Path,
    int8_path: str | Path | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    per_channel: bool = False,
    batch_size: int = 64,
    limit: int | None = None,
    text_field: str = "text",
    label_field: str = "label",
    pair_field: str = "text_pair",
) -> QuantizeReport:
    """Quantize, evaluate both, keep the int8 file only if the drop of the task's metric
    (accuracy; multi-label micro-F1; regression Pearson) is <= threshold points."""
    fp32_path = Path(fp32_path)
    if not fp32_path.is_file():
        raise QuantizeError(f"model file not found: {fp32_path} (export it first: tfm-cls export --run RUN)")
    int8_path = Path(int8_path) if int8_path else fp32_path.with_name(fp32_path.stem + ".int8.onnx")
    fp32 = Classifier(str(fp32_path))
    task_gate = fp32.head != "single_label" or fp32.pair
    if task_gate:
        texts, pairs, y = read_task_labelled(data_path, fp32, text_field, label_field, pair_field, limit)
    else:
        texts, y = read_labelled(data_path, fp32.labels, text_field, label_field, limit)

    candidate = int8_path.with_name(int8_path.name + ".candidate")
    metric = "accuracy"
    try:
        quantize_model(fp32_path, candidate, per_channel)
        if task_gate:  # the task's own metric (micro-F1 with the file's thresholds, Pearson, accuracy)
            int8 = Classifier(str(candidate))
            metric, acc_fp32, pred_fp32 = task_metric(fp32, fp32.predict_proba(texts, batch_size, pairs)[0], y)
            _, acc_int8, pred_int8 = task_metric(int8, int8.predict_proba(texts, batch_size, pairs)[0], y)
            agreement = _agreement(pred_fp32, pred_int8, fp32.head)
        else:
            pred_fp32 = fp32.predict_proba(texts, batch_size)[0].argmax(axis=1)
            pred_int8 = predict(candidate, texts, batch_size)
            acc_fp32, acc_int8 = float((pred_fp32 == y).mean()), float((pred_int8 == y).mean())
            agreement = float((pred_fp32 == pred_int8).mean())
        drop = 100 * (acc_fp32 - acc_int8)
        report = QuantizeReport(
            fp32_path=str(fp32_path),
            int8_path=str(int8_path),
            data=str(data_path),
            examples=len(texts),
            accuracy_fp32=acc_fp32,
            accuracy_int8=acc_int8,
            drop_points=round(drop, 4),
            agreement=agreement,
            size_fp32_mb=fp32_path.stat().st_size / 2**20,
            size_int8_mb=candidate.stat().st_size / 2**20,
            threshold_points=threshold,
            accepted=drop <= threshold,
            metric=metric,
        )
        if report.accepted:
            os.replace(candidate, int8_path)
    finally:
        candidate.unlink(missing_ok=True)
    report_path = int8_path.with_name(int8_path.stem + ".quantization.json")
    write_json(report_path, asdict(report))
    return report
