"""A run whose end cannot score its validation and test texts whole in the budget's END_SHARE scores a
seeded sample of each (tfm_cls.train.end_sample), decided before the loop from a probe of the encoder: the
loop's evaluations, the choice, the test score and the report read the same sample; a resumed run draws it
again from its config."""

import time

import yaml
from kits.tiny_topics import make_texts, tiny_config, write_dataset

from tfm_cls import runs as R
from tfm_cls.train import recipe, train
from tfm_cls.training import budget


def test_a_normal_run_scores_a_sample_of_validation_and_test_where_the_whole_does_not_fit(tmp_path, monkeypatch):
    data = write_dataset(tmp_path / "data", {"train": make_texts(40, 0), "validation": make_texts(60, 1),
                                             "test": make_texts(90, 2)})
    run = tmp_path / "run"
    cfg = tiny_config(data, run, "train.wall_minutes=2", "train.epochs=1")
    monkeypatch.setattr(budget, "END_MIN_EXAMPLES", 5)
    monkeypatch.setattr(recipe, "_seconds_per_text", lambda *args: 2.0)  # 60 s of END_SHARE: 30 texts
    metrics = train(cfg, started=time.monotonic())
    assert any(s.startswith("validation and test scored on a seeded sample of at most 15 examples each "
                            "(of 60 and 90)") for s in metrics["wall_clock"]["shrunk"])
    assert yaml.safe_load((run / R.CONFIG_FILE).read_text())["data"]["max_eval_samples"] == 15
    assert (run / R.REPORT_FILE).read_text().split()[-1] == "15"  # test: 15 texts scored
    assert metrics["data"]["validation_examples"] == metrics["validation"]["examples"] == 15
    assert metrics["data"]["test_examples"] == metrics["test"]["examples"] == 15
