"""The default strategy `auto` on small synthetic vectors: `spread` while fewer than `top_from`
labelled texts a class, `top` from there on (the labelled folder's count, or the run's
metrics.json where only a run is given); `spread` where the count is unknown."""

import json

import numpy as np
import pytest

from tfm_cls.suggest import Settings, Suggester
from tfm_cls.suggest.guess import Guesses, run_train_examples
from tfm_cls.suggest.names import LabelNames
from tfm_cls.suggest.pool import Pool, text_key
from tfm_cls.suggest.store import Labelled
from tfm_cls.suggest.suggester import AUTO_TOP_FROM, choose_strategy

NAMES = LabelNames(["a", "b"], [None, None])


def blobs(n=120, seed=0):
    """Two classes as two Gaussian blobs on the unit sphere (8 dims): vectors, labels, texts."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    x = rng.standard_normal((n, 8)) * 0.6
    x[:, 0] += np.where(y == 1, 1.0, -1.0)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), y, [f"text {i}" for i in range(n)]


def suggester(settings=None):
    x, y, texts = blobs()
    return Suggester(Pool(texts, list(range(1, len(texts) + 1))), None, NAMES, settings or Settings(), vectors=x), y, texts


def labelled(texts, y, per_class):
    rows = [i for c in (0, 1) for i in np.flatnonzero(y == c)[:per_class]]
    return Labelled(NAMES, [texts[i] for i in rows], y[rows], {text_key(texts[i]) for i in rows})


def is_spread(got):
    return all("similar texts" in g.reason for g in got)


def is_top(got):
    return all(g.reason.startswith("among the most uncertain") for g in got)


def test_the_rule():
    assert AUTO_TOP_FROM > 0 and Settings().strategy == "auto"
    assert choose_strategy(0, 2, 16) == "spread"
    assert choose_strategy(31, 2, 16) == "spread"  # 15.5 a class
    assert choose_strategy(32, 2, 16) == "top"
    assert choose_strategy(6 * 16, 6, 16) == "top" and choose_strategy(6 * 16 - 1, 6, 16) == "spread"
    assert choose_strategy(None, 2, 16) == "spread"  # the count unknown
    with pytest.raises(ValueError, match="auto, spread or top"):
        Settings(strategy="best")


@pytest.mark.parametrize("per_class", [2, 3])
def test_few_labels_spread(per_class):
    s, y, texts = suggester(Settings(top_from=4))
    got = s.suggest(6, labelled(texts, y, per_class))
    assert len(got) == 6 and is_spread(got)


@pytest.mark.parametrize("per_class", [4, 10])
def test_enough_labels_top_the_same_picks_as_top(per_class):
    s, y, texts = suggester(Settings(top_from=4))
    state = labelled(texts, y, per_class)
    got = s.suggest(6, state)
    assert is_top(got)
    top, _, _ = suggester(Settings(strategy="top"))
    assert [g.line for g in got] == [g.line for g in top.suggest(6, state)]


def test_explicit_strategies_ignore_the_count():
    for strategy, check in (("spread", is_spread), ("top", is_top)):
        s, y, texts = suggester(Settings(strategy=strategy, top_from=4))
        assert check(s.suggest(6, labelled(texts, y, 2))) and check(s.suggest(6, labelled(texts, y, 10)))


def test_a_run_counts_what_it_was_trained_on(tmp_path):
    s, y, texts = suggester(Settings(top_from=4))

    def guess(batch):
        x = np.asarray([float(t.split()[1]) % 7 / 7 for t in batch])
        return Guesses(np.stack([x, 1 - x], axis=1), ["a", "b"])

    assert is_spread(s.suggest(4, None, guess))  # the run says nothing: spread
    guess.train_examples = 8  # 4 a class
    assert is_top(s.suggest(4, None, guess))
    guess.train_examples = 6
    assert is_spread(s.suggest(4, None, guess))
    assert is_top(s.suggest(4, labelled(texts, y, 5), guess))  # the folder's count where it is larger

    (tmp_path / "metrics.json").write_text(json.dumps({"data": {"train_examples": 48}}))
    assert run_train_examples(tmp_path) == 48
    assert run_train_examples(tmp_path / "missing") is None


def test_the_command_says_what_auto_does():
    import argparse

    from tfm_cls.cli.suggest import add_common

    parser = argparse.ArgumentParser()
    add_common(parser)
    action = next(a for a in parser._actions if a.dest == "strategy")
    assert action.default == "auto" and set(action.choices) == {"auto", "spread", "top"}
    assert f"fewer than {AUTO_TOP_FROM:g} labelled texts a class" in action.help


def test_nothing_to_rank_by_spreads():
    """One class labelled so far: every text is equally uncertain, so `top` would take the pool's
    first texts; `auto` spreads instead."""
    s, y, texts = suggester(Settings(top_from=4))
    rows = list(np.flatnonzero(y == 0)[:10])
    state = Labelled(NAMES, [texts[i] for i in rows], y[rows], {text_key(texts[i]) for i in rows})
    assert is_spread(s.suggest(4, state))
