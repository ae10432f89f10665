"""Dynamic int8 quantization of an exported classifier, gated on the task's own metric.

`quantize_and_evaluate` writes an int8 copy of model.onnx (weights int8, activations quantized on
the fly by onnxruntime.quantization.quantize_dynamic; embedding tables int8 with one scale per row,
`quantize_embeddings`, unless they cost more than the gate allows), evaluates the fp32 and the int8 model on a
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
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnxruntime.quantization import QuantType, quantize_dynamic

from tfm_cls.errors import InferenceError, QuantizeError
from tfm_cls.io import write_json
from tfm_cls.runtime.readers import Stats, decoded_lines, json_lines
from tfm_cls.runtime.session import Classifier

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
    embeddings: str = "fp32"
    """int8 (per-row) or fp32: how the embedding tables (Gather) are stored in the int8 file."""
    embeddings_note: str = ""
    """Why the tables stayed fp32 when int8 ones were tried (the drop they cost)."""
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
            f"{self.size_int8_mb:.1f} MB (embeddings {self.embeddings}{'; ' + self.embeddings_note if self.embeddings_note else ''})"
            f"\n  {self.int8_path}: {verdict}"
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


def _embedding_tables(graph: onnx.GraphProto) -> list[onnx.TensorProto]:
    """The float 2-D initializers read only as the data of Gather nodes along axis 0 (token, position
    and segment embeddings): the tables a per-row int8 copy can replace."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    tables = []
    for init in graph.initializer:
        nodes = readers.get(init.name, [])
        if init.data_type != onnx.TensorProto.FLOAT or len(init.dims) != 2 or not nodes:
            continue
        gathers = all(
            n.op_type == "Gather" and n.input[0] == init.name
            and all(a.i == 0 for a in n.attribute if a.name == "axis")
            for n in nodes
        )
        if gathers:
            tables.append(init)
    return tables


def int8_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """table [V, D] -> (int8 rows [V, D], float32 scale [V, 1]): each row symmetric, scale = max |row| / 127
    (1 for a zero row), rows = round(table / scale). The grid a run's bag is put on too (tfm_cls.bag.shrink)."""
    table = np.asarray(table, dtype=np.float32)
    scale = np.abs(table).max(axis=1, keepdims=True) / np.float32(127.0)  # [V, 1]
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    return np.clip(np.rint(table / scale), -127, 127).astype(np.int8), scale


def quantize_embeddings(model: onnx.ModelProto) -> list[str]:
    """Replace each embedding table W [V, D] by int8 rows and one float scale per row (symmetric:
    scale = max|row| / 127), dequantized after the lookup: Gather(int8) -> Cast -> Mul(Gather(scale)).
    In place; returns the names of the tables replaced. A row's error is at most half its scale."""
    from onnx import helper, numpy_helper

    graph = model.graph
    replaced = []
    for init in _embedding_tables(graph):
        rows, scale = int8_rows(numpy_helper.to_array(init))  # [V, D] int8, [V, 1]
        q_name, s_name = f"{init.name}_int8", f"{init.name}_row_scale"
        graph.initializer.remove(init)
        graph.initializer.extend([numpy_helper.from_array(rows, q_name), numpy_helper.from_array(scale, s_name)])
        nodes = list(graph.node)
        del graph.node[:]
        for node in nodes:
            if node.op_type != "Gather" or node.input[0] != init.name:
                graph.node.append(node)
                continue
            out, ids = node.output[0], node.input[1]
            graph.node.extend([
                helper.make_node("Gather", [q_name, ids], [f"{out}_int8"], name=f"{node.name}_int8", axis=0),
                helper.make_node("Gather", [s_name, ids], [f"{out}_scale"], name=f"{node.name}_scale", axis=0),
                helper.make_node("Cast", [f"{out}_int8"], [f"{out}_float"], name=f"{node.name}_cast",
                                 to=onnx.TensorProto.FLOAT),
                helper.make_node("Mul", [f"{out}_float", f"{out}_scale"], [out], name=f"{node.name}_dequantize"),
            ])
        replaced.append(init.name)
    return replaced


def quantize_model(fp32_path: str | Path, int8_path: str | Path, per_channel: bool = False,
                   embeddings: bool = False) -> Path:
    """Dynamic int8 quantization of MatMul/Gemm weights (and, with `embeddings`, the embedding
    tables per row: `quantize_embeddings`); one self-contained file, metadata kept."""
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
    tables = quantize_embeddings(model) if embeddings else []
    # quantize_dynamic keeps metadata today; set it from the source anyway so a change there
    # cannot silently strip the tokenizer and labels from the deployable file.
    meta = {p.key: p.value for p in source.metadata_props}
    meta["tfm_cls.quantization"] = json.dumps(
        {"method": "dynamic", "weights": "int8", "per_channel": per_channel,
         "embeddings": "int8 per-row" if tables else "fp32", "onnxruntime": onnxruntime.__version__}
    )
    onnx.helper.set_model_props(model, meta)
    onnx.save(model, str(int8_path))
    return int8_path


def _has_int8_tables(path: Path) -> bool:
    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return json.loads(meta.get("tfm_cls.quantization", "{}")).get("embeddings", "fp32") != "fp32"


def read_labelled(
    path: str | Path, clf: Classifier, text_field: str = "text", label_field: str = "label",
    pair_field: str = "text_pair", limit: int | None = None,
) -> tuple[list[str], list[str] | None, np.ndarray]:
    """Texts, second texts (pair models, else None) and targets from a .jsonl or .csv file; each
    target is read by the model's head (a label name or index; multi-label: a list of them ->
    multi-hot [N, C]; regression: a number)."""
    path = Path(path)
    if not path.is_file():
        raise QuantizeError(f"labelled data file not found: {path}")
    need = [text_field, label_field] + ([pair_field] if clf.pair else [])
    texts, pairs, ys = [], [], []
    try:
        for where, row in _labelled_rows(path, need):
            try:
                ys.append(clf.head.target(row[label_field], clf.labels))
            except ValueError as err:
                raise QuantizeError(f"{where}: {err}") from None
            texts.append(str(row[text_field]))
            if clf.pair:
                pairs.append(str(row[pair_field]))
            if limit and len(texts) >= limit:
                break
    except InferenceError as err:  # invalid UTF-8, from the one line reader
        raise QuantizeError(str(err)) from None
    if not texts:
        raise QuantizeError(f"{path}: no labelled examples")
    return texts, (pairs if clf.pair else None), np.asarray(ys)


def _labelled_rows(path: Path, need: list[str]) -> Iterator[tuple[str, dict]]:
    """("file:line", row) of each non-empty .jsonl line or .csv row, which must hold `need`."""
    with path.open("rb") as f:
        lines = decoded_lines(f, str(path), "error", Stats())
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            for lineno, obj in json_lines(lines, str(path)):
                if not isinstance(obj, dict) or any(k not in obj for k in need):
                    raise QuantizeError(f"{path}:{lineno}: expected an object with {need}")
                yield f"{path}:{lineno}", obj
        elif path.suffix.lower() == ".csv":
            reader = csv.DictReader(text for _, text in lines)
            if not reader.fieldnames or any(k not in reader.fieldnames for k in need):
                raise QuantizeError(f"{path}: expected columns {need}, got {reader.fieldnames}")
            for row in reader:
                yield f"{path}:{reader.line_num}", row
        else:
            raise QuantizeError(f"{path}: expected a .jsonl or .csv file of labelled texts")


def quantize_and_evaluate(
    fp32_path: str | Path,
    data_path: str | Path,
    int8_path: str | Path | None = None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    per_channel: bool = False,
    embeddings: bool = True,
    batch_size: int = 64,
    limit: int | None = None,
    text_field: str = "text",
    label_field: str = "label",
    pair_field: str = "text_pair",
) -> QuantizeReport:
    """Quantize, evaluate both, keep the int8 file only if the drop of the task's metric
    (accuracy; multi-label micro-F1; regression Pearson) is <= threshold points. With `embeddings`
    the tables are tried in int8 first; where that drop is above the threshold, fp32 tables again."""
    fp32_path = Path(fp32_path)
    if not fp32_path.is_file():
        raise QuantizeError(f"model file not found: {fp32_path} (export it first: tfm-cls export --run RUN)")
    int8_path = Path(int8_path) if int8_path else fp32_path.with_name(fp32_path.stem + ".int8.onnx")
    fp32 = Classifier(str(fp32_path))
    texts, pairs, y = read_labelled(data_path, fp32, text_field, label_field, pair_field, limit)

    candidate = int8_path.with_name(int8_path.name + ".candidate")
    metric, acc_fp32, pred_fp32 = fp32.head.gate(fp32.predict_proba(texts, batch_size, pairs)[0], y)
    note = ""
    try:
        for int8_tables in ([True, False] if embeddings else [False]):
            quantize_model(fp32_path, candidate, per_channel, embeddings=int8_tables)
            # the task's own metric (accuracy, micro-F1 with the file's thresholds, Pearson)
            int8 = Classifier(str(candidate))
            _, acc_int8, pred_int8 = int8.head.gate(int8.predict_proba(texts, batch_size, pairs)[0], y)
            drop = 100 * (acc_fp32 - acc_int8)
            if drop <= threshold or not int8_tables:
                break
            note = f"int8 tables dropped {metric} {drop:.2f} points"
            logger.info("int8 embedding tables: %s, above the threshold; trying fp32 tables", note)
        report = QuantizeReport(
            fp32_path=str(fp32_path),
            int8_path=str(int8_path),
            data=str(data_path),
            examples=len(texts),
            accuracy_fp32=acc_fp32,
            accuracy_int8=acc_int8,
            drop_points=round(drop, 4),
            agreement=fp32.head.agreement(pred_fp32, pred_int8),
            size_fp32_mb=fp32_path.stat().st_size / 2**20,
            size_int8_mb=candidate.stat().st_size / 2**20,
            threshold_points=threshold,
            accepted=drop <= threshold,
            embeddings="int8" if int8_tables and _has_int8_tables(candidate) else "fp32",
            embeddings_note=note,
            metric=metric,
        )
        if report.accepted:
            os.replace(candidate, int8_path)
    finally:
        candidate.unlink(missing_ok=True)
    report_path = int8_path.with_name(int8_path.stem + ".quantization.json")
    write_json(report_path, asdict(report))
    return report
