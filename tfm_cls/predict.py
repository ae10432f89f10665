"""A trained classifier's predictions: logits and metrics over a tokenized split (the training
engine's evaluation, DDP-aware), and batch prediction of texts read from txt / jsonl / csv / stdin."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from tfm_cls import distributed as D
from tfm_cls.batching import LengthBucketSampler, TokenizedSplit, batch_loader
from tfm_cls.errors import InputError
from tfm_cls.export.infer import InferenceError, Record, Stats, open_input, prediction_row
from tfm_cls.export.infer import read_records as infer_read_records
from tfm_cls.metrics import classification_metrics
from tfm_cls.precision import Precision
from tfm_cls.runs import LoadedRun
from tfm_cls.tokenizer import PAD_ID

FORMATS = ("auto", "txt", "jsonl", "csv")


# ---- a tokenized split: logits and metrics ------------------------------------------------------------------------------------


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module, split: TokenizedSplit, batch_size: int, device: torch.device, pad_id: int = PAD_ID,
    *, env: D.DistEnv | None = None, amp: Precision | None = None,
) -> np.ndarray:
    """Logits [N, C] in the split's order (batches sorted by length for speed). Under DDP each
    rank predicts its shard and the rows are gathered: every rank gets all N rows, each once."""
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
    counts = np.bincount(indices, minlength=len(split))
    if len(counts) != len(split) or not (counts == 1).all():
        raise RuntimeError(
            f"evaluation covered {int((counts > 0).sum())} of {len(split)} examples with {len(indices)} predictions: "
            "each example must be predicted exactly once"
        )
    out = np.empty((len(split), num_classes), dtype=np.float32)
    out[indices] = gathered
    model.train(was_training)
    return out


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


def _batches(n: int, lengths: list[int], batch_size: int) -> Iterator[list[int]]:
    order = np.argsort(lengths, kind="stable")  # similar lengths together: little padding
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size].tolist()


def _encode(run: LoadedRun, texts: list[str]) -> tuple[list[list[int]], list[bool]]:
    """Token ids of each text (truncated as in training) and whether it was truncated."""
    tokenizer = Tokenizer.from_str(run.tokenizer.to_str())
    tokenizer.no_padding()  # each batch is padded to its own longest text
    encodings = tokenizer.encode_batch(texts) if texts else []
    return [e.ids for e in encodings], [bool(e.overflowing) for e in encodings]


@torch.no_grad()
def predict_proba(
    run: LoadedRun, texts: list[str], batch_size: int = 64, encodings: list[list[int]] | None = None,
) -> np.ndarray:
    """Class probabilities [len(texts), num_classes] (softmax of the logits), in input order."""
    device = next(run.model.parameters()).device
    encodings = _encode(run, texts)[0] if encodings is None else encodings
    probs = np.zeros((len(texts), len(run.labels)), dtype=np.float32)
    pad_id = run.model.config.get("pad_token_id") or 0
    for indices in _batches(len(texts), [len(e) for e in encodings], batch_size):
        width = max(len(encodings[i]) for i in indices)
        ids = torch.full((len(indices), width), pad_id, dtype=torch.long)  # [B, T]
        mask = torch.zeros((len(indices), width), dtype=torch.long)  # [B, T]
        for row, i in enumerate(indices):
            ids[row, : len(encodings[i])] = torch.tensor(encodings[i], dtype=torch.long)
            mask[row, : len(encodings[i])] = 1
        logits = run.model(ids.to(device), mask.to(device))  # [B, C]
        probs[indices] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return probs


def predict_records(run: LoadedRun, records: list[Record], batch_size: int = 64) -> Iterator[dict[str, Any]]:
    """One output row per record, in order (the rows of export/infer.py: id, line, label, score,
    probabilities, truncated, empty); an empty record's row has label None and "empty": true."""
    full = [r for r in records if not r.empty]
    ids, truncated = _encode(run, [r.text for r in full])
    probs = predict_proba(run, [r.text for r in full], batch_size, ids)
    results = iter(zip(probs, truncated))
    for record in records:
        yield prediction_row(record, run.labels, None, False) if record.empty else prediction_row(
            record, run.labels, *next(results)
        )


def write_jsonl(records: Iterator[dict[str, Any]], out: TextIO) -> int:
    count = 0
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count
