#!/usr/bin/env python
"""Classify texts with an exported tfm_cls model, using only onnxruntime, tokenizers and numpy.

The .onnx file is all it needs: the tokenizer, the label names, the maximum length and the run's
long-text policy (truncation strategy, chunking) travel in its metadata. Texts are read in buffers
(--buffer-texts), sorted by length inside each buffer into batches of at most --max-tokens padded
tokens (or --batching fixed: --batch-size texts), and written back in input order as they are
done, so memory stays bounded on inputs of any size. A text longer than the model's length is
truncated by the policy (--truncation head / tail / head+tail), or with --chunk classified as
overlapping windows (--stride) whose logits or probabilities are aggregated (--aggregate mean /
max); its row then says how many windows it had. docs/long-documents.md

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
    windows: int = 0
    empty_lines: list[int] = field(default_factory=list)  # the first few, for the report


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


# ---- long texts: truncation strategies, windows, batches ----------------------------------------
# One implementation for both inference paths: tfm_cls (training, eval, `tfm-cls predict`) imports
# these from here, because this script must run as a single file without tfm_cls. docs/long-documents.md

TRUNCATIONS = ("head", "tail", "head+tail")
AGGREGATES = ("mean", "max")
AGGREGATE_SCORES = ("logits", "probabilities")
BATCHINGS = ("tokens", "fixed")
# ONNX metadata key with the LongText policy of the run (JSON); absent in older exports (= head).
LONG_TEXT_KEY = "tfm_cls.long_text"
DEFAULT_MAX_TOKENS = 1024  # benchmarks/bench_infer.py --batching-only: best or tied on sst2, 1 and 2 threads


@dataclass(frozen=True)
class LongText:
    """How a text with more tokens than the model's length becomes model inputs.

    `truncation` keeps the first (`head`), the last (`tail`) or the first round(budget *
    head_fraction) and last remaining (`head+tail`) text tokens, where budget = max_length minus
    the special tokens ([CLS], [SEP]), which are always kept. With `chunk` nothing is cut at
    inference: the text tokens are split into windows of `budget` tokens, each sharing `stride`
    tokens with the one before (the last window is aligned to the text's end), each window is
    classified with its own special tokens, and the windows' logits (or probabilities) are
    aggregated by their mean or max. `stride` None = budget // 4."""

    truncation: str = "head"
    head_fraction: float = 0.25
    chunk: bool = False
    stride: int | None = None
    aggregate: str = "mean"
    scores: str = "logits"

    def problems(self) -> list[str]:
        """What is wrong with these values (empty when they can work)."""
        out = []
        if self.truncation not in TRUNCATIONS:
            out.append(f"truncation must be one of {list(TRUNCATIONS)}, got {self.truncation!r}")
        if not 0.0 <= self.head_fraction <= 1.0:
            out.append(f"head_fraction must be in [0, 1], got {self.head_fraction}")
        if self.stride is not None and self.stride < 0:
            out.append(f"stride must be >= 0, got {self.stride}")
        if self.aggregate not in AGGREGATES:
            out.append(f"aggregate must be one of {list(AGGREGATES)}, got {self.aggregate!r}")
        if self.scores not in AGGREGATE_SCORES:
            out.append(f"aggregate scores must be one of {list(AGGREGATE_SCORES)}, got {self.scores!r}")
        return out

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> LongText:
        """The policy of an export's metadata; an export without one (older tfm_cls) is `head`."""
        if not text:
            return cls()
        fields = json.loads(text)
        known = {k: v for k, v in fields.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def special_affixes(tokenizer: Tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer's post-processor puts before and after a text ([CLS] and [SEP] for
    ours, <s> and </s> for RoBERTa), found by encoding a probe with and without them."""
    probe = "a"
    full = tokenizer.encode(probe).ids
    bare = tokenizer.encode(probe, add_special_tokens=False).ids
    for start in range(len(full) - len(bare) + 1):
        if full[start : start + len(bare)] == bare:
            return full[:start], full[start + len(bare) :]
    raise InferenceError("cannot find where the tokenizer's special tokens go (probe text not found in its encoding)")


@dataclass
class Encoded:
    """Model inputs of a list of texts: `ids` holds one row per window (one per text unless
    chunking), the rows of text i are the windows[i] rows after those of text i - 1."""

    ids: list[list[int]]
    truncated: list[bool]
    windows: list[int]


class TextEncoder:
    """Token ids of texts under one maximum length and LongText policy (the only place where a
    text is cut or split into windows, for training, eval, predict and ONNX inference)."""

    def __init__(self, tokenizer: Tokenizer, max_length: int, policy: LongText | None = None):
        self.policy = policy or LongText()
        problems = self.policy.problems()
        if problems:
            raise InferenceError("; ".join(problems))
        self.tokenizer = Tokenizer.from_str(tokenizer.to_str())  # our own copy: no padding, no truncation
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.prefix, self.suffix = special_affixes(self.tokenizer)
        self.max_length = max_length
        self.budget = max_length - len(self.prefix) - len(self.suffix)  # text tokens per row
        if self.budget < 1:
            raise InferenceError(
                f"max_length {max_length} leaves no room for text after {len(self.prefix) + len(self.suffix)} special tokens"
            )
        stride = self.budget // 4 if self.policy.stride is None else self.policy.stride
        if self.policy.chunk and stride >= self.budget:
            raise InferenceError(
                f"stride {stride} must be smaller than the window's {self.budget} text tokens "
                f"(max_length {max_length} minus {max_length - self.budget} special tokens)"
            )
        self.stride = stride
        head = round(self.budget * self.policy.head_fraction)
        self.head = {"head": self.budget, "tail": 0}.get(self.policy.truncation, head)

    def _wrap(self, content: list[int]) -> list[int]:
        return self.prefix + content + self.suffix

    def cut(self, content: list[int]) -> list[int]:
        """The kept text tokens of one over-long text, by the truncation strategy."""
        tail = self.budget - self.head
        return content[: self.head] + (content[len(content) - tail :] if tail else [])

    def window_starts(self, n: int) -> list[int]:
        """Start offsets of the windows over n text tokens: every `budget - stride` tokens, the
        last one ending at the text's end (so every window is full and every token covered)."""
        if n <= self.budget:
            return [0]
        step = self.budget - self.stride
        return [*range(0, n - self.budget, step), n - self.budget]

    def encode(self, texts: list[str]) -> Encoded:
        encodings = self.tokenizer.encode_batch(texts) if texts else []
        a, b = len(self.prefix), len(self.suffix)
        ids, truncated, windows = [], [], []
        for e in encodings:
            full = e.ids
            content = full[a : len(full) - b]
            if len(content) <= self.budget:
                ids.append(full)
                truncated.append(False)
                windows.append(1)
            elif self.policy.chunk:
                starts = self.window_starts(len(content))
                ids.extend(self._wrap(content[s : s + self.budget]) for s in starts)
                truncated.append(False)
                windows.append(len(starts))
            else:
                ids.append(self._wrap(self.cut(content)))
                truncated.append(True)
                windows.append(1)
        return Encoded(ids, truncated, windows)


def aggregate_windows(logits: np.ndarray, windows: list[int] | np.ndarray, how: str = "mean", scores: str = "logits") -> np.ndarray:
    """Logits [num_texts, C] from the logits of their windows [sum(windows), C] (text i's windows
    contiguous, in order): the mean or max of the windows' logits, or the log of the mean / max
    of their probabilities (so softmax of the result gives the aggregated, renormalised
    probabilities). Texts with one window keep their logits unchanged."""
    windows = np.asarray(windows, dtype=np.int64)
    if logits.shape[0] != int(windows.sum()):
        raise ValueError(f"{logits.shape[0]} window rows for {int(windows.sum())} windows")
    if len(windows) == 0 or (windows == 1).all():
        return logits
    values = _softmax(logits.astype(np.float64)) if scores == "probabilities" else logits.astype(np.float64)
    starts = np.concatenate([[0], np.cumsum(windows)[:-1]])
    if how == "mean":
        out = np.add.reduceat(values, starts, axis=0) / windows[:, None]
    else:
        out = np.maximum.reduceat(values, starts, axis=0)
    if scores == "probabilities":
        out = np.log(np.maximum(out, 1e-30))
    out = out.astype(logits.dtype)
    single = windows == 1
    out[single] = logits[starts[single]]  # bit for bit what one row gave
    return out


def plan_batches(lengths: list[int], batching: str = "tokens", batch_size: int = 32,
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> list[list[int]]:
    """Row indices grouped into batches, sorted by length (stable) so that little padding is needed.
    `fixed`: `batch_size` rows each. `tokens`: as many rows as fit rows x longest <= max_tokens
    (padded tokens; a row longer than max_tokens is a batch alone), so short texts come in big
    batches and long ones in small."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    if batching == "fixed":
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * lengths[i] > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def pad_batch(ids: list[list[int]], rows: list[int], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """input_ids and attention_mask [len(rows), longest] (int64) of the chosen rows."""
    width = max(len(ids[i]) for i in rows)
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)  # [batch, seq]
    attention_mask = np.zeros((len(rows), width), dtype=np.int64)  # [batch, seq], 1 = token
    for r, i in enumerate(rows):
        input_ids[r, : len(ids[i])] = ids[i]
        attention_mask[r, : len(ids[i])] = 1
    return input_ids, attention_mask


def pad_types(types: list[list[int]] | None, rows: list[int], width: int) -> np.ndarray:
    """token_type_ids [len(rows), width] (int64) of the chosen rows; 0 under padding, and
    everywhere when `types` is None."""
    token_type_ids = np.zeros((len(rows), width), dtype=np.int64)  # [batch, seq]
    if types is not None:
        for r, i in enumerate(rows):
            token_type_ids[r, : len(types[i])] = types[i]
    return token_type_ids


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


def file_sha256(path: str | os.PathLike) -> str:
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
    """A tfm_cls text classifier export: tokenizer, labels, long-text policy and ONNX session from
    one file. `long_text` overrides fields of the policy the export carries (LONG_TEXT_KEY);
    `batching` / `batch_size` / `max_tokens` say how rows are grouped (plan_batches)."""

    def __init__(
        self,
        model_path: str,
        providers: list[str] | None = None,
        threads: int = 0,
        max_length: int | None = None,
        long_text: dict[str, Any] | None = None,
        batching: str = "tokens",
        batch_size: int = 32,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ):
        self.session = make_session(model_path, providers, threads)
        meta = read_metadata(self.session, model_path)
        check_weights(meta, model_path)
        try:
            self.labels: list[str] = json.loads(meta["tfm_cls.labels"])
            self.model_max_length = int(meta["tfm_cls.max_length"])
            self.pad_id = int(json.loads(meta["tfm_cls.model_config"])["pad_token_id"])
            self.tokenizer = Tokenizer.from_str(meta["tfm_cls.tokenizer"])
            saved = LongText.from_json(meta.get(LONG_TEXT_KEY))
        except Exception as err:  # malformed JSON, a missing key, a tokenizer that does not parse
            raise InferenceError(f"{model_path}: unreadable tfm_cls metadata ({err}); re-export it") from None
        # [CLS] and [SEP] are added after truncation: a limit must leave room for one real token.
        shortest = self.tokenizer.num_special_tokens_to_add(False) + 1
        if max_length is not None and not shortest <= max_length <= self.model_max_length:
            raise InferenceError(
                f"--max-length must be in [{shortest}, {self.model_max_length}] for {model_path} "
                f"({shortest - 1} special tokens plus at least one text token), got {max_length}"
            )
        if batching not in BATCHINGS or batch_size < 1 or max_tokens < 1:
            raise InferenceError(
                f"batching must be one of {list(BATCHINGS)} with a positive batch size and token budget, "
                f"got {batching!r}, {batch_size}, {max_tokens}"
            )
        self.max_length = max_length or self.model_max_length
        self.tokenizer.no_padding()  # batches are padded here, to their own longest row
        # A pair is truncated by shortening its longer text first.
        self.tokenizer.enable_truncation(self.max_length, strategy="longest_first")
        self.policy = LongText(**{**saved.__dict__, **{k: v for k, v in (long_text or {}).items() if v is not None}})
        self.encoder = TextEncoder(self.tokenizer, self.max_length, self.policy)
        self.batching, self.batch_size, self.max_tokens = batching, batch_size, max_tokens
        self.output_names = [o.name for o in self.session.get_outputs()]
        task = meta["tfm_cls.task"]
        self.head = TASKS[task.removesuffix(PAIR_SUFFIX)]
        self.pair = task.endswith(PAIR_SUFFIX)
        try:
            self.ensure_label = json.loads(meta.get("tfm_cls.ensure_label", "true"))
            fixed = float(json.loads(meta.get("tfm_cls.fixed_threshold", "0.5")))
            tuned = json.loads(meta.get("tfm_cls.thresholds", "null"))
        except (ValueError, TypeError) as err:
            raise InferenceError(f"{model_path}: unreadable tfm_cls thresholds ({err}); re-export it") from None
        self.thresholds = np.asarray(tuned if tuned is not None else [fixed] * len(self.labels), dtype=np.float64)
        # The long-text policy cuts and windows single texts; a pair is truncated longer text first,
        # and windows are aggregated for single-label models only (docs/long-documents.md).
        if self.pair and self.policy != LongText():
            raise InferenceError(f"{model_path} classifies sentence pairs, truncated longer text first: "
                                 "--truncation / --chunk apply to single texts")
        if self.policy.chunk and self.head != "single_label":
            raise InferenceError(f"{model_path} is a {self.head} model: --chunk applies to single-label models")

    def encode(self, texts: list[str]) -> tuple[list[list[int]], list[bool]]:
        """Token ids of each model row (one per text, or its windows under chunking) and whether
        each text was truncated; `encoder.encode` also gives the windows per text."""
        encoded = self.encoder.encode(texts)
        return encoded.ids, encoded.truncated

    def encode_with_types(
        self, texts: list[str], pairs: list[str] | None = None
    ) -> tuple[list[list[int]], list[list[int]], list[bool]]:
        """Token ids and token types of each text (the rows of `encode`, types all 0) or pair
        (truncated to max_length, its longer side first), and whether it was truncated."""
        if pairs is None:
            ids, truncated = self.encode(texts)
            return ids, [[0] * len(x) for x in ids], truncated
        encodings = self.tokenizer.encode_batch(list(zip(texts, pairs))) if texts else []
        return [e.ids for e in encodings], [e.type_ids for e in encodings], [bool(e.overflowing) for e in encodings]

    def feeds(
        self, ids: list[list[int]], rows: list[int] | None = None, types: list[list[int]] | None = None
    ) -> dict[str, np.ndarray]:
        """The session's inputs for `rows` of `ids` (all rows: None), padded to their longest;
        token_type_ids (from `types`, else zeros) where the model reads pairs."""
        rows = list(range(len(ids))) if rows is None else rows
        input_ids, attention_mask = pad_batch(ids, rows, self.pad_id)  # [batch, seq]
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.pair:
            feeds["token_type_ids"] = pad_types(types, rows, input_ids.shape[1])  # [batch, seq]
        return feeds

    def run(self, ids: list[list[int]], types: list[list[int]] | None = None) -> np.ndarray:
        """Scores for one batch of token id lists, padded here: probabilities [batch, num_classes]
        (softmax, or per-label sigmoid for multi-label), or values [batch] (regression)."""
        feeds = self.feeds(ids, None, types)
        if self.head == "regression":
            return self.session.run(["value"], feeds)[0]
        if "probabilities" in self.output_names:
            return self.session.run(["probabilities"], feeds)[0]
        logits = self.session.run(["logits"], feeds)[0]  # [batch, num_classes]
        return _softmax(logits)

    def classify(
        self, texts: list[str], batch_size: int | None = None, pairs: list[str] | None = None
    ) -> tuple[np.ndarray, list[bool], list[int]]:
        """Scores in input order ([len(texts), num_classes]; regression [len(texts)]), whether each
        text was truncated, and its number of windows. Rows are batched by length (plan_batches);
        with `batch_size`, in fixed batches of that size (the behaviour before token budgets).
        A sentence-pair model needs `pairs`, each text's second text."""
        if self.pair and pairs is None:
            raise InferenceError("this model classifies sentence pairs: give each text its second text")
        if self.pair:
            ids, types, truncated = self.encode_with_types(texts, pairs)
            windows = [1] * len(texts)
        else:
            enc = self.encoder.encode(texts)
            ids, types, truncated, windows = enc.ids, None, enc.truncated, enc.windows
        lengths = [len(x) for x in ids]
        batching = "fixed" if batch_size else self.batching
        batches = plan_batches(lengths, batching, batch_size or self.batch_size, self.max_tokens)
        num_classes = len(self.labels)
        if not self.policy.chunk:
            width = () if self.head == "regression" else (num_classes,)
            probs = np.empty((len(texts), *width), dtype=np.float32)
            for rows in batches:
                probs[rows] = self.run([ids[i] for i in rows], None if types is None else [types[i] for i in rows])
            return probs, truncated, windows
        # chunking: single-label models on single texts only (checked in __init__)
        logits = np.empty((len(ids), num_classes), dtype=np.float32)  # [windows, C]
        for rows in batches:
            logits[rows] = self.session.run(["logits"], self.feeds(ids, rows))[0]
        texts_logits = aggregate_windows(logits, windows, self.policy.aggregate, self.policy.scores)
        return _softmax(texts_logits).astype(np.float32), truncated, windows

    def predict_proba(
        self, texts: list[str], batch_size: int | None = None, pairs: list[str] | None = None
    ) -> tuple[np.ndarray, list[bool]]:
        """Scores in input order ([len(texts), num_classes]; regression [len(texts)]) and whether
        each text was truncated."""
        probs, truncated, _ = self.classify(texts, batch_size, pairs)
        return probs, truncated

    def decide(self, probs: np.ndarray) -> np.ndarray:
        """Multi-label decisions [N, C] (bool): probability >= the label's threshold; a row with
        none over its threshold gets its most probable label unless the export says otherwise."""
        chosen = probs >= self.thresholds[None, :]
        if self.ensure_label and len(chosen):
            empty = ~chosen.any(axis=1)
            chosen[empty, probs[empty].argmax(axis=1)] = True
        return chosen


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


def prediction_row(
    record: Record, labels: list[str], probs: np.ndarray | None, truncated: bool, windows: int | None = None
) -> dict[str, Any]:
    """The JSONL row of one input line; an empty line's row has no label and says it is empty.
    With chunked inference (`windows` given) the row also says how many windows the text had."""
    if probs is None:
        row = {"id": record.id, "line": record.line, "label": None, "score": None, "probabilities": None,
               "truncated": False}
    else:
        best = int(probs.argmax())
        row = {
            "id": record.id,
            "line": record.line,
            "label": labels[best],
            "score": round(float(probs[best]), 6),
            "probabilities": {label: round(float(p), 6) for label, p in zip(labels, probs)},
            "truncated": truncated,
        }
    if windows is not None:
        row["windows"] = windows
    row["empty"] = probs is None
    return row


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
    """Writes predictions as JSONL or CSV, one row per record, as they come; with `windows`, each
    row carries the text's number of windows (chunked inference)."""

    def __init__(self, stream, fmt: str, labels: list[str], classifier: Classifier | None = None,
                 windows: bool | None = None):
        self.stream, self.fmt, self.labels = stream, fmt, labels
        self.head = classifier.head if classifier is not None else "single_label"
        if windows is None:
            windows = classifier is not None and classifier.policy.chunk
        self.windows = windows
        if fmt == "csv":
            self.csv = csv.writer(stream)
            if self.head == "regression":
                self.csv.writerow(["id", "line", "value", "truncated", "empty"])
            elif self.head == "multi_label":
                self.csv.writerow(["id", "line", "labels", *(f"prob_{label}" for label in labels), "truncated", "empty"])
            else:
                self.csv.writerow(["id", "line", "label", "score", *(f"prob_{label}" for label in labels), "truncated",
                                   *(["windows"] if windows else []), "empty"])

    def write(self, record: Record, probs: np.ndarray | None, truncated: bool, windows: int = 1,
              chosen: np.ndarray | None = None) -> None:
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
        shown = windows if self.windows else None
        if self.fmt == "jsonl":
            row = prediction_row(record, self.labels, probs, truncated, None if shown is None else (0 if probs is None else shown))
            self.stream.write(json.dumps(row, ensure_ascii=False) + "\n")
        elif probs is None:
            self.csv.writerow([record.id, record.line, "", "", *([""] * len(self.labels)), 0,
                               *([0] if self.windows else []), 1])
        else:
            best = int(probs.argmax())
            self.csv.writerow(
                [record.id, record.line, self.labels[best], f"{probs[best]:.6f}", *(f"{p:.6f}" for p in probs),
                 int(truncated), *([windows] if self.windows else []), 0]
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


def buffer_size(args) -> int:
    """Texts read, sorted by length and batched at once: this bounds the memory of a run."""
    if args.chunk_batches is not None:
        return args.batch_size * args.chunk_batches
    return args.buffer_texts


def classify_stream(classifier: Classifier, records: Iterable[Record], writer: Writer, args, stats: Stats) -> None:
    bar = _progress(args.no_progress)
    # A chunk is sorted by length and cut into batches; its size bounds the memory used.
    for chunk in chunks(records, buffer_size(args)):
        full = [r for r in chunk if not r.empty]
        pairs = [r.pair for r in full] if classifier.pair else None
        probs, truncated, windows = classifier.classify([r.text for r in full], None, pairs) if full else ([], [], [])
        if classifier.head == "multi_label" and full:  # the decisions ride along with the scores
            results = iter(zip(probs, truncated, windows, classifier.decide(probs)))
        else:
            results = iter(zip(probs, truncated, windows))
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
        stats.windows += sum(windows)
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()


def add_inference_options(p: argparse.ArgumentParser, batch_size: int, streaming: bool = True) -> None:
    """The batching, thread and long-text flags shared (same names, same meaning) by this script
    and `tfm-cls predict` (`tfm-cls eval`: no `streaming` ones); a long-text flag left out keeps
    the model's own setting."""
    if streaming:
        p.add_argument("--batching", choices=BATCHINGS, default="tokens",
                       help="tokens: length-sorted batches of up to --max-tokens padded tokens (default); "
                            "fixed: length-sorted batches of --batch-size texts")
        p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                       help=f"padded tokens per batch with --batching tokens (default {DEFAULT_MAX_TOKENS})")
        p.add_argument("--batch-size", type=int, default=batch_size,
                       help=f"texts per batch with --batching fixed (default {batch_size})")
        p.add_argument("--buffer-texts", type=int, default=8192,
                       help="texts read, sorted by length and batched at once; bounds memory (default 8192)")
    else:
        p.add_argument("--batch-size", type=int, default=batch_size, help=f"texts per batch (default {batch_size})")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: the runtime decides)")
    p.add_argument("--max-length", type=int, help="truncate to fewer tokens than the model's maximum")
    p.add_argument("--truncation", choices=TRUNCATIONS, help="keep the head, the tail or head+tail of a long text "
                   "(default: as the model was trained)")
    p.add_argument("--head-fraction", type=float, help="share of the kept tokens taken from the head with head+tail")
    p.add_argument("--chunk", action=argparse.BooleanOptionalAction, default=None,
                   help="classify long texts as overlapping windows and aggregate them (default: the model's setting)")
    p.add_argument("--stride", type=int, help="tokens each window shares with the previous one (default: a quarter of a window)")
    p.add_argument("--aggregate", choices=AGGREGATES, help="mean or max over the windows (default: the model's setting)")
    p.add_argument("--aggregate-scores", choices=AGGREGATE_SCORES,
                   help="aggregate the windows' logits or their probabilities (default: the model's setting)")


def long_text_overrides(args) -> dict[str, Any]:
    """The LongText fields set on the command line (the rest keep the model's values)."""
    given = {"truncation": args.truncation, "head_fraction": args.head_fraction, "chunk": args.chunk,
             "stride": args.stride, "aggregate": args.aggregate, "scores": args.aggregate_scores}
    return {k: v for k, v in given.items() if v is not None}


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
    p.add_argument("--chunk-batches", type=int, help="read --batch-size x this many texts at once (instead of --buffer-texts)")
    p.add_argument(
        "--providers", default="CPUExecutionProvider", help="comma-separated onnxruntime execution providers"
    )
    add_inference_options(p, batch_size=32)
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
    sizes = {"--batch-size": args.batch_size, "--chunk-batches": args.chunk_batches, "--max-tokens": args.max_tokens,
             "--buffer-texts": args.buffer_texts}
    bad = [f"{flag}: expected a positive integer, got {value}" for flag, value in sizes.items()
           if value is not None and value < 1]
    if bad:
        print(f"error: {'; '.join(bad)}", file=sys.stderr)
        return 2
    stats = Stats()
    start = time.perf_counter()
    try:
        classifier = Classifier(
            args.model, [p.strip() for p in args.providers.split(",") if p.strip()], args.threads, args.max_length,
            long_text_overrides(args), args.batching, args.batch_size, args.max_tokens,
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
        log.warning("truncated %d texts to %d tokens (%s)", stats.truncated, classifier.max_length,
                    classifier.policy.truncation)
    if classifier.policy.chunk and stats.windows > stats.texts - stats.empty:
        log.info("chunked inference: %d windows for %d texts", stats.windows, stats.texts - stats.empty)
    if stats.invalid_utf8:
        log.warning("replaced invalid UTF-8 on %d lines with U+FFFD", stats.invalid_utf8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
