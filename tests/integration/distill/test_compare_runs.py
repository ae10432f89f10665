"""benchmarks/compare_runs.py: what each run changed against the first, with its metrics."""

import json

from kits.distill_tiny import distill_config

from benchmarks import compare_runs
from tfm_cls.distill import distill


def test_table_names_the_changed_keys_and_reports_each_runs_metrics(tmp_path, tiny_data, teacher_run, capsys):
    a = distill(distill_config(tiny_data, teacher_run, tmp_path / "a", "train.epochs=1"))
    b = distill(distill_config(tiny_data, teacher_run, tmp_path / "b", "train.epochs=1", "transfer.copies=1",
                               "loss.temperature=1.0"))
    out = tmp_path / "rows.json"
    assert compare_runs.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert rows[0]["changed"] == {}
    assert rows[1]["changed"] == {"loss.temperature": 1.0, "transfer.copies": 1}  # run_dir differs too, but is skipped
    for row, metrics in zip(rows, (a, b)):
        assert row["test"] == metrics["test"]["accuracy"] and row["validation"] == metrics["validation"]["accuracy"]
        assert row["metric"] == "accuracy" and row["steps"] == metrics["steps"]
    assert "loss.temperature=1.0, transfer.copies=1" in capsys.readouterr().out
    # the teacher, a classification run, compares too (config.yaml); a folder that is no run is one clear line
    assert compare_runs.main([str(teacher_run)]) == 0
    assert compare_runs.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "no distill_config.yaml or config.yaml" in err[0]
