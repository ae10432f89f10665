"""The end's share (tfm_cls.train.end_sample): where scoring validation and test whole does not fit
budget.END_SHARE, each is a seeded sample (data.max_eval_samples) of the texts and their tokens alike, at
least END_MIN_EXAMPLES, said in the clock's shrunk; the data as loaded and a resume draw the same rows."""

import time

import numpy as np
from datasets import Dataset, DatasetDict

from tfm_cls.config import ClassifierConfig, DataConfig
from tfm_cls.data.sources import ClassificationData, eval_rows, eval_sample
from tfm_cls.data.tokenized import TokenizedSplit, take_examples
from tfm_cls.train import recipe
from tfm_cls.train.end_sample import eval_cap, scored_in_budget
from tfm_cls.training import budget
from tfm_cls.training.clock import WallClock


def test_the_cap_fills_the_seconds_and_a_small_split_keeps_all_it_has(monkeypatch):
    monkeypatch.setattr(budget, "END_MIN_EXAMPLES", 10)
    assert eval_cap([100, 100], 1.0, 200.0) is None  # every example fits
    assert eval_cap([1000, 1000], 1.0, 300.0) == 150  # an even share each
    assert eval_cap([50, 1000], 1.0, 300.0) == 250  # the small split keeps its 50, the other takes the rest
    assert eval_cap([1000, 1000], 1.0, 4.0) == 10  # however short the budget: the floor
    # what the cap keeps fits the seconds (water-filling: no split over the cap, the cap as large as fits)
    rng = np.random.default_rng(0)
    for _ in range(200):
        sizes = rng.integers(1, 5000, size=rng.integers(1, 4)).tolist()
        cost, seconds = float(rng.uniform(0.001, 1)), float(rng.uniform(1, 2000))
        cap = eval_cap(sizes, cost, seconds)
        if cap is None:
            assert cost * sum(sizes) <= seconds
        elif cap > 10:
            assert cost * sum(min(n, cap) for n in sizes) <= seconds + 1e-6
            assert cost * sum(min(n, cap + 1) for n in sizes) > seconds - cost * len(sizes)


def test_the_rows_are_seeded_sorted_and_a_cap_applied_twice_keeps_them():
    rows = eval_rows(1000, 100, 42)
    assert len(rows) == 100 == len(set(rows.tolist())) and np.all(np.diff(rows) > 0) and rows.max() < 1000
    assert np.array_equal(rows, eval_rows(1000, 100, 42)) and not np.array_equal(rows, eval_rows(1000, 100, 43))
    assert eval_rows(100, 100, 42) is None and eval_rows(100, None, 42) is None
    cfg = DataConfig(path="x", max_eval_samples=100)
    split = Dataset.from_dict({"text": [f"t{i}" for i in range(1000)]})
    once = eval_sample(split, cfg)
    assert once["text"] == [f"t{i}" for i in rows] and eval_sample(once, cfg)["text"] == once["text"]


def test_a_windowed_split_keeps_every_window_of_the_examples_it_keeps():
    ids = [[i] for i in range(7)]  # example 0: rows 0-1, 1: row 2, 2: rows 3-5, 3: row 6
    split = TokenizedSplit(ids, np.array([5, 6, 7, 8]), np.ones(7, np.int64), 0, 0, windows=np.array([2, 1, 3, 1]))
    kept = take_examples(split, np.array([0, 2, 3]))
    assert kept.input_ids == [[0], [1], [3], [4], [5], [6]] and kept.windows.tolist() == [2, 3, 1]
    assert kept.labels.tolist() == [5, 7, 8] and len(kept.lengths) == 6


def _data_and_tokens(n_validation, n_test):
    def texts(name, n):
        return Dataset.from_dict({"text": [f"{name} {i}" for i in range(n)], "label": [i % 2 for i in range(n)]})

    def tokens(n, offset):
        return TokenizedSplit([[offset + i] for i in range(n)], np.arange(n) % 2, np.ones(n, np.int64), 0, 0)

    splits = DatasetDict({"train": texts("train", 10), "validation": texts("validation", n_validation),
                          "test": texts("test", n_test)})
    data = ClassificationData(splits, ["a", "b"], "made here", [])
    return data, {"train": tokens(10, 0), "validation": tokens(n_validation, 10_000), "test": tokens(n_test, 20_000)}


def test_past_the_share_the_texts_and_their_tokens_are_sampled_alike_and_said(monkeypatch):
    monkeypatch.setattr(budget, "END_MIN_EXAMPLES", 10)
    cfg = ClassifierConfig(data=DataConfig(path="x"))
    data, tokens = _data_and_tokens(600, 400)
    # without a budget, or where the whole fits, nothing changes
    assert scored_in_budget(cfg, data, tokens, WallClock(None), 10.0)[0] is cfg
    assert scored_in_budget(cfg, data, tokens, WallClock(10.0), 0.01)[0] is cfg
    clock = WallClock(2.0)  # END_SHARE of two minutes: 60 s, 300 texts at 0.2 s
    capped_cfg, capped, capped_tokens = scored_in_budget(cfg, data, tokens, clock, 0.2)
    assert capped_cfg.data.max_eval_samples == 150
    for name, offset in (("validation", 10_000), ("test", 20_000)):
        kept = [int(t.split()[1]) for t in capped.splits[name]["text"]]
        assert len(kept) == 150 and [ids[0] - offset for ids in capped_tokens[name].input_ids] == kept
        assert capped_tokens[name].labels.tolist() == [k % 2 for k in kept]
        # the data as loaded with that config draw the same rows (a resume)
        assert eval_sample(data.splits[name], capped_cfg.data)["text"] == capped.splits[name]["text"]
    assert capped.splits["train"] is data.splits["train"] and capped_tokens["train"] is tokens["train"]
    assert len(data.splits["test"]) == 400  # the caller's data kept
    assert len(clock.shrunk) == 1 and clock.shrunk[0].startswith(
        "validation and test scored on a seeded sample of at most 150 examples each (of 600 and 400)")
    # decided late (a few-label run, after its cross-validation): what is left past FIXED_SECONDS, where less
    late = WallClock(2.0, started=time.monotonic() - 120 + budget.FIXED_SECONDS + 20)  # 20 s past the fixed
    assert 48 <= scored_in_budget(cfg, data, tokens, late, 0.2)[0].data.max_eval_samples <= 50  # 20 s: 100 texts
    # a config naming a cap (the user's, or a resumed run's) is the budget's answer already
    assert scored_in_budget(capped_cfg, capped, capped_tokens, WallClock(1.0), 0.1)[0] is capped_cfg


def test_a_resume_reads_the_interrupted_runs_cap(tmp_path):
    from tfm_cls.config import save_config

    data, _ = _data_and_tokens(600, 400)
    cfg = ClassifierConfig(data=DataConfig(path="x"))
    capped_cfg = ClassifierConfig(data=DataConfig(path="x", max_eval_samples=150))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    save_config(capped_cfg, run_dir / "config.yaml")
    resumed_cfg, resumed = recipe._saved_sample(cfg, data, run_dir)
    assert resumed_cfg.data.max_eval_samples == 150
    assert resumed.splits["test"]["text"] == eval_sample(data.splits["test"], capped_cfg.data)["text"]
    assert len(resumed.splits["validation"]) == 150 and len(resumed.splits["train"]) == 10
