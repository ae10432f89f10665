"""A trained classifier's predictions: logits and metrics over a tokenized split (the training
engine's evaluation, DDP-aware), and batch prediction of texts read from txt / jsonl / csv / stdin."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
import torch.nn.functional as F

from tfm_cls import distributed as D
from tfm_cls.batching import LengthBucketSampler, TokenizedSplit, batch_loader
from tfm_cls.errors import InputError
from tfm_cls.export.infer import (
    DEFAULT_MAX_TOKENS,
    InferenceError,
    LongText,
    Record,
    Stats,
    TextEncoder,
    aggregate_windows,
    chunks,
    open_input,
    pad_batch,
    plan_batches,
    prediction_row,
)
from tfm_cls.export.infer import read_records as infer_read_records
from tfm_cls.metrics import classification_metrics
from tfm_cls.precision import Precision
from tfm_cls.runs import LoadedRun
from tfm_cls.tokenizer import PAD_ID, long_text_of, text_encoder

FORMATS = ("auto", "txt", "jsonl", "csv")


# ---- a tokenized split: logits and metrics ------------------------------------------------------------------------------------


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module, split: TokenizedSplit, batch_size: int, device: torch.device, pad_id: int = PAD_ID,
    *, env: D.DistEnv | None = None, amp: Precision | None = None,
) -> np.ndarray:
    """Logits [N, C] in the split's order (batches sorted by length for speed). Under DDP each
    rank predicts its shard and the rows are gathered: every rank gets all N rows, each once.
    A windowed split (chunked inference) gets the aggregate of each example's windows."""
    env = env or D.DistEnv(device=device)
    was_training = model.training
    model.eval()
    sampler = LengthBucketSampler(split.lengths, batch_size, shuffle=False, rank=env.rank, world_size=env.world_size)
    shard = [indices for indices in sampler.epoch_batches(0) if indices]
    rows, parts = [], []
    for indices, batch in zip(shard, batch_loader(split, shard, pad_id, device)):
        with amp.autocast() if amp else contextlib.nullcontext():
            logits = model(batch["input_ids"].to(device, non_blocking=True),
                           batch["attention_mask"].to(device, non_blocking=True))  # [B, C]
        rows.extend(indices)
        parts.append(logits.float().cpu().numpy())
    num_classes = model.config["num_classes"]
    local = np.concatenate(parts) if parts else np.zeros((0, num_classes), dtype=np.float32)  # [n_rank, C]
    indices = D.all_gather_rows(np.asarray(rows, dtype=np.int64), env)  # [N]
    gathered = D.all_gather_rows(local, env)  # [N, C]
    counts = np.bincount(indices, minlength=split.num_rows)
    if len(counts) != split.num_rows or not (counts == 1).all():
        raise RuntimeError(
            f"evaluation covered {int((counts > 0).sum())} of {split.num_rows} examples with {len(indices)} predictions: "
            "each example must be predicted exactly once"
        )
    out = np.empty((split.num_rows, num_classes), dtype=np.float32)
    out[indices] = gathered
    model.train(was_training)
    if split.windows is None:
        return out
    policy = split.policy or LongText(chunk=True)
    return aggregate_windows(out, split.windows, policy.aggregate, policy.scores)


def evaluate(
    model: torch.nn.Module, split: TokenizedSplit, labels: list[str], batch_size: int, device: torch.device,
    pad_id: int = PAD_ID, *, env: D.DistEnv | None = None, amp: Precision | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Metrics (loss, accuracy, macro_f1, per_class, examples, seconds, texts_per_second) and the
    logits, over the whole split (gathered from every rank under DDP)."""
    start = time.perf_counter()
    logits = predict_logits(model, split, batch_size, device, pad_id, env=env, amp=amp)
    seconds = time.perf_counter() - start
    loss = F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(split.labels)).item()
    metrics = {"loss": loss, **classification_metrics(split.labels, logits.argmax(-1), labels)}
    metrics.update(examples=len(logits), seconds=seconds, texts_per_second=len(logits) / max(seconds, 1e-9))
    return metrics, logits


# ---- texts from a file: probabilities -----------------------------------------------------------------


def _format_of(path: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    suffix = Path(path).suffix.lower()
    return {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}.get(suffix, "txt")


def read_records(
    path: str, fmt: str = "auto", column: str = "text", invalid_utf8: str = "error",
) -> tuple[list[Record], Stats]:
    """One Record per line (txt, jsonl) or row (csv) of `path` (`-` = stdin), empty ones included,
    with the reader of the ONNX inference script (export/infer.py), so both inference paths agree
    on what a line is: lines end at "\n" only, invalid UTF-8 is an InputError naming the line and
    byte offset unless `invalid_utf8="replace"` (counted in the returned Stats)."""
    stats = Stats()
    name = "<stdin>" if path == "-" else path
    try:
        stream = open_input(path)
        try:
            records = list(infer_read_records(stream, name, _format_of(path, fmt), column, invalid_utf8, stats))
        finally:
            if path != "-":
                stream.close()
    except InferenceError as err:
        raise InputError(str(err).replace("input file not found:", "input file does not exist:")) from None
    return records, stats


def read_texts(path: str, fmt: str = "auto", column: str = "text") -> list[str]:
    """The texts of `read_records` (empty lines included, as "")."""
    return [r.text for r in read_records(path, fmt, column)[0]]


@contextlib.contextmanager
def open_records(
    path: str, fmt: str = "auto", column: str = "text", invalid_utf8: str = "error", stats: Stats | None = None,
) -> Iterator[Iterator[Record]]:
    """The records of `read_records`, read lazily (a file of any size in bounded memory); a bad
    line is an InputError when the iteration reaches it."""
    stats = stats if stats is not None else Stats()
    name = "<stdin>" if path == "-" else path
    try:
        stream = open_input(path)
    except InferenceError as err:
        raise InputError(str(err).replace("input file not found:", "input file does not exist:")) from None

    def records() -> Iterator[Record]:
        try:
            yield from infer_read_records(stream, name, _format_of(path, fmt), column, invalid_utf8, stats)
        except InferenceError as err:
            raise InputError(str(err)) from None

    try:
        yield records()
    finally:
        if path != "-":
            stream.close()


def run_policy(run: LoadedRun, **overrides: Any) -> LongText:
    """The run's long-text policy (its tokenizer config), with command-line overrides (None = keep)."""
    return long_text_of(run.config.tokenizer, **overrides)


@torch.no_grad()
def _row_logits(run: LoadedRun, ids: list[list[int]], batches: list[list[int]]) -> np.ndarray:
    """Logits [len(ids), C] of model rows, batch by batch, in row order."""
    device = next(run.model.parameters()).device
    pad_id = run.model.config.get("pad_token_id") or 0
    logits = np.zeros((len(ids), len(run.labels)), dtype=np.float32)
    for rows in batches:
        input_ids, mask = pad_batch(ids, rows, pad_id)  # [B, T]
        out = run.model(torch.from_numpy(input_ids).to(device), torch.from_numpy(mask).to(device))  # [B, C]
        logits[rows] = out.float().cpu().numpy()
    return logits


@torch.no_grad()
def classify_texts(
    run: LoadedRun, texts: list[str], *, policy: LongText | None = None, batching: str = "tokens",
    batch_size: int = 64, max_tokens: int = DEFAULT_MAX_TOKENS, max_length: int | None = None,
    encoder: TextEncoder | None = None,
) -> tuple[np.ndarray, list[bool], list[int]]:
    """Probabilities [len(texts), C] in input order, whether each text was truncated and its number
    of windows: the PyTorch twin of export/infer.py's Classifier.classify (same encoder, same
    batches, same aggregation). Rows are sorted by length into batches (`tokens`: up to
    `max_tokens` padded tokens each; `fixed`: `batch_size` rows)."""
    policy = encoder.policy if encoder is not None else policy or run_policy(run)
    enc = (encoder or text_encoder(run.tokenizer, policy, max_length)).encode(texts)
    batches = plan_batches([len(x) for x in enc.ids], batching, batch_size, max_tokens)
    logits = _row_logits(run, enc.ids, batches)
    if policy.chunk:
        logits = aggregate_windows(logits, enc.windows, policy.aggregate, policy.scores)
    return torch.softmax(torch.from_numpy(logits), dim=-1).numpy(), enc.truncated, enc.windows


@torch.no_grad()
def predict_proba(
    run: LoadedRun, texts: list[str], batch_size: int = 64, encodings: list[list[int]] | None = None, *,
    batching: str = "tokens", max_tokens: int = DEFAULT_MAX_TOKENS, policy: LongText | None = None,
) -> np.ndarray:
    """Class probabilities [len(texts), num_classes] (softmax of the logits), in input order.
    `encodings`: ready token ids, one row per text (no windows)."""
    if encodings is None:
        return classify_texts(run, texts, policy=policy, batching=batching, batch_size=batch_size,
                              max_tokens=max_tokens)[0]
    batches = plan_batches([len(e) for e in encodings], batching, batch_size, max_tokens)
    return torch.softmax(torch.from_numpy(_row_logits(run, encodings, batches)), dim=-1).numpy()


def predict_records(
    run: LoadedRun, records: Iterable[Record], batch_size: int = 64, *, policy: LongText | None = None,
    batching: str = "tokens", max_tokens: int = DEFAULT_MAX_TOKENS, buffer_texts: int = 8192,
    max_length: int | None = None,
) -> Iterator[dict[str, Any]]:
    """One output row per record, in order (the rows of export/infer.py: id, line, label, score,
    probabilities, truncated, windows with chunking, empty); an empty record's row has label None
    and "empty": true. Records are consumed `buffer_texts` at a time, so memory stays bounded."""
    policy = policy or run_policy(run)
    encoder = text_encoder(run.tokenizer, policy, max_length)  # a bad policy fails before the first row
    for chunk in chunks(records, buffer_texts):
        full = [r for r in chunk if not r.empty]
        probs, truncated, windows = classify_texts(
            run, [r.text for r in full], batching=batching, batch_size=batch_size, max_tokens=max_tokens,
            encoder=encoder,
        ) if full else ([], [], [])
        results = iter(zip(probs, truncated, windows))
        for record in chunk:
            if record.empty:
                yield prediction_row(record, run.labels, None, False, 0 if policy.chunk else None)
            else:
                p, t, w = next(results)
                yield prediction_row(record, run.labels, p, t, w if policy.chunk else None)


def write_jsonl(records: Iterator[dict[str, Any]], out: TextIO) -> int:
    count = 0
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count
