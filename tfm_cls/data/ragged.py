"""Token ids of many texts as two flat arrays: every row's ids end to end, and where each row starts.

    ids = RaggedIds.from_arrow(mapped.data.column("input_ids"))   # a tokenized `datasets` column
    ids[i]            # row i: a read-only int32 numpy view, no copy
    ids.lengths       # [rows] int64
    ids.take(rows)    # a RaggedIds of those rows, in that order

Why not the list a `datasets` column gives: a Python list of lists costs ~36 bytes a token (1.4 GB for a
million 40-token texts, where this is 160 MB), and `datasets`' lazy `Column` builds an Arrow table on
every `column[i]`, so reading a split row by row cost 3 ms a row (a million rows: 48 minutes). Code
that needs every row at once (the bag's matrix, tfm_cls.bag.matrix) reads `values` and `offsets`
directly, vectorized over the split.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


class RaggedIds(Sequence):
    """Rows of token ids: `values` [total] int32 and `offsets` [rows + 1] int64 (row i is
    values[offsets[i]:offsets[i + 1]]). A Sequence: len(), ids[i], iteration, as the list it replaces."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray) -> None:
        self.values = np.asarray(values, dtype=np.int32)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        if self.offsets.ndim != 1 or len(self.offsets) == 0 or self.offsets[0] != 0 \
                or self.offsets[-1] != len(self.values) or np.any(np.diff(self.offsets) < 0):
            raise ValueError("RaggedIds: offsets must rise from 0 to len(values)")
        self.values.flags.writeable = False

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]]) -> RaggedIds:
        """From a list of id lists (or of arrays)."""
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows]) if len(rows) else np.zeros(0)
        return cls(values.astype(np.int32, copy=False), offsets)

    @classmethod
    def from_arrow(cls, column: Any) -> RaggedIds:
        """From an Arrow list<int> column (a pyarrow ChunkedArray or ListArray), without a Python object a row."""
        import pyarrow as pa

        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if len(array) == 0:
            return cls(np.zeros(0, np.int32), np.zeros(1, np.int64))
        offsets = np.asarray(array.offsets, dtype=np.int64)
        values = np.asarray(array.values, dtype=np.int32)  # the whole buffer: a sliced array starts past 0
        return cls(values[offsets[0]:offsets[-1]], offsets - offsets[0])

    @property
    def lengths(self) -> np.ndarray:
        """[rows] int64: each row's number of ids."""
        return np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:  # type: ignore[override]
        if not isinstance(i, int | np.integer):
            raise TypeError("RaggedIds: index one row with an int (many: .take(rows))")
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"RaggedIds: row {i} of {len(self)}")
        return self.values[self.offsets[i]:self.offsets[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self.values[self.offsets[i]:self.offsets[i + 1]]

    def tolist(self) -> list[list[int]]:
        """Every row as a list of ints."""
        return [row.tolist() for row in self]

    def __eq__(self, other: object) -> bool:
        """Equal to rows of the same ids (another RaggedIds, or a list of lists)."""
        if isinstance(other, RaggedIds):
            return np.array_equal(self.offsets, other.offsets) and np.array_equal(self.values, other.values)
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self.tolist() == [list(row) for row in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def take(self, rows: Sequence[int] | np.ndarray) -> RaggedIds:
        """These rows, in this order, as a RaggedIds (vectorized: one gather of the ids)."""
        rows = np.asarray(rows, dtype=np.int64)
        starts, lengths = self.offsets[rows], self.lengths[rows]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        # each kept id's source position: its row's start + its place in the row
        positions = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
        return RaggedIds(self.values[positions], offsets)

    def padded(self, rows: Sequence[int] | np.ndarray, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids [len(rows), longest] int64 padded with `pad_id`, mask [len(rows), longest] bool, True at a
        token): a batch of these rows, filled by one scatter."""
        part = self.take(rows)
        lengths = part.lengths
        width = int(lengths.max()) if len(lengths) else 0
        ids = np.full((len(lengths), width), pad_id, dtype=np.int64)
        mask = np.arange(width) < lengths[:, None]  # [rows, width]
        ids[mask] = part.values  # row-major: each row's ids in order
        return ids, mask


def as_ragged(rows: RaggedIds | Sequence[Sequence[int]]) -> RaggedIds:
    """`rows` as RaggedIds (itself where it is one)."""
    return rows if isinstance(rows, RaggedIds) else RaggedIds.from_lists(rows)
