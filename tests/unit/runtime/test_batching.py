"""tfm_cls/runtime/batching.py: the padding bound of plan_batches and pad_batch's arrays."""

import numpy as np

from tfm_cls.runtime.batching import pad_batch, plan_batches


def padding(lengths, batches):
    return sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)


def test_run_cost_splits_where_a_row_would_pad_the_batch_more_than_a_run_costs():
    lengths = [5, 5, 5, 6, 30, 31]
    # without a run cost the budget alone decides: one batch, every short row padded to 31
    assert plan_batches(lengths, "tokens", max_tokens=1024) == [[0, 1, 2, 3, 4, 5]]
    # 3 rows x 1 extra token (3 <= 4) joins; 4 rows x 24 extra tokens (96 > 4) starts a batch
    assert plan_batches(lengths, "tokens", max_tokens=1024, run_cost=4) == [[0, 1, 2, 3], [4, 5]]
    assert plan_batches(lengths, "tokens", max_tokens=1024, run_cost=2) == [[0, 1, 2], [3], [4, 5]]


def test_run_cost_bounds_padding_and_keeps_every_row_once_in_length_order():
    rng = np.random.default_rng(1)
    lengths = [int(x) for x in rng.integers(3, 60, size=40)]  # a micro-batch of random requests
    plain = plan_batches(lengths, "tokens", max_tokens=4096)
    bounded = plan_batches(lengths, "tokens", max_tokens=4096, run_cost=16)
    flat = [i for b in bounded for i in b]
    assert sorted(flat) == list(range(40)) and [lengths[i] for i in flat] == sorted(lengths)
    assert len(plain) == 1 and len(bounded) > 1
    assert padding(lengths, bounded) < padding(lengths, plain) / 4
    for b in bounded:  # within a batch, no row was added whose extra padding exceeded the run cost
        ordered = [lengths[i] for i in b]
        assert all(k * (ordered[k] - ordered[k - 1]) <= 16 for k in range(1, len(ordered)))


def test_pad_batch_places_each_chosen_row_left_aligned_with_its_mask():
    ids = [[7, 8, 9], [4], [5, 6]]
    input_ids, mask = pad_batch(ids, [2, 0, 1], pad_id=0)
    assert input_ids.dtype == mask.dtype == np.int64
    np.testing.assert_array_equal(input_ids, [[5, 6, 0], [7, 8, 9], [4, 0, 0]])
    np.testing.assert_array_equal(mask, [[1, 1, 0], [1, 1, 1], [1, 0, 0]])
