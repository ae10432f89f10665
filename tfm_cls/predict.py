"""Batch prediction with a trained run: read texts (txt / jsonl / csv / stdin), write JSONL."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch
from tokenizers import Tokenizer

from tfm_cls.artifacts import LoadedRun

FORMATS = ("auto", "txt", "jsonl", "csv")


class InputError(ValueError):
    """The input file cannot be read as texts; the message names the file and what was expected."""


def _format_of(path: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    suffix = Path(path).suffix.lower()
    return {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv"}.get(suffix, "txt")


def read_texts(path: str, fmt: str = "auto", column: str = "text") -> list[str]:
    """Texts from `path` (`-` = stdin): txt one per line, jsonl objects' `column`, csv `column`."""
    fmt = _format_of(path, fmt)
    name = "<stdin>" if path == "-" else path
    if path == "-":
        content = sys.stdin.read()
    else:
        if not Path(path).is_file():
            raise InputError(f"input file {path} does not exist")
        content = Path(path).read_text(encoding="utf-8", errors="replace")
    if fmt == "txt":
        return content.splitlines()
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(content))
        if reader.fieldnames is None or column not in reader.fieldnames:
            raise InputError(f"{name}: no column {column!r}; the columns are {reader.fieldnames}; pass --column")
        return [row[column] or "" for row in reader]
    texts = []
    for number, line in enumerate(content.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{name}, line {number}: not valid JSON ({err})") from err
        if not isinstance(row, dict) or column not in row:
            keys = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise InputError(f"{name}, line {number}: expected an object with key {column!r}, got {keys}; pass --column")
        texts.append("" if row[column] is None else str(row[column]))
    return texts


def _batches(n: int, lengths: list[int], batch_size: int) -> Iterator[list[int]]:
    order = np.argsort(lengths, kind="stable")  # similar lengths together: little padding
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size].tolist()


@torch.no_grad()
def predict_proba(run: LoadedRun, texts: list[str], batch_size: int = 64) -> np.ndarray:
    """Class probabilities [len(texts), num_classes] (softmax of the logits), in input order."""
    device = next(run.model.parameters()).device
    tokenizer = Tokenizer.from_str(run.tokenizer.to_str())
    tokenizer.no_padding()  # each batch is padded below, to its own longest text
    encodings = [e.ids for e in tokenizer.encode_batch(texts)] if texts else []
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


def prediction_records(probs: np.ndarray, labels: list[str]) -> Iterator[dict[str, Any]]:
    for row in probs:
        best = int(row.argmax())
        yield {
            "label": labels[best],
            "score": float(row[best]),
            "probabilities": {name: float(p) for name, p in zip(labels, row)},
        }


def write_jsonl(records: Iterator[dict[str, Any]], out: TextIO) -> int:
    count = 0
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count
