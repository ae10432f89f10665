"""tfm_cls.data.ragged: rows of ids as two flat arrays, read as the list they replace."""

import numpy as np
import pyarrow as pa
import pytest
from datasets import Dataset

from tfm_cls.data.ragged import RaggedIds, as_ragged

ROWS = [[5, 6, 7], [], [8], [9, 10]]


def test_rows_read_as_the_lists():
    ids = RaggedIds.from_lists(ROWS)
    assert len(ids) == 4 and ids.tolist() == ROWS and ids == ROWS and list(ids.lengths) == [3, 0, 1, 2]
    assert ids[0].tolist() == [5, 6, 7] and ids[-1].tolist() == [9, 10] and [r.tolist() for r in ids] == ROWS
    with pytest.raises(IndexError):
        ids[4]
    with pytest.raises(ValueError):
        ids[0][0] = 1  # a view of the shared buffer: read-only


def test_take_and_padded_gather_rows_in_order():
    ids = RaggedIds.from_lists(ROWS)
    assert ids.take([3, 1, 0]).tolist() == [[9, 10], [], [5, 6, 7]]
    padded, mask = ids.padded([2, 0], pad_id=-1)
    assert padded.tolist() == [[8, -1, -1], [5, 6, 7]] and mask.tolist() == [[True, False, False], [True] * 3]


def test_from_arrow_reads_a_sliced_column_and_a_selection():
    column = pa.chunked_array([pa.array([[1], [2, 3]]), pa.array([[4, 5, 6]])])
    assert RaggedIds.from_arrow(column) == [[1], [2, 3], [4, 5, 6]]
    assert RaggedIds.from_arrow(pa.array([[1], [2, 3], [4]]).slice(1)) == [[2, 3], [4]]
    ds = Dataset.from_dict({"input_ids": ROWS}).select([3, 0])  # an indices mapping over the table
    assert RaggedIds.from_arrow(ds.with_format("arrow")["input_ids"]) == [[9, 10], [5, 6, 7]]
    assert len(RaggedIds.from_arrow(pa.chunked_array([], type=pa.list_(pa.int32())))) == 0


def test_bad_offsets_are_refused():
    with pytest.raises(ValueError, match="offsets"):
        RaggedIds(np.array([1, 2]), np.array([0, 3]))
    assert as_ragged(ROWS) == ROWS and as_ragged(RaggedIds.from_lists(ROWS)) is not None
