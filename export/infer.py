#!/usr/bin/env python
"""Classify texts with an exported tfm_cls model, using only onnxruntime, tokenizers and numpy.

The .onnx file is all it needs: the tokenizer, the label names and the maximum length travel in
its metadata. Texts are read in chunks, sorted by length inside each chunk so that batches carry
little padding, and written back in input order as they are done, so memory stays bounded on
inputs of any size.

    python export/infer.py --model runs/x/model.onnx --input texts.txt --output predictions.jsonl
    cat texts.txt | python export/infer.py --model model.onnx > predictions.jsonl

Input: .txt (one text per line: lines end at "\n" only, "\r\n" accepted), .jsonl (an object per
line, text in --text-field, optional "id"), .csv (a header row, text in --text-field, optional "id"
column), or stdin (txt unless --input-format says otherwise). Invalid UTF-8 is an error naming the
line and byte offset unless --invalid-utf8 replace. Output: JSONL (default) or CSV (--output x.csv
or --output-format csv), exactly one row per input line / csv row, in input order, with id, line,
label, score, the probability of every label, whether the text was truncated, and whether it was
empty (an empty or blank line gets label null and "empty": true, never a guess). Multi-label
models list every label over its threshold with its score; regression rows hold the value;
sentence-pair models read the second text from --pair-field (a JSONL key, a CSV/TSV column).
"""

from __future__ import annotations

import argparse
import csv
import errno
import hashlib
import io
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

# onnxruntime >= 1.29 collects telemetry on Linux and writes a device id and an event store under
# ~/.cache/Microsoft/DeveloperTools/.onnxruntime for every process; this switches it off entirely.
# It is read once, when onnxruntime starts, so it is set before onnxruntime is imported (a user's
# own ORT_DISABLE_TELEMETRY=0 wins). docs/export.md
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

import numpy as np  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

log = logging.getLogger("tfm_cls.infer")

# The marker every tfm_cls export carries (export/spec.py writes it; a test keeps the two equal).
FORMAT_KEY = "tfm_cls.format"
FORMAT_VERSION = "tfm_cls-onnx/1"
TASK = "text-classification"
# Every classifier export this script runs (export/spec.py: CLASSIFIER_TASKS, "-pair" for sentence pairs).
TASKS = {"text-classification": "single_label", "multi-label-classification": "multi_label",
         "text-regression": "regression"}
PAIR_SUFFIX = "-pair"
# Metadata a classifier export must carry, and the sha256 of the weights it was exported from
# (runs.WEIGHTS_DIGEST_KEY; checked against a model.safetensors beside the .onnx file).
REQUIRED_KEYS = ("tfm_cls.labels", "tfm_cls.max_length", "tfm_cls.model_config", "tfm_cls.tokenizer")
WEIGHTS_DIGEST_KEY = "tfm_cls.weights_sha256"
WEIGHTS_FILE = "model.safetensors"

INPUT_FORMATS = ("txt", "jsonl", "csv", "tsv")
OUTPUT_FORMATS = ("jsonl", "csv")
_EXTENSIONS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}


class InferenceError(Exception):
    """Bad model or bad input; the message names the file, the line and what was expected."""


def _ort():
    """onnxruntime, imported on first use: the text reader below is imported by tfm_cls without it."""
    import onnxruntime

    return onnxruntime


@dataclass
class Record:
    """One input line (txt, jsonl) or row (csv). `id` is the user's id, or the line/row number;
    `line` the line number in the input (for csv the row's last line)."""

    id: str
    text: str
    line: int
    pair: str | None = None
    """Sentence pairs: the second text."""

    @property
    def empty(self) -> bool:
        """Nothing to classify (empty or whitespace only): the row says so instead of guessing."""
        return not self.text.strip()


@dataclass
class Stats:
    """Counts reported at the end of a run."""

    texts: int = 0
    empty: int = 0
    truncated: int = 0
    invalid_utf8: int = 0
    empty_lines: list[int] = field(default_factory=list)  # the first few, for the report


# ---- the model ---------------------------------------------------------------------------------


def make_session(model_path: str, providers: list[str] | None = None, threads: int = 0) -> Any:
    """An onnxruntime session on `model_path`, with clear errors for a missing or unreadable file."""
    ort = _ort()
    if not os.path.isfile(model_path):
        raise InferenceError(f"model file not found: {model_path}")
    providers = providers or ["CPUExecutionProvider"]
    available = ort.get_available_providers()
    missing = [p for p in providers if p not in available]
    if missing:
        raise InferenceError(f"execution provider(s) {missing} not available here; available: {available}")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1  # one graph, run op after op: extra pools only contend
    try:
        return ort.InferenceSession(model_path, sess_options=options, providers=providers)
    except Exception as err:  # onnxruntime raises its own exception types for unreadable files
        raise InferenceError(f"{model_path} is not a readable ONNX model: {err}") from None


def read_metadata(session: Any, model_path: str) -> dict[str, str]:
    """The tfm_cls metadata of a classifier export; rejects models that are not ours."""
    meta = session.get_modelmeta().custom_metadata_map
    if meta.get(FORMAT_KEY) != FORMAT_VERSION:
        found = meta.get(FORMAT_KEY, "no such key")
        raise InferenceError(
            f"{model_path} is not a tfm_cls model: metadata {FORMAT_KEY!r} should be {FORMAT_VERSION!r}, "
            f"found {found!r}. Export one with `make export RUN=<run dir>`."
        )
    task = meta.get("tfm_cls.task") or ""
    if task.removesuffix(PAIR_SUFFIX) not in TASKS:
        raise InferenceError(f"{model_path} is a tfm_cls {task!r} model; this script runs {sorted(TASKS)} models")
    missing = [key for key in REQUIRED_KEYS if key not in meta]
    if missing:
        raise InferenceError(
            f"{model_path} carries the tfm_cls marker but lacks the metadata {missing}; "
            "re-export it with `tfm-cls export --run RUN`"
        )
    return meta


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_weights(meta: dict[str, str], model_path: str) -> None:
    """An export inside a run directory must come from that run's current weights: a retrained
    run (another model.safetensors) makes it stale. Outside a run directory nothing is checked."""
    weights = os.path.join(os.path.dirname(os.path.abspath(model_path)), WEIGHTS_FILE)
    expected = meta.get(WEIGHTS_DIGEST_KEY)
    if expected is None or not os.path.isfile(weights):
        return
    if file_sha256(weights) != expected:
        raise InferenceError(
            f"{model_path} was exported from other weights than {weights} beside it (the run was retrained "
            f"since); re-export it: tfm-cls export --run {os.path.dirname(weights) or '.'}"
        )


class Classifier:
    """A tfm_cls text classifier export: tokenizer, labels and ONNX session from one file."""

    def __init__(
        self,
        model_path: str,
        providers: list[str] | None = None,
        threads: int = 0,
        max_length: int | None = None,
    ):
        self.session = make_session(model_path, providers, threads)
        meta = read_metadata(self.session, model_path)
        check_weights(meta, model_path)
        try:
            self.labels: list[str] = json.loads(meta["tfm_cls.labels"])
            self.model_max_length = int(meta["tfm_cls.max_length"])
            self.pad_id = int(json.loads(meta["tfm_cls.model_config"])["pad_token_id"])
            self.tokenizer = Tokenizer.from_str(meta["tfm_cls.tokenizer"])
        except Exception as err:  # malformed JSON, a missing key, a tokenizer that does not parse
            raise InferenceError(f"{model_path}: unreadable tfm_cls metadata ({err}); re-export it") from None
        # [CLS] and [SEP] are added after truncation: a limit must leave room for one real token.
        shortest = self.tokenizer.num_special_tokens_to_add(False) + 1
        if max_length is not None and not shortest <= max_length <= self.model_max_length:
            raise InferenceError(
                f"--max-length must be in [{shortest}, {self.model_max_length}] for {model_path} "
                f"({shortest - 1} special tokens plus at least one text token), got {max_length}"
            )
        self.max_length = max_length or self.model_max_length
        self.tokenizer.no_padding()  # batches are padded here, to their own longest row
        # A pair is truncated by shortening its longer text first.
        self.tokenizer.enable_truncation(self.max_length, strategy="longest_first")
        self.output_names = [o.name for o in self.session.get_outputs()]
        task = meta["tfm_cls.task"]
        self.head = TASKS[task.removesuffix(PAIR_SUFFIX)]
        self.pair = task.endswith(PAIR_SUFFIX)
        try:
            self.ensure_label = json.loads(meta.get("tfm_cls.ensure_label", "true"))
            fixed = float(json.loads(meta.get("tfm_cls.fixed_threshold", "0.5")))
            saved = json.loads(meta.get("tfm_cls.thresholds", "null"))
        except (ValueError, TypeError) as err:
            raise InferenceError(f"{model_path}: unreadable tfm_cls thresholds ({err}); re-export it") from None
        self.thresholds = np.asarray(saved if saved is not None else [fixed] * len(self.labels), dtype=np.float64)

    def encode(self, texts: list[str]) -> tuple[list[list[int]], list[bool]]:
        """Token ids of each text (truncated to max_length) and whether it was truncated."""
        ids, _, truncated = self.encode_with_types(texts)
        return ids, truncated

    def encode_with_types(
        self, texts: list[str], pairs: list[str] | None = None
    ) -> tuple[list[list[int]], list[list[int]], list[bool]]:
        """Token ids and token types of each text or pair (truncated to max_length, a pair's
        longer side first), and whether it was truncated."""
        encodings = self.tokenizer.encode_batch(list(zip(texts, pairs)) if pairs is not None else texts)
        return [e.ids for e in encodings], [e.type_ids for e in encodings], [bool(e.overflowing) for e in encodings]

    def run(self, ids: list[list[int]], types: list[list[int]] | None = None) -> np.ndarray:
        """Scores for one batch of token id lists, padded here: probabilities [batch, num_classes]
        (softmax, or per-label sigmoid for multi-label), or values [batch] (regression)."""
        length = max(len(x) for x in ids)
        input_ids = np.full((len(ids), length), self.pad_id, dtype=np.int64)  # [batch, seq]
        attention_mask = np.zeros((len(ids), length), dtype=np.int64)  # [batch, seq], 1 = token
        token_type_ids = np.zeros((len(ids), length), dtype=np.int64)  # [batch, seq]
        for row, x in enumerate(ids):
            input_ids[row, : len(x)] = x
            attention_mask[row, : len(x)] = 1
            if types is not None:
                token_type_ids[row, : len(x)] = types[row]
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.pair:
            feeds["token_type_ids"] = token_type_ids
        if self.head == "regression":
            return self.session.run(["value"], feeds)[0]
        if "probabilities" in self.output_names:
            return self.session.run(["probabilities"], feeds)[0]
        logits = self.session.run(["logits"], feeds)[0]  # [batch, num_classes]
        return _softmax(logits)

    def predict_proba(
        self, texts: list[str], batch_size: int = 32, pairs: list[str] | None = None
    ) -> tuple[np.ndarray, list[bool]]:
        """Scores in input order ([len(texts), num_classes]; regression [len(texts)]); batches
        are formed by length."""
        if self.pair and pairs is None:
            raise InferenceError("this model classifies sentence pairs: give each text its second text")
        ids, types, truncated = self.encode_with_types(texts, pairs if self.pair else None)
        width = () if self.head == "regression" else (len(self.labels),)
        probs = np.empty((len(texts), *width), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            probs[rows] = self.run([ids[i] for i in rows], [types[i] for i in rows])
        return probs, truncated

    def decide(self, probs: np.ndarray) -> np.ndarray:
        """Multi-label decisions [N, C] (bool): probability >= the label's threshold; a row with
        none over its threshold gets its most probable label unless the export says otherwise."""
        chosen = probs >= self.thresholds[None, :]
        if self.ensure_label and len(chosen):
            empty = ~chosen.any(axis=1)
            chosen[empty, probs[empty].argmax(axis=1)] = True
        return chosen


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


# ---- reading -----------------------------------------------------------------------------------


def detect_format(path: str, given: str | None, allowed: tuple[str, ...], default: str) -> str:
    if given:
        return given
    if path == "-":
        return default
    ext = os.path.splitext(path)[1].lower()
    fmt = _EXTENSIONS.get(ext)
    if fmt not in allowed:
        raise InferenceError(f"cannot tell the format of {path} from its extension {ext!r}; pass a format flag")
    return fmt


def decoded_lines(stream, name: str, invalid_utf8: str, stats: Stats) -> Iterator[tuple[int, str]]:
    """(line number, text) for each line of a binary stream: lines end at b"\n" only (a "\r"
    before it is dropped; U+2028, U+0085 and form feeds are part of the text), the last line
    needs no newline, a UTF-8 byte-order mark at the start is dropped. Invalid UTF-8 is an
    InferenceError naming the line and byte offset, or with invalid_utf8="replace" U+FFFD,
    counted in `stats.invalid_utf8`. The one line reader of tfm_cls (predict, eval, quantize,
    pretraining text files use it too)."""
    offset = 0
    for lineno, raw in enumerate(stream, start=1):
        size = len(raw)
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            if invalid_utf8 != "replace":
                raise InferenceError(
                    f"{name}, line {lineno}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at byte offset "
                    f"{offset + err.start} of the file, column {err.start + 1} of the line); "
                    "fix the file or pass --invalid-utf8 replace to substitute U+FFFD"
                ) from None
            stats.invalid_utf8 += 1
            line = raw.decode("utf-8", errors="replace")
        if lineno == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark is not part of the text
        offset += size
        yield lineno, line


def read_records(
    stream, name: str, fmt: str, text_field: str, invalid_utf8: str, stats: Stats, pair_field: str | None = None
) -> Iterator[Record]:
    """One Record per input line (txt, jsonl) or csv / tsv row, lazily and in order; an empty or
    blank one included (Record.empty), so outputs align with inputs by position. With
    `pair_field`, each non-empty record also holds a pair's second text (jsonl field, csv/tsv
    column); a row without it is an error naming the file and line."""
    lines = decoded_lines(stream, name, invalid_utf8, stats)
    if pair_field is not None and fmt == "txt":
        raise InferenceError(f"{name}: sentence pairs need jsonl, csv or tsv input (fields {text_field!r} and {pair_field!r})")

    def second(text, value, lineno: int):
        if pair_field is None or not (text or "").strip():
            return None
        if not isinstance(value, str) or not value.strip():
            raise InferenceError(f"{name}, line {lineno}: the pair's second text {pair_field!r} is missing or empty")
        return value

    if fmt == "txt":
        for lineno, text in lines:
            yield Record(str(lineno), text, lineno)
    elif fmt == "jsonl":
        for lineno, line in lines:
            if not line.strip():
                yield Record(str(lineno), "", lineno)
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InferenceError(f"{name}, line {lineno}: not valid JSON ({err.msg})") from None
            if not isinstance(obj, dict) or text_field not in obj:
                keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
                raise InferenceError(
                    f"{name}, line {lineno}: expected an object with key {text_field!r}, got {keys}; pass --text-field"
                )
            if not isinstance(obj[text_field], (str, type(None))):
                raise InferenceError(
                    f"{name}, line {lineno}: key {text_field!r} holds {type(obj[text_field]).__name__}, expected a string"
                )
            text = obj[text_field] or ""
            yield Record(str(obj.get("id", lineno)), text, lineno, second(text, obj.get(pair_field), lineno))
    elif fmt in ("csv", "tsv"):
        # csv pulls further lines itself for quoted fields that span lines; line_num tracks them.
        numbered = iter(lines)
        current = [0]

        def text_lines() -> Iterator[str]:
            for lineno, text in numbered:
                current[0] = lineno
                yield text

        reader = csv.DictReader(text_lines(), delimiter="\t" if fmt == "tsv" else ",")
        wanted = [text_field] + ([pair_field] if pair_field else [])
        if reader.fieldnames is None or any(f not in reader.fieldnames for f in wanted):
            raise InferenceError(
                f"{name}: expected a header row with column(s) {wanted}, got {reader.fieldnames}"
            )
        for row_number, row in enumerate(reader, start=1):
            text = row[text_field] or ""
            pair = second(text, row.get(pair_field) if pair_field else None, current[0])
            yield Record(str(row.get("id") or row_number), text, current[0], pair)
    else:
        raise InferenceError(f"unknown input format {fmt!r}; expected one of {INPUT_FORMATS}")


def open_input(path: str):
    """The binary stream of `path` (`-` = stdin); a missing path or a folder is an InferenceError.
    Special files (/dev/null, pipes, process substitution) are read like files."""
    if path == "-":
        buffer = getattr(sys.stdin, "buffer", None)  # a text-only stdin (an embedding program) is encoded
        return buffer if buffer is not None else io.BytesIO(sys.stdin.read().encode("utf-8"))
    if not os.path.exists(path):
        raise InferenceError(f"input file not found: {path}")
    if os.path.isdir(path):
        raise InferenceError(f"input {path} is a folder; pass a file (or - for stdin)")
    try:
        return open(path, "rb")  # noqa: SIM115
    except OSError as err:
        raise InferenceError(f"cannot read input {path}: {err.strerror}") from None


def chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


# ---- writing -----------------------------------------------------------------------------------


def prediction_row(record: Record, labels: list[str], probs: np.ndarray | None, truncated: bool) -> dict[str, Any]:
    """The JSONL row of one input line; an empty line's row has no label and says it is empty."""
    if probs is None:
        return {"id": record.id, "line": record.line, "label": None, "score": None, "probabilities": None,
                "truncated": False, "empty": True}
    best = int(probs.argmax())
    return {
        "id": record.id,
        "line": record.line,
        "label": labels[best],
        "score": round(float(probs[best]), 6),
        "probabilities": {label: round(float(p), 6) for label, p in zip(labels, probs)},
        "truncated": truncated,
        "empty": False,
    }


def task_row(record: Record, head: str, labels: list[str], scores, truncated: bool, chosen) -> dict[str, Any]:
    """The JSONL row of a multi-label (every label over its threshold, most probable first, with
    its score) or regression (the value) prediction; an empty line's row says it is empty."""
    row: dict[str, Any] = {"id": record.id, "line": record.line}
    if scores is None:
        row.update({"value": None} if head == "regression" else {"labels": None, "scores": None, "probabilities": None})
        return {**row, "truncated": False, "empty": True}
    if head == "regression":
        row["value"] = round(float(scores), 6)
    else:
        picked = [j for j in np.argsort(-scores, kind="stable") if chosen[j]]
        row.update(labels=[labels[j] for j in picked], scores=[round(float(scores[j]), 6) for j in picked],
                   probabilities={label: round(float(p), 6) for label, p in zip(labels, scores)})
    return {**row, "truncated": truncated, "empty": False}


class Writer:
    """Writes predictions as JSONL or CSV, one row per record, as they come."""

    def __init__(self, stream, fmt: str, labels: list[str], classifier: Classifier | None = None):
        self.stream, self.fmt, self.labels = stream, fmt, labels
        self.head = classifier.head if classifier is not None else "single_label"
        if fmt == "csv":
            self.csv = csv.writer(stream)
            if self.head == "regression":
                self.csv.writerow(["id", "line", "value", "truncated", "empty"])
            elif self.head == "multi_label":
                self.csv.writerow(["id", "line", "labels", *(f"prob_{label}" for label in labels), "truncated", "empty"])
            else:
                self.csv.writerow(["id", "line", "label", "score", *(f"prob_{label}" for label in labels), "truncated", "empty"])

    def write(self, record: Record, probs: np.ndarray | None, truncated: bool, chosen: np.ndarray | None = None) -> None:
        if self.head != "single_label":
            row = task_row(record, self.head, self.labels, probs, truncated, chosen)
            if self.fmt == "jsonl":
                self.stream.write(json.dumps(row, ensure_ascii=False) + "\n")
            elif self.head == "regression":
                self.csv.writerow([record.id, record.line, "" if probs is None else f"{float(probs):.6f}",
                                   int(truncated), int(probs is None)])
            else:
                probabilities = [""] * len(self.labels) if probs is None else [f"{p:.6f}" for p in probs]
                self.csv.writerow([record.id, record.line, "|".join(row["labels"] or []), *probabilities,
                                   int(truncated), int(probs is None)])
            return
        if self.fmt == "jsonl":
            row = prediction_row(record, self.labels, probs, truncated)
            self.stream.write(json.dumps(row, ensure_ascii=False) + "\n")
        elif probs is None:
            self.csv.writerow([record.id, record.line, "", "", *([""] * len(self.labels)), 0, 1])
        else:
            best = int(probs.argmax())
            self.csv.writerow(
                [record.id, record.line, self.labels[best], f"{probs[best]:.6f}", *(f"{p:.6f}" for p in probs),
                 int(truncated), 0]
            )


def _full(err: OSError) -> bool:
    return err.errno in (errno.ENOSPC, errno.EDQUOT)


class OutputFile:
    """An output file written beside its target under a temporary name and renamed into place only
    when complete: a failure (a full disk, a bad input line) leaves no partial file behind."""

    def __init__(self, path: str):
        self.path = path
        folder = os.path.dirname(os.path.abspath(path))
        try:
            fd, self.tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=folder)
        except OSError as err:
            raise self.error(err) from None
        self.stream = os.fdopen(fd, "w", encoding="utf-8", newline="")

    def error(self, err: OSError) -> InferenceError:
        if _full(err):
            return InferenceError(f"no space left on device writing {self.path}; free some space or write elsewhere "
                                  "(no output file was written)")
        return InferenceError(f"cannot write {self.path}: {err.strerror or err}")

    def commit(self) -> None:
        try:
            self.stream.flush()
            os.fsync(self.stream.fileno())
            self.stream.close()
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(self.tmp, 0o666 & ~mask)
            os.replace(self.tmp, self.path)
        except OSError as err:
            self.discard()
            raise self.error(err) from None

    def discard(self) -> None:
        try:
            self.stream.close()
        except OSError:
            pass  # a full disk again while flushing: the file goes anyway
        if os.path.exists(self.tmp):
            os.remove(self.tmp)


# ---- the command -------------------------------------------------------------------------------


def _progress(disable: bool):
    """A tqdm bar on a terminal that appears once a run has lasted a second; None without tqdm
    or when stderr is redirected (a log file gets no carriage-return lines)."""
    if disable or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(unit="text", file=sys.stderr, delay=1.0, dynamic_ncols=True)


def classify_stream(classifier: Classifier, records: Iterable[Record], writer: Writer, args, stats: Stats) -> None:
    bar = _progress(args.no_progress)
    # A chunk is sorted by length and cut into batches; its size bounds the memory used.
    for chunk in chunks(records, args.batch_size * args.chunk_batches):
        full = [r for r in chunk if not r.empty]
        pairs = [r.pair for r in full] if classifier.pair else None
        probs, truncated = classifier.predict_proba([r.text for r in full], args.batch_size, pairs) if full else ([], [])
        if classifier.head == "multi_label" and full:  # the decisions ride along with the scores
            results = iter(zip(probs, truncated, classifier.decide(probs)))
        else:
            results = iter(zip(probs, truncated))
        for record in chunk:
            if record.empty:
                writer.write(record, None, False)
                stats.empty += 1
                if len(stats.empty_lines) < 5:
                    stats.empty_lines.append(record.line)
            else:
                writer.write(record, *next(results))
        stats.texts += len(chunk)
        stats.truncated += sum(truncated)
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True, help="an .onnx file written by `tfm-cls export`")
    p.add_argument("--input", default="-", help="txt / jsonl / csv file, or - for stdin (default)")
    p.add_argument("--output", default="-", help="jsonl / csv file, or - for stdout (default)")
    p.add_argument("--input-format", choices=INPUT_FORMATS, help="default: from the extension; txt for stdin")
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, help="default: from the extension; jsonl for stdout")
    p.add_argument("--text-field", default="text", help="the text's key (jsonl) or column (csv/tsv)")
    p.add_argument("--pair-field", default="text_pair",
                   help="sentence-pair models: the second text's key (jsonl) or column (csv/tsv) (default: text_pair)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--chunk-batches", type=int, default=32, help="batches read and sorted by length at once")
    p.add_argument("--max-length", type=int, help="truncate to fewer tokens than the model's maximum")
    p.add_argument(
        "--providers", default="CPUExecutionProvider", help="comma-separated onnxruntime execution providers"
    )
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: onnxruntime decides)")
    p.add_argument(
        "--invalid-utf8",
        choices=("error", "replace"),
        default="error",
        help="error: stop, naming the line (default); replace: substitute U+FFFD and count",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    if args.batch_size < 1 or args.chunk_batches < 1:
        print("error: --batch-size and --chunk-batches must be positive", file=sys.stderr)
        return 2
    stats = Stats()
    start = time.perf_counter()
    try:
        classifier = Classifier(
            args.model, [p.strip() for p in args.providers.split(",") if p.strip()], args.threads, args.max_length
        )
        in_fmt = detect_format(args.input, args.input_format, INPUT_FORMATS, "txt")
        out_fmt = detect_format(args.output, args.output_format, OUTPUT_FORMATS, "jsonl")
        source = open_input(args.input)
        output = None if args.output == "-" else OutputFile(args.output)
        try:
            name = "<stdin>" if args.input == "-" else args.input
            pair_field = args.pair_field if classifier.pair else None
            records = read_records(source, name, in_fmt, args.text_field, args.invalid_utf8, stats, pair_field)
            sink = sys.stdout if output is None else output.stream
            classify_stream(classifier, records, Writer(sink, out_fmt, classifier.labels, classifier), args, stats)
            if output is None:
                sys.stdout.flush()
            else:
                output.commit()
                output = None
        except OSError as err:
            if output is None:
                raise InferenceError(f"cannot write the output: {err.strerror or err}") from None
            raise output.error(err) from None
        finally:
            if output is not None:
                output.discard()
            if args.input != "-":
                source.close()
    except InferenceError as err:
        print(f"error: {err}", file=sys.stderr)  # the convention of `tfm-cls`: one line, exit 2
        return 2
    seconds = time.perf_counter() - start
    log.info("classified %d texts in %.1f s (%.0f texts/s)", stats.texts, seconds, stats.texts / max(seconds, 1e-9))
    if stats.empty:
        log.warning("%d empty lines (e.g. lines %s) got a row with \"empty\": true and no label", stats.empty,
                    stats.empty_lines)
    if stats.truncated:
        log.warning("truncated %d texts to %d tokens", stats.truncated, classifier.max_length)
    if stats.invalid_utf8:
        log.warning("replaced invalid UTF-8 on %d lines with U+FFFD", stats.invalid_utf8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
