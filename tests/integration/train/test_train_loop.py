"""Training loop: an end-to-end tiny run, run-directory rules, faults (the schedule and parameter
groups: tests/unit/training/test_optim.py)."""

import json
import math

import numpy as np
import pytest
from kits.tiny_topics import CLASSES, make_texts, tiny_config, write_jsonl

from tfm_cls import runs as R
from tfm_cls.classify.predict import predict_proba
from tfm_cls.config import ConfigError
from tfm_cls.runs import load_run
from tfm_cls.train.recipe import prepare_run_dir, train
from tfm_cls.training.checkpoint import CheckpointError


def test_tiny_run_writes_a_complete_run_dir_and_learns(tiny_data, tmp_path):
    run_dir = tmp_path / "run"
    metrics = train(tiny_config(tiny_data, run_dir))
    for name in (R.CONFIG_FILE, R.MODEL_CONFIG_FILE, R.TOKENIZER_FILE, R.LABELS_FILE, R.WEIGHTS_FILE,
                 R.METRICS_FILE, R.REPORT_FILE, R.CONFUSION_FILE, R.CURVES_FILE, R.LAST_CHECKPOINT, R.LOG_FILE,
                 R.HISTORY_FILE):
        assert (run_dir / name).is_file(), name
    assert (run_dir / R.CONFUSION_FILE).read_bytes()[:4] == b"\x89PNG"
    saved = json.loads((run_dir / R.METRICS_FILE).read_text())
    assert saved["test"]["accuracy"] == metrics["test"]["accuracy"]
    assert metrics["test"]["accuracy"] >= 0.8  # topic words make this easy; chance is 1/3
    assert set(metrics["test"]["per_class"]) == set(CLASSES)
    assert metrics["train_tokens_per_second"] > 0 and metrics["train_seconds"] > 0
    assert "step" in (run_dir / R.LOG_FILE).read_text()
    # load_run gives the best model back: its predictions reproduce the stored test accuracy.
    run = load_run(run_dir)
    assert run.labels == CLASSES and not run.model.training
    test_rows = [json.loads(line) for line in (tiny_data / "test.jsonl").read_text().splitlines()]
    probs = predict_proba(run, [r["text"] for r in test_rows])
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)
    accuracy = np.mean(probs.argmax(1) == np.array([r["label"] for r in test_rows]))
    assert accuracy == pytest.approx(metrics["test"]["accuracy"])


def test_refuses_a_run_dir_holding_a_different_run(tiny_data, tmp_path):
    run_dir = tmp_path / "run"
    train(tiny_config(tiny_data, run_dir, "train.epochs=1"))
    with pytest.raises(R.RunDirError, match=r"different run \(train.lr: 0.01 -> 0.02\).*--overwrite"):
        train(tiny_config(tiny_data, run_dir, "train.epochs=1", "train.lr=0.02"))
    metrics = train(tiny_config(tiny_data, run_dir, "train.epochs=1", "train.lr=0.02"), overwrite=True)
    assert R.load_run(run_dir).config.train.lr == 0.02 and metrics["steps"] == 8
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(R.RunDirError, match="holds no tfm_cls run"):
        train(tiny_config(tiny_data, tmp_path / "other", "train.epochs=1"))


def test_a_run_dir_holding_only_the_log_of_a_failed_start_is_reusable(tiny_data, tmp_path):
    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / R.LOG_FILE).write_text("12:00:00 ERROR tfm_cls: data not found\n")
    assert prepare_run_dir(tiny_config(tiny_data, failed), resume=False, overwrite=False) == failed
    (failed / "notes.txt").write_text("mine")
    with pytest.raises(R.RunDirError, match=r"holds no tfm_cls run \(config.yaml missing\)"):
        prepare_run_dir(tiny_config(tiny_data, failed), resume=False, overwrite=False)


def test_corrupt_or_truncated_checkpoint(tiny_data, tmp_path):
    run_dir = tmp_path / "run"
    cfg = tiny_config(tiny_data, run_dir, "train.epochs=1")
    train(cfg)
    ckpt = run_dir / R.LAST_CHECKPOINT
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"last\.ckpt: corrupt or truncated checkpoint"):
        train(cfg, resume=True)
    weights = run_dir / R.WEIGHTS_FILE
    weights.write_bytes(b"garbage" * 10)
    with pytest.raises(CheckpointError, match=r"model\.safetensors: corrupt or truncated"):
        load_run(run_dir)


def test_resume_needs_a_checkpoint(tiny_data, tmp_path):
    with pytest.raises(R.RunDirError, match="no checkpoint to resume"):
        train(tiny_config(tiny_data, tmp_path / "fresh"), resume=True)


def test_tokenizer_longer_than_positional_encoding(tiny_data, tmp_path):
    with pytest.raises(ConfigError, match=r"tokenizer.max_length=64 exceeds model.max_len=32"):
        tiny_config(tiny_data, tmp_path / "run", "tokenizer.max_length=64")


def test_empty_and_overlong_texts_are_counted_not_fatal(tmp_path):
    rows = make_texts(60, 0)
    rows[0]["text"], rows[1]["text"] = "", "   \t "
    rows[2]["text"] = " ".join(["cat"] * 500)  # far beyond max_length=16
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "test.jsonl", make_texts(15, 3) + [{"text": "", "label": 0}])
    metrics = train(tiny_config(tmp_path, tmp_path / "run", "train.epochs=2", "data.path=" + str(tmp_path / "train.jsonl")))
    # data.path=FILE: validation and test are carved from it, so count in train + carved splits.
    report = metrics["data"]
    assert sum(report["empty"].values()) == 2 and sum(report["truncated"].values()) == 1
    assert all(math.isfinite(metrics[s]["loss"]) for s in ("validation", "test"))


def test_a_run_saved_before_a_config_key_existed_still_resumes(tiny_data, tmp_path):
    """Keys added to the config later (at their defaults) are not differences: an older run
    directory resumes; a key that really differs is still refused."""
    import yaml

    run_dir = tmp_path / "run"
    cfg = tiny_config(tiny_data, run_dir, "train.max_steps=6", "train.checkpoint_every=3")
    train(cfg)
    saved = yaml.safe_load((run_dir / R.CONFIG_FILE).read_text())
    del saved["train"]["tensorboard"], saved["tokenizer"]["truncation"]  # as written by an older version
    (run_dir / R.CONFIG_FILE).write_text(yaml.safe_dump(saved))
    assert prepare_run_dir(cfg, resume=True, overwrite=False) == run_dir
    saved["train"]["lr"] = 0.5
    (run_dir / R.CONFIG_FILE).write_text(yaml.safe_dump(saved))
    with pytest.raises(R.RunDirError, match=r"different run \(train.lr: 0.5 -> 0.01\)"):
        prepare_run_dir(cfg, resume=True, overwrite=False)


def test_a_loop_whose_best_evaluation_cannot_be_beaten_stops_there(tiny_data, tmp_path):
    """Validation accuracy 1.0: no later evaluation can beat it, so the loop stops (the time goes back to the
    user) and says why, with the weights of that evaluation kept."""
    metrics = train(tiny_config(tiny_data, tmp_path / "run", "train.epochs=40", "train.eval_every=4",
                                "train.best_metric=accuracy", "train.early_stopping_patience=100"))
    history = json.loads((tmp_path / "run" / R.HISTORY_FILE).read_text())["eval"]
    assert history[-1]["accuracy"] == 1.0 and all(e["accuracy"] < 1.0 for e in history[:-1])
    assert metrics["stopped"].startswith("early stopping: the best validation accuracy is 1")
    assert metrics["best_step"] == history[-1]["step"] == metrics["steps"] and metrics["epochs"] < 40
