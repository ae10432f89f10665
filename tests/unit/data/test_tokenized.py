"""Bucketed batching: the length-bucketed sampler (per rank, per epoch), its padding, evaluation shards,
collate."""


import numpy as np

from tfm_cls.data.tokenized import LengthBucketSampler, TokenizedSplit, collate, first_rows, first_windows
from tfm_cls.runtime.text import aggregate_windows


def test_sampler_covers_every_example_once_per_epoch_across_ranks():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 60, size=101)
    world = 3
    per_rank = [LengthBucketSampler(lengths, 8, shuffle=True, seed=5, bucket_batches=4, rank=r, world_size=world)
                for r in range(world)]
    for epoch in (0, 1):
        batches = [s.epoch_batches(epoch) for s in per_rank]
        assert len({len(b) for b in batches}) == 1  # same number of steps on every rank
        flat = [i for rank_batches in batches for batch in rank_batches for i in batch]
        assert sorted(flat) == list(range(101))  # disjoint, complete
    single = LengthBucketSampler(lengths, 8, shuffle=True, seed=5, bucket_batches=4)
    assert single.epoch_batches(0) == single.epoch_batches(0)  # deterministic
    assert single.epoch_batches(0) != single.epoch_batches(1)  # reshuffled per epoch


def test_bucketing_reduces_padding():
    lengths = np.random.default_rng(1).integers(2, 200, size=2000)

    def padding(batches):
        return sum(max(lengths[b]) * len(b) - lengths[b].sum() for b in batches)

    bucketed = LengthBucketSampler(lengths, 16, shuffle=True, seed=0, bucket_batches=50).epoch_batches(0)
    unbucketed = LengthBucketSampler(lengths, 16, shuffle=True, seed=0, bucket_batches=1).epoch_batches(0)
    assert padding(bucketed) < 0.1 * padding(unbucketed)


def test_eval_sampler_shards_the_split_exactly_once():
    lengths = np.arange(50) % 7
    shards = [LengthBucketSampler(lengths, 4, shuffle=False, rank=r, world_size=2).epoch_batches(0) for r in range(2)]
    flat = sorted(i for shard in shards for b in shard for i in b)
    assert flat == list(range(50))


def test_collate_pads_and_masks():
    split = TokenizedSplit(input_ids=[[2, 7, 3], [2, 3], [2, 9, 9, 9, 3]], labels=np.array([0, 1, 2]),
                           lengths=np.array([3, 2, 5]), num_truncated=0, num_empty=0)
    batch = collate(split, [1, 0], pad_id=0)
    assert batch["input_ids"].tolist() == [[2, 3, 0], [2, 7, 3]]
    assert batch["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert batch["labels"].tolist() == [1, 0]


def test_first_windows_and_the_mean_of_each_examples_windows_follow_its_windows():
    # three examples of 2, 1 and 3 windows: rows 0-1, 2, 3-5
    ids = [[1, 10, 2], [1, 11, 2], [1, 20, 2], [1, 30, 2], [1, 31, 2], [1, 32, 2]]
    split = TokenizedSplit(input_ids=ids, labels=np.array([0, 1, 2]), lengths=np.array([3] * 6),
                           num_truncated=0, num_empty=0, windows=np.array([2, 1, 3]))
    first = first_windows(split)
    assert first.windows is None and first.num_rows == len(first) == 3
    assert first.input_ids == [[1, 10, 2], [1, 20, 2], [1, 30, 2]] and list(first.labels) == [0, 1, 2]
    rows = np.arange(12, dtype=np.float32).reshape(6, 2)  # [rows, D]
    # classify.sentence_head.example_vectors: the runtime's mean over each example's windows, on vectors as on logits
    assert aggregate_windows(rows, split.windows, "mean", "logits").tolist() == [[1.0, 2.0], [4.0, 5.0], [8.0, 9.0]]
    assert first_rows(split.windows).tolist() == [0, 2, 3] and first_windows(first) is first


def test_a_large_split_is_tokenized_in_blocks_with_a_line_each_and_the_same_rows(monkeypatch, caplog):
    import logging

    from datasets import Dataset

    import tfm_cls.data.tokenized as T
    from tfm_cls.data.tokenizer import TokenizerConfig, train_tokenizer

    texts = [f"text number {i} here {'word ' * (i % 7)}" for i in range(250)]
    tokenizer = train_tokenizer(texts, TokenizerConfig(vocab_size=120, min_frequency=1, max_length=12))
    ds = Dataset.from_dict({"text": texts, "label": [i % 3 for i in range(250)]})
    whole = T.tokenize_dataset(ds, tokenizer)
    monkeypatch.setattr(T, "TOKENIZE_BLOCK", 70)
    with caplog.at_level(logging.INFO, logger="tfm_cls.data.tokenized"):
        blocks = T.tokenize_dataset(ds, tokenizer, desc="tokenize train")
    assert blocks.input_ids == whole.input_ids and blocks.input_ids.tolist()[249] == whole.input_ids[249].tolist()
    assert np.array_equal(blocks.labels, whole.labels) and np.array_equal(blocks.lengths, whole.lengths)
    assert blocks.num_truncated == whole.num_truncated > 0
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tokenize train:")]
    assert len(said) == 4 and said[-1].startswith("tokenize train: 250 of 250 rows (100%)")
