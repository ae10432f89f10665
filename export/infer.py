#!/usr/bin/env python
"""Classify texts with an exported tfm_cls model, using only onnxruntime, tokenizers and numpy.

The .onnx file is all it needs: the tokenizer, the label names and the maximum length travel in
its metadata. Texts are read in chunks, sorted by length inside each chunk so that batches carry
little padding, and written back in input order as they are done, so memory stays bounded on
inputs of any size.

    python export/infer.py --model runs/x/model.onnx --input texts.txt --output predictions.jsonl
    cat texts.txt | python export/infer.py --model model.onnx > predictions.jsonl

Input: .txt (one text per line), .jsonl (an object per line, text in --text-field, optional
"id"), .csv / .tsv (a header row, text in --text-field, optional "id" column), or stdin (txt unless
--input-format says otherwise); a sentence-pair model reads the second text from --pair-field.
Output: JSONL (default) or CSV (--output x.csv or --output-format csv), one row per text, in input
order: id, label, score, the probability of every label, and whether the text was truncated;
multi-label models list every label over its threshold with its score; regression rows hold the value.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

log = logging.getLogger("tfm_cls.infer")

# The marker every tfm_cls export carries (export/spec.py writes it; a test keeps the two equal).
FORMAT_KEY = "tfm_cls.format"
FORMAT_VERSION = "tfm_cls-onnx/1"
TASK = "text-classification"
# Every classifier export this script runs (export/spec.py: CLASSIFIER_TASKS, "-pair" for sentence pairs).
TASKS = {"text-classification": "single_label", "multi-label-classification": "multi_label",
         "text-regression": "regression"}
PAIR_SUFFIX = "-pair"

INPUT_FORMATS = ("txt", "jsonl", "csv", "tsv")
OUTPUT_FORMATS = ("jsonl", "csv")
_EXTENSIONS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}


class InferenceError(Exception):
    """Bad model or bad input; the message names the file, the line and what was expected."""


@dataclass
class Record:
    """One text to classify; `id` is the user's id, or the line/row number where there is none."""

    id: str
    text: str
    pair: str | None = None
    """Sentence pairs: the second text."""


@dataclass
class Stats:
    """Counts reported at the end of a run."""

    texts: int = 0
    empty: int = 0
    truncated: int = 0
    invalid_utf8: int = 0
    empty_lines: list[int] = field(default_factory=list)  # the first few, for the report


# ---- the model ---------------------------------------------------------------------------------


def make_session(model_path: str, providers: list[str] | None = None, threads: int = 0) -> ort.InferenceSession:
    """An onnxruntime session on `model_path`, with clear errors for a missing or unreadable file."""
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


def read_metadata(session: ort.InferenceSession, model_path: str) -> dict[str, str]:
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
    return meta


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
        self.labels: list[str] = json.loads(meta["tfm_cls.labels"])
        self.model_max_length = int(meta["tfm_cls.max_length"])
        if max_length is not None and not 1 <= max_length <= self.model_max_length:
            raise InferenceError(f"--max-length must be in [1, {self.model_max_length}], got {max_length}")
        self.max_length = max_length or self.model_max_length
        self.pad_id = int(json.loads(meta["tfm_cls.model_config"])["pad_token_id"])
        self.tokenizer = Tokenizer.from_str(meta["tfm_cls.tokenizer"])
        self.tokenizer.no_padding()  # batches are padded here, to their own longest row
        # A pair is truncated by shortening its longer text first.
        self.tokenizer.enable_truncation(self.max_length, strategy="longest_first")
        self.output_names = [o.name for o in self.session.get_outputs()]
        task = meta["tfm_cls.task"]
        self.head = TASKS[task.removesuffix(PAIR_SUFFIX)]
        self.pair = task.endswith(PAIR_SUFFIX)
        self.ensure_label = json.loads(meta.get("tfm_cls.ensure_label", "true"))
        fixed = float(json.loads(meta.get("tfm_cls.fixed_threshold", "0.5")))
        saved = json.loads(meta.get("tfm_cls.thresholds", "null"))
        self.thresholds = np.asarray(saved if saved is not None else [fixed] * len(self.labels), dtype=np.float64)

    def encode(self, texts: list[str], pairs: list[str] | None = None) -> tuple[list[list[int]], list[list[int]], list[bool]]:
        """Token ids and token types of each text or pair (truncated to max_length), and whether
        it was truncated."""
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
        ids, types, truncated = self.encode(texts, pairs if self.pair else None)
        width = () if self.head == "regression" else (len(self.labels),)
        probs = np.empty((len(texts), *width), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            probs[rows] = self.run([ids[i] for i in rows], [types[i] for i in rows])
        return probs, truncated

    def decide(self, probs: np.ndarray) -> np.ndarray:
        """Multi-label decisions [N, C] (0/1): probability >= the label's threshold; a row with
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
    """(line number, text without the newline) for each line of a binary stream."""
    for lineno, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            if invalid_utf8 == "error":
                raise InferenceError(
                    f"{name}:{lineno}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}); "
                    "fix the file or pass --invalid-utf8 replace to substitute U+FFFD"
                ) from None
            stats.invalid_utf8 += 1
            line = raw.decode("utf-8", errors="replace")
        if lineno == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark is not part of the text
        yield lineno, line.rstrip("\r\n")


def read_records(
    stream, name: str, fmt: str, text_field: str, invalid_utf8: str, stats: Stats, pair_field: str | None = None
) -> Iterator[Record]:
    """Records from a txt / jsonl / csv / tsv binary stream, lazily; empty texts are counted and
    skipped. With `pair_field`, each record also holds a pair's second text (jsonl field, csv/tsv
    column); a row without it is an error naming the file and line."""
    lines = decoded_lines(stream, name, invalid_utf8, stats)

    def keep(lineno: int, text: str) -> bool:
        if text.strip():
            return True
        stats.empty += 1
        if len(stats.empty_lines) < 5:
            stats.empty_lines.append(lineno)
        return False

    if pair_field is not None and fmt == "txt":
        raise InferenceError(f"{name}: sentence pairs need jsonl, csv or tsv input (fields {text_field!r} and {pair_field!r})")

    def second(value, where: str):
        if pair_field is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise InferenceError(f"{where}: the pair's second text {pair_field!r} is missing or empty")
        return value

    if fmt == "txt":
        for lineno, text in lines:
            if keep(lineno, text):
                yield Record(str(lineno), text)
    elif fmt == "jsonl":
        for lineno, line in lines:
            if not line.strip():
                keep(lineno, "")
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InferenceError(f"{name}:{lineno}: not valid JSON ({err.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
                raise InferenceError(
                    f"{name}:{lineno}: expected an object with a string field {text_field!r}, got {line[:80]!r}"
                )
            if keep(lineno, obj[text_field]):
                pair = second(obj.get(pair_field), f"{name}:{lineno}")
                yield Record(str(obj.get("id", lineno)), obj[text_field], pair)
    elif fmt in ("csv", "tsv"):
        # csv pulls further lines itself for quoted fields that span lines; line_num tracks them.
        text_lines = (text for _, text in lines)
        reader = csv.DictReader(text_lines, delimiter="\t" if fmt == "tsv" else ",")
        wanted = [text_field] + ([pair_field] if pair_field else [])
        if reader.fieldnames is None or any(f not in reader.fieldnames for f in wanted):
            raise InferenceError(
                f"{name}: expected a header row with column(s) {wanted}, got {reader.fieldnames}"
            )
        for row_number, row in enumerate(reader, start=1):
            text = row[text_field] or ""
            if keep(reader.line_num, text):
                pair = second(row.get(pair_field) if pair_field else None, f"{name}:{reader.line_num}")
                yield Record(str(row.get("id") or row_number), text, pair)
    else:
        raise InferenceError(f"unknown input format {fmt!r}; expected one of {INPUT_FORMATS}")


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


class Writer:
    """Writes predictions as JSONL or CSV, one row per record, as they come."""

    def __init__(self, stream, fmt: str, labels: list[str], classifier: Classifier | None = None):
        self.stream, self.fmt, self.labels = stream, fmt, labels
        self.head = classifier.head if classifier is not None else "single_label"
        self.classifier = classifier
        if fmt == "csv":
            self.csv = csv.writer(stream)
            if self.head == "regression":
                self.csv.writerow(["id", "value", "truncated"])
            elif self.head == "multi_label":
                self.csv.writerow(["id", "labels", *(f"prob_{label}" for label in labels), "truncated"])
            else:
                self.csv.writerow(["id", "label", "score", *(f"prob_{label}" for label in labels), "truncated"])

    def write(self, record: Record, probs: np.ndarray, truncated: bool, chosen: np.ndarray | None = None) -> None:
        """One output row: single-label label + score + probabilities; multi-label every label
        over its threshold (most probable first) with its score; regression the value."""
        if self.head == "regression":
            if self.fmt == "jsonl":
                row = {"id": record.id, "value": round(float(probs), 6), "truncated": truncated}
                self.stream.write(json.dumps(row, ensure_ascii=False) + "\n")
            else:
                self.csv.writerow([record.id, f"{float(probs):.6f}", int(truncated)])
            return
        if self.head == "multi_label":
            picked = [j for j in np.argsort(-probs, kind="stable") if chosen is not None and chosen[j]]
            if self.fmt == "jsonl":
                row = {
                    "id": record.id,
                    "labels": [self.labels[j] for j in picked],
                    "scores": [round(float(probs[j]), 6) for j in picked],
                    "probabilities": {label: round(float(p), 6) for label, p in zip(self.labels, probs)},
                    "truncated": truncated,
                }
                self.stream.write(json.dumps(row, ensure_ascii=False) + "\n")
            else:
                names = "|".join(self.labels[j] for j in picked)
                self.csv.writerow([record.id, names, *(f"{p:.6f}" for p in probs), int(truncated)])
            return
        best = int(probs.argmax())
        if self.fmt == "jsonl":
            row = {
                "id": record.id,
                "label": self.labels[best],
                "score": round(float(probs[best]), 6),
                "probabilities": {label: round(float(p), 6) for label, p in zip(self.labels, probs)},
                "truncated": truncated,
            }
            self.stream.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            self.csv.writerow(
                [record.id, self.labels[best], f"{probs[best]:.6f}", *(f"{p:.6f}" for p in probs), int(truncated)]
            )


# ---- the command -------------------------------------------------------------------------------


def _progress(disable: bool):
    """A tqdm bar that appears only once a run has lasted a second; None without tqdm."""
    if disable:
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
        pairs = [r.pair for r in chunk] if classifier.pair else None
        probs, truncated = classifier.predict_proba([r.text for r in chunk], args.batch_size, pairs)
        chosen = classifier.decide(probs) if classifier.head == "multi_label" else [None] * len(chunk)
        for record, p, t, c in zip(chunk, probs, truncated, chosen):
            writer.write(record, p, t, c)
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
        if args.input != "-" and not os.path.isfile(args.input):
            raise InferenceError(f"input file not found: {args.input}")
        # Written to a side file and renamed at the end: a failed run leaves no half-written output.
        partial = None if args.output == "-" else args.output + ".partial"
        source = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
        sink = sys.stdout if partial is None else open(partial, "w", encoding="utf-8", newline="")  # noqa: SIM115
        done = False
        try:
            name = "<stdin>" if args.input == "-" else args.input
            pair_field = args.pair_field if classifier.pair else None
            records = read_records(source, name, in_fmt, args.text_field, args.invalid_utf8, stats, pair_field)
            classify_stream(classifier, records, Writer(sink, out_fmt, classifier.labels, classifier), args, stats)
            done = True
        finally:
            if source is not sys.stdin.buffer:
                source.close()
            if partial is None:
                sink.flush()
            else:
                sink.close()
                if done:
                    os.replace(partial, args.output)
                else:
                    os.remove(partial)
    except InferenceError as err:
        print(f"error: {err}", file=sys.stderr)  # the convention of `tfm-cls`: one line, exit 2
        return 2
    seconds = time.perf_counter() - start
    log.info("classified %d texts in %.1f s (%.0f texts/s)", stats.texts, seconds, stats.texts / max(seconds, 1e-9))
    if stats.empty:
        log.warning("skipped %d empty texts (lines %s%s)", stats.empty, stats.empty_lines, "..." * (stats.empty > 5))
    if stats.truncated:
        log.warning("truncated %d texts to %d tokens", stats.truncated, classifier.max_length)
    if stats.invalid_utf8:
        log.warning("replaced invalid UTF-8 on %d lines with U+FFFD", stats.invalid_utf8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
