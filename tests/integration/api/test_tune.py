"""`tfm-cls tune`: the search space's config checks, every preset loads, trials never touch the test
split, the median pruner's sink, best.yaml, and a study that resumes after SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from kits.api_tiny import TINY

from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.errors import ConfigError
from tfm_cls.tune import TuneConfig, check_space, load_tune_config

ROOT = Path(__file__).resolve().parents[3]


def tune_yaml(path: Path, data_dir: Path, run_dir: Path, trials: int = 3, **tune: object) -> Path:
    doc = {
        "name": "tiny-tune", "run_dir": str(run_dir), "seed": 0, "base": "trec",
        "base_overrides": [o for o in TINY if not o.startswith("name=")] + [f"data.path={data_dir}"],
        "tune": {"trials": trials, "max_minutes": None, "metric": "accuracy", "trial_overrides": ["train.epochs=3"],
                 "startup_trials": 1, "warmup_evaluations": 0,
                 "space": {"train.lr": {"low": 3.0e-3, "high": 3.0e-2, "log": True},
                           "model.dropout": {"low": 0.0, "high": 0.3},
                           "model.num_layers": {"low": 1, "high": 2}}, **tune},
    }
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("path", sorted((ROOT / "configs/tune").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_tune_preset_loads(path):
    cfg = load_tune_config(str(path), [])
    assert cfg.tune.space and cfg.base_config().name == cfg.base
    assert len(check_space(cfg)) >= 2 * len(cfg.tune.space)  # every bound is a valid override
    assert load_tune_config(path.stem, ["tune.trials=4", "data.path=x"]).tune.trials == 4


@pytest.mark.parametrize("spec, message", [
    ({"low": 1.0e-2, "high": 1.0e-3}, "inverted"),
    ({"low": 0.1, "high": 0.1}, "empty or inverted"),
    ({"choices": []}, "empty list"),
    ({"low": 0.0, "high": 1.0, "log": True}, "log range"),
    ({"low": 1.0e-4}, "expected low and high"),
    ({"low": 1.0e-4, "high": 1.0e-3, "steps": 2}, "unknown key"),
])
def test_bad_range_is_a_config_error_naming_the_key(tmp_path, spec, message):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"base": "trec", "tune": {"space": {"train.lr": spec}}}))
    with pytest.raises(ConfigError, match=message) as err:
        load_config(TuneConfig, str(path))
    assert "tune.space.train.lr" in str(err.value)


def test_unknown_keys_are_config_errors(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"base": "trec", "tune": {"space": {"train.lrr": {"low": 0.1, "high": 0.2}}}}))
    with pytest.raises(ConfigError, match="train.lrr"):
        load_config(TuneConfig, str(path))
    path.write_text(yaml.safe_dump({"base": "trec", "tune": {"trails": 3, "space": {"train.lr": {"low": 0.1, "high": 0.2}}}}))
    with pytest.raises(ConfigError, match="trails"):
        load_config(TuneConfig, str(path))
    with pytest.raises(ConfigError, match="nosuchkey"):
        load_tune_config("trec", ["train.nosuchkey=1"])  # base overrides are checked before any trial


def test_missing_optuna_is_one_clear_error(tmp_path, tiny_data, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)
    path = tune_yaml(tmp_path / "t.yaml", tiny_data, tmp_path / "run")
    assert subprocess_free_main(["tune", "--config", str(path)]) == 2
    assert "pip install 'tfm-cls[optuna]'" in capsys.readouterr().err


def subprocess_free_main(argv):
    from tfm_cls.cli import main

    return main(argv)


def test_pruning_sink_reports_evaluations_and_prunes():
    optuna = pytest.importorskip("optuna")
    from tfm_cls.tune import PruningSink

    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.ThresholdPruner(lower=0.5))
    trial = study.ask()
    sink = PruningSink(trial, "accuracy")
    sink.scalars(10, {"train/loss": 1.0})  # not an evaluation: ignored
    sink.scalars(20, {"validation/accuracy": 0.9, "validation/loss": 0.3})
    with pytest.raises(optuna.TrialPruned, match="evaluation 2"):
        sink.scalars(40, {"validation/accuracy": 0.2})
    assert trial.storage.get_trial(trial._trial_id).intermediate_values == {1: 0.9, 2: 0.2}


def test_trials_never_touch_the_test_split(tmp_path, monkeypatch):
    """Trials tokenize and score train and validation only; the test texts (13 of them, each with a
    word found nowhere else) never reach a tokenizer or an evaluation, and no trial reports test."""
    pytest.importorskip("optuna")
    from kits.api_tiny import make_texts, write_split, write_tiny_data

    import tfm_cls.classify.finish as finish_module
    import tfm_cls.classify.task as task_module
    import tfm_cls.train.recipe as T
    from tfm_cls.tune import tune

    data = write_tiny_data(tmp_path / "data", n_test=13)
    texts, labels = make_texts(13, 5)
    write_split(data / "test.jsonl", [t + " zzsentinel" for t in texts], labels)
    seen_splits, seen_sizes = [], []
    tokenize, evaluate = T.tokenize_splits, finish_module.evaluate

    def spy_tokenize(splits, tokenizer, *args, **kwargs):
        seen_splits.extend(splits)
        assert not any("zzsentinel" in t for ds in splits.values() for t in ds["text"])
        return tokenize(splits, tokenizer, *args, **kwargs)

    def spy_evaluate(model, split, *args, **kwargs):
        seen_sizes.append(len(split))
        return evaluate(model, split, *args, **kwargs)

    monkeypatch.setattr(T, "tokenize_splits", spy_tokenize)
    monkeypatch.setattr(task_module, "evaluate", spy_evaluate)  # validation during training
    monkeypatch.setattr(finish_module, "evaluate", spy_evaluate)  # the best weights at the end
    cfg = load_config(TuneConfig, str(tune_yaml(tmp_path / "t.yaml", data, tmp_path / "run", trials=2)))
    result = tune(cfg)
    assert set(seen_splits) == {"train", "validation"} and seen_sizes and 13 not in seen_sizes
    for trial_dir in sorted((tmp_path / "run" / "trials").iterdir()):
        metrics = json.loads((trial_dir / "metrics.json").read_text())
        assert "test" not in metrics and "test_examples" not in metrics["data"]
        assert not (trial_dir / "classification_report.txt").exists()
    # best.yaml: the base config plus the best trial's values, without the trials' own overrides
    best = load_config(ClassifierConfig, tmp_path / "run" / "best.yaml")
    assert best.train.lr == result["best_params"]["train.lr"] and best.train.epochs == 6
    assert best.model.num_layers == result["best_params"]["model.num_layers"]
    assert best.run_dir == str(tmp_path / "run" / "best")
    summary = json.loads((tmp_path / "run" / "trials.json").read_text())
    assert [t["state"] for t in summary].count("COMPLETE") + [t["state"] for t in summary].count("PRUNED") == 2


def _finished(study_db: Path, what: str = "value") -> dict[int, object]:
    import optuna

    study = optuna.load_study(study_name="tiny-tune", storage=f"sqlite:///{study_db}")
    return {t.number: getattr(t, what) for t in study.trials if t.state.is_finished() and t.state.name != "FAIL"}


def test_killed_study_resumes_and_keeps_its_trials(tmp_path, tiny_data):
    pytest.importorskip("optuna")
    path = tune_yaml(tmp_path / "t.yaml", tiny_data, tmp_path / "run", trials=4, startup_trials=10)
    cmd = [sys.executable, "-m", "tfm_cls.cli", "tune", "--config", str(path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    db = tmp_path / "run" / "study.db"
    deadline = time.time() + 300
    try:
        while time.time() < deadline and proc.poll() is None:
            summary = tmp_path / "run" / "trials.json"  # written (atomically) after each finished trial
            done = sum(t["state"] != "FAIL" for t in json.loads(summary.read_text())) if summary.exists() else 0
            if done >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the study finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = _finished(db)
    assert 2 <= len(before) < 4
    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    after = _finished(db)
    assert len(after) == 4
    assert all(after[n] == v for n, v in before.items())  # the finished trials were kept, not rerun
    params = _finished(db, "params")
    old = [params[n] for n in before]
    assert all(params[n] not in old for n in after if n not in before)  # new draws, not a replay
    assert json.loads(rerun.stdout.strip().splitlines()[-1])["trials"] == 4
