"""Predictions out: one JSONL or CSV row per input record, in input order, written atomically.

A row holds the record's id and line, the head's prediction fields (tfm_cls.runtime.heads:
label / score / probabilities, labels over their thresholds, or the value), whether the text was
truncated, with chunked inference its number of windows, and whether it was empty (an empty
input gets no guess)."""

from __future__ import annotations

import csv
import errno
import os
import tempfile
from typing import Any

import numpy as np

from tfm_cls.errors import InferenceError
from tfm_cls.runtime import jsonl
from tfm_cls.runtime.heads import SingleLabel
from tfm_cls.runtime.readers import Record

OUTPUT_FORMATS = ("jsonl", "csv")


def output_row(
    record: Record, head: SingleLabel, labels: list[str], scores: np.ndarray | None, truncated: bool,
    windows: int | None = None, chosen: np.ndarray | None = None,
) -> dict[str, Any]:
    """The JSONL row of one input record (`scores` None: an empty one, which says so). With
    chunked inference (`windows` given) the row also says how many windows the text had."""
    row: dict[str, Any] = {"id": record.id, "line": record.line, **head.fields(scores, chosen, labels),
                           "truncated": truncated if scores is not None else False}
    if windows is not None:
        row["windows"] = windows
    row["empty"] = scores is None
    return row


class Writer:
    """Writes predictions as JSONL or CSV, one row per record, as they come; with `windows`, each
    row carries the text's number of windows (chunked inference)."""

    def __init__(self, stream, fmt: str, labels: list[str], head: SingleLabel | None = None, windows: bool = False):
        self.stream, self.fmt, self.labels = stream, fmt, labels
        self.head = head or SingleLabel()
        self.windows = windows
        if fmt == "csv":
            self.csv = csv.writer(stream)
            self.csv.writerow(["id", "line", *self.head.csv_columns(labels), "truncated",
                               *(["windows"] if windows else []), "empty"])

    def write(self, record: Record, scores: np.ndarray | None, truncated: bool, windows: int = 1,
              chosen: np.ndarray | None = None) -> None:
        shown = (0 if scores is None else windows) if self.windows else None
        if self.fmt == "jsonl":
            row = output_row(record, self.head, self.labels, scores, truncated, shown, chosen)
            self.stream.write(jsonl.dumps(row) + "\n")  # U+2028 / U+2029 / U+0085 escaped: one row a line
        else:
            self.csv.writerow([record.id, record.line, *self.head.csv_cells(scores, chosen, self.labels),
                               int(truncated and scores is not None), *([shown] if self.windows else []),
                               int(scores is None)])


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

