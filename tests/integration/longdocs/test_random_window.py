"""Training on one random window of each long text per epoch (train.window: random)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from kits.longdocs_kit import LABELS, MAX_LENGTH, WORDS, texts
from kits.tiny_topics import write_dataset

from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.data.tokenized import tokenize_splits, window_rows
from tfm_cls.errors import ConfigError
from tfm_cls.runtime.text import LongText, TextEncoder


def test_window_rows_draw_one_window_per_example_reproducibly():
    windows = np.array([1, 3, 2, 5, 1])
    first = np.array([0, 1, 4, 6, 11])
    draws = np.stack([window_rows(windows, seed=7, epoch=e) for e in range(200)])  # [epochs, examples]
    assert draws.shape == (200, 5)
    assert ((draws >= first) & (draws < first + windows)).all()  # each example's own rows only
    assert (window_rows(windows, 7, 3) == draws[3]).all()  # the same (seed, epoch): the same rows
    assert not (window_rows(windows, 8, 3) == draws[3]).all() or not (window_rows(windows, 8, 4) == draws[4]).all()
    # every window of the 5-window example is drawn, about uniformly (200 draws: 40 each expected)
    counts = np.bincount(draws[:, 3] - first[3], minlength=5)
    assert (counts > 20).all() and (counts < 65).all()


def test_the_training_split_is_windowed_like_chunked_inference(tokenizer):
    from datasets import Dataset, DatasetDict

    corpus = texts(20, seed=4, high=40)
    ds = Dataset.from_dict({"text": corpus, "label": [i % 3 for i in range(20)]})
    policy = LongText(stride=3)
    splits = tokenize_splits(DatasetDict(train=ds, validation=ds), tokenizer, policy, train_windows=True)
    expected = TextEncoder(tokenizer, MAX_LENGTH, LongText(chunk=True, stride=3)).encode(corpus)
    assert splits["train"].input_ids == expected.ids
    assert splits["train"].windows.tolist() == expected.windows and max(expected.windows) > 1
    assert splits["validation"].windows is None  # evaluation follows inference.chunk, as before
    assert splits["validation"].input_ids == TextEncoder(tokenizer, MAX_LENGTH, policy).encode(corpus).ids


@pytest.fixture(scope="module")
def long_data(tmp_path_factory) -> Path:
    """Texts of 26-41 words: several 12-token windows each."""
    splits = {}
    for split, n, seed in (("train", 90, 0), ("validation", 30, 1), ("test", 30, 2)):
        rows = []
        for i, text in enumerate(texts(n, seed, low=25, high=40)):
            rows.append({"text": f"{text} {WORDS[i % 3]}", "label": i % 3})
        splits[split] = rows
    return write_dataset(tmp_path_factory.mktemp("long"), splits, LABELS)


def test_each_epoch_trains_on_one_window_of_every_text(long_data, tmp_path):
    from kits.tiny_topics import tiny_overrides

    from tfm_cls.classify.task import ClassificationTask
    from tfm_cls.data.sources import load_data
    from tfm_cls.data.tokenizer import long_text_of, train_tokenizer
    from tfm_cls.runs import build_model
    from tfm_cls.train import train
    from tfm_cls.training import distributed as D
    from tfm_cls.training.precision import Precision

    keys = ["tokenizer.max_length=12", "model.max_len=12", "train.window=random", "tokenizer.stride=4",
            "train.epochs=2"]
    cfg = load_config(ClassifierConfig, None, tiny_overrides(long_data, tmp_path / "run", *keys))
    data = load_data(cfg.data)
    tokenizer = train_tokenizer(data.splits["train"]["text"], cfg.tokenizer)
    splits = tokenize_splits(data.splits, tokenizer, long_text_of(cfg.tokenizer, cfg.inference), train_windows=True)
    model = build_model(dict(vocab_size=tokenizer.get_vocab_size(), num_classes=3, pad_token_id=0,
                             **cfg.model.model_kwargs()))
    task = ClassificationTask(cfg, model, splits, data.labels, tmp_path, D.DistEnv(), Precision("fp32", torch.device("cpu")))
    windows = splits["train"].windows
    first = np.concatenate([[0], np.cumsum(windows)[:-1]])
    example_of_row = np.repeat(np.arange(len(windows)), windows)
    epochs = [sorted(r for b in task.epoch_batches(e) for r in b) for e in range(3)]
    for rows in epochs:
        assert sorted(example_of_row[rows].tolist()) == list(range(len(windows)))  # every text once
    assert epochs[0] != epochs[1]  # another draw next epoch
    assert any((np.asarray(rows) - first > 0).any() for rows in epochs)  # later windows are trained on
    assert task.epoch_batches(1) == task.epoch_batches(1)  # deterministic: a resumed run draws the same
    metrics = train(cfg)  # and the whole run goes through the engine
    assert metrics["steps"] > 0 and np.isfinite(metrics["test"]["loss"])


def test_random_windows_are_refused_for_pairs_and_distillation(tmp_path):
    with pytest.raises(ConfigError, match="train.window"):
        load_config(ClassifierConfig, None, ["data.text_pair_column=text_b", "train.window=random"])
    from tfm_cls.distill import DistillConfig

    with pytest.raises(ConfigError, match="train.window: random .* teacher labels each transfer text once"):
        load_config(DistillConfig, None, ["teacher.path=x.onnx", "train.window=random"])
