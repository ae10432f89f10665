"""Many rare labels (issue 27): the multi-label head's prior initialisation.

Each label's output bias starts at the log-odds of its training frequency (MultiLabelHead.start_output),
once, before training; a resumed run keeps the checkpoint's. A tiny long-tailed run shows why:
from a zero bias every sigmoid starts at 0.5 and the first steps go to learning base rates."""

import random

import numpy as np
import pytest
import torch
from kits import tasks_tiny as T

from tfm_cls.classify.heads import MultiLabelHead, head_for, prior_logits
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.data.sources import load_data
from tfm_cls.train.recipe import build_model_and_tokenizer, train

NUM_LABELS = 20
LABELS = [f"label{j}" for j in range(NUM_LABELS)]
KEYWORDS = [f"q{chr(ord('a') + j)}z" for j in range(NUM_LABELS)]


def long_tailed_data(folder, sizes=(400, 200, 200)):
    """Texts with 1-2 labels drawn by a Zipf law over 20 labels (p_k ~ 1/k: label0 on ~30 % of
    the texts, the last ones on ~3 %), each label given away by its keyword among filler words."""
    weights = 1.0 / np.arange(1, NUM_LABELS + 1)
    weights /= weights.sum()
    splits = {}
    for split, n, seed in zip(T.SPLITS, sizes, (0, 1, 2)):
        rng, words_rng = np.random.default_rng(seed), random.Random(seed)
        rows = []
        for _ in range(n):
            ids = sorted(int(i) for i in rng.choice(NUM_LABELS, size=int(rng.choice([1, 2])), replace=False, p=weights))
            words = [KEYWORDS[i] for i in ids] + [words_rng.choice(T.FILLER) for _ in range(words_rng.randint(4, 10))]
            words_rng.shuffle(words)
            rows.append({"text": " ".join(words), "labels": ids})
        splits[split] = rows
    return T.write_dataset(folder, splits, LABELS)


def tiny_model(num_labels):
    from tfm_cls.model import TransformerClassifier

    return TransformerClassifier(vocab_size=50, num_classes=num_labels, d_model=16, nhead=2, num_layers=1,
                                 dim_feedforward=32, max_len=16)


def test_prior_init_sets_each_sigmoid_to_its_training_frequency():
    targets = np.zeros((10, 4), dtype=np.float32)
    targets[:3, 0] = 1  # 30 %
    targets[:1, 1] = 1  # 10 %
    targets[:, 3] = 1   # always: clipped to 10 / 11
    model = tiny_model(4)  # label 2 never positive: clipped to 1 / 11
    MultiLabelHead().start_output(model, targets.tolist())
    probability = torch.sigmoid(model.head.bias.detach().double()).numpy()
    assert probability == pytest.approx([0.3, 0.1, 1 / 11, 10 / 11], abs=1e-6)
    assert np.isfinite(prior_logits(targets)).all()


def test_prior_init_can_be_switched_off(ml_data, tmp_path):
    cfg = load_config(ClassifierConfig, None, T.overrides(ml_data, tmp_path / "run", *T.MULTI_LABEL,
                                                          "multi_label.prior_init=false"))
    assert head_for(cfg).prior_init is False
    model = tiny_model(3)
    before = model.head.bias.detach().clone()
    head_for(cfg).start_output(model, [[1, 0, 0], [0, 1, 0]])
    assert torch.equal(model.head.bias.detach(), before)
    assert head_for(load_config(ClassifierConfig, None, T.overrides(ml_data, tmp_path / "r", *T.MULTI_LABEL))).prior_init


def test_prior_init_runs_before_training_and_not_on_resume(ml_data, ml_run, monkeypatch):
    run, _ = ml_run
    cfg = load_config(ClassifierConfig, None, T.overrides(ml_data, run, *T.MULTI_LABEL))
    data = load_data(cfg.data)
    calls = []
    monkeypatch.setattr(MultiLabelHead, "start_output", lambda self, model, targets: calls.append(len(targets)))
    build_model_and_tokenizer(cfg, data, run, resume=True)
    assert calls == []  # the checkpoint holds the bias it trained
    model, _ = build_model_and_tokenizer(cfg, data, run, resume=False)
    assert calls == [len(data.splits["train"])]
    monkeypatch.undo()
    model, _ = build_model_and_tokenizer(cfg, data, run, resume=False)  # the real one, on the training targets
    frequency = np.asarray(data.splits["train"]["label"], dtype=np.float64).mean(axis=0)
    assert torch.sigmoid(model.head.bias.detach().double()).numpy() == pytest.approx(frequency, abs=1e-6)


def test_a_short_long_tailed_run_learns_more_with_the_prior(tmp_path):
    """Two seeded 100-step runs on 20 Zipf-distributed labels, differing only in the prior init:
    without it the run is still pulling 20 sigmoids down from 0.5 and ends far behind."""
    data = long_tailed_data(tmp_path / "data")
    test = {}
    for prior in ("true", "false"):
        cfg = load_config(ClassifierConfig, None, T.overrides(
            data, tmp_path / prior, *T.MULTI_LABEL, "tokenizer.vocab_size=200", "train.epochs=2",
            f"multi_label.prior_init={prior}"))
        test[prior] = train(cfg)["test"]
    predicted = [name for name, row in test["true"]["per_label"].items() if row["f1"] > 0]
    assert len(predicted) > NUM_LABELS // 2  # not the most frequent label for every text
    assert test["true"]["micro_f1"] > test["false"]["micro_f1"] + 0.1
    assert test["true"]["macro_f1"] > test["false"]["macro_f1"] + 0.1
