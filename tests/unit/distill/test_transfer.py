"""The transfer set: deterministic for a seed, augmentation rates as configured, bad rates refused."""

import numpy as np
import pytest

from tfm_cls.config import from_dict
from tfm_cls.data.tokenizer import MASK
from tfm_cls.distill.config import TransferConfig
from tfm_cls.distill.transfer import NO_LABEL, Vocabulary, augment, build_transfer_set, copy_rng
from tfm_cls.errors import ConfigError

TEXTS = [f"w{i % 7} alpha beta w{i % 11} gamma delta w{i % 13} eps" for i in range(50)]
LABELS = [i % 3 for i in range(50)]


def test_deterministic_for_a_seed():
    cfg = TransferConfig(copies=4)
    a = build_transfer_set(TEXTS, LABELS, ["extra one", "extra two"], cfg, seed=3)
    b = build_transfer_set(TEXTS, LABELS, ["extra one", "extra two"], cfg, seed=3)
    c = build_transfer_set(TEXTS, LABELS, ["extra one", "extra two"], cfg, seed=4)
    assert a.texts == b.texts and np.array_equal(a.labels, b.labels) and a.fingerprint() == b.fingerprint()
    assert a.texts != c.texts and a.fingerprint() != c.fingerprint()
    # Gold labels on the training texts, none on copies and extra text; extra text last.
    assert a.texts[: len(TEXTS)] == TEXTS and a.labels[: len(TEXTS)].tolist() == LABELS
    assert (a.labels[len(TEXTS) :] == NO_LABEL).all() and a.texts[-2:] == ["extra one", "extra two"]
    assert len(set(a.texts)) == len(a.texts)  # duplicates dropped
    assert a.report["transfer_texts"] == len(a)


def test_copies_zero_is_the_training_set():
    t = build_transfer_set(TEXTS, LABELS, [], TransferConfig(copies=0), seed=0)
    assert t.texts == TEXTS and t.labels.tolist() == LABELS


def _copies(cfg, n=400):
    words = [f"word{k}" for k in range(20)]
    vocab = Vocabulary([" ".join(words)] * 3 + ["other words here"])
    return words, [augment(words, vocab, cfg, copy_rng(0, i, 0)) for i in range(n)]


def test_mask_and_replace_rates_hold():
    cfg = TransferConfig(mask_rate=0.3, replace_rate=0.2, ngram_rate=0.0)
    words, copies = _copies(cfg)
    masked = np.mean([w == MASK for c in copies for w in c])
    replaced = np.mean([w != MASK and w != o for c in copies for w, o in zip(c, words)])
    n = 400 * 20  # binomial standard errors ~0.005: 5 sigma bounds
    assert abs(masked - 0.3) < 5 * np.sqrt(0.3 * 0.7 / n)
    expected = 0.7 * 0.2  # replaced only when not masked
    assert abs(replaced - expected) < 5 * np.sqrt(expected * (1 - expected) / n)


def test_ngram_rate_holds():
    cfg = TransferConfig(mask_rate=0.0, replace_rate=0.0, ngram_rate=0.4, ngram_min=2, ngram_max=5)
    words, copies = _copies(cfg, n=1000)
    cut = [c for c in copies if len(c) < len(words)]
    assert abs(len(cut) / 1000 - 0.4) < 5 * np.sqrt(0.4 * 0.6 / 1000)
    assert all(2 <= len(c) <= 5 and " ".join(c) in " ".join(words) for c in cut)  # contiguous runs
    untouched = [c for c in copies if len(c) == len(words)]
    assert all(c == words for c in untouched)


@pytest.mark.parametrize("key, value", [("mask_rate", 1.5), ("replace_rate", -0.1), ("ngram_rate", 2.0)])
def test_rates_outside_unit_interval_are_config_errors(key, value):
    with pytest.raises(ConfigError, match=rf"transfer.{key}: expected a rate in \[0, 1\], got {value}"):
        from_dict(TransferConfig, {key: value}, "transfer")
