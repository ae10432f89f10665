"""The length-bucketed sampler under DDP: N ranks with batch b see exactly what 1 process with batch N*b sees."""

import numpy as np
import pytest

from tfm_cls.data.tokenized import LengthBucketSampler


def _shards(lengths, batch_size, world, **kw):
    return [LengthBucketSampler(lengths, batch_size, rank=r, world_size=world, **kw) for r in range(world)]


@pytest.mark.parametrize("n", [101, 96, 33])
def test_ranks_split_the_single_process_global_batches(n):
    lengths = np.random.default_rng(n).integers(3, 60, size=n)
    world, per_rank = 3, 4
    single = LengthBucketSampler(lengths, per_rank * world, shuffle=True, seed=7, bucket_batches=3)
    for epoch in (0, 1):
        parts = [s.epoch_batches(epoch) for s in _shards(lengths, per_rank, world, shuffle=True, seed=7, bucket_batches=3)]
        globals_ = single.epoch_batches(epoch)
        assert all(len(p) == len(globals_) for p in parts)  # same number of steps everywhere
        for step, batch in enumerate(globals_):
            union = [i for p in parts for i in p[step]]
            assert union == batch  # contiguous parts of the single-process batch, in rank order
            if len(batch) >= world * per_rank:
                assert [len(p[step]) for p in parts] == [per_rank] * world
            assert all(len(p[step]) >= 1 for p in parts)  # every rank has work on every step
        flat = sorted(i for p in parts for b in p for i in b)
        assert flat == list(range(n))  # disjoint and complete


def test_a_tail_smaller_than_the_world_joins_the_previous_batch():
    lengths = np.ones(13, dtype=int)  # global batches of 4*3=12: the tail of 1 cannot feed 3 ranks
    parts = [s.epoch_batches(0) for s in _shards(lengths, 4, 3, shuffle=True, seed=0)]
    assert [len(p) for p in parts] == [1, 1, 1]
    assert sorted(len(b) for p in parts for b in p) == [4, 4, 5]


def test_fewer_training_examples_than_processes_is_a_clear_error():
    with pytest.raises(ValueError, match="2 training examples cannot give each of 3 processes one"):
        LengthBucketSampler(np.ones(2), 4, shuffle=True, rank=0, world_size=3)


def test_evaluation_shards_may_be_empty_but_cover_the_split_once():
    lengths = np.arange(5)
    parts = [s.epoch_batches(0) for s in _shards(lengths, 4, 8, shuffle=False)]
    assert sorted(i for p in parts for b in p for i in b) == list(range(5))
    assert any(b == [] for p in parts for b in p)
