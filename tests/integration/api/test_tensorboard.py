"""TensorBoard event files: the engine's scalars, the confusion matrix and the config, read back
with tensorboard's own EventAccumulator and compared with history.json; off switch, missing
package, bit-exact training with and without it, and MLM pretraining."""

import json
import logging
import sys

import pytest
from kits.api_tiny import tiny_config

from tfm_cls.training import tensorboard as TB

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _events(log_dir):
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    acc.Reload()
    return acc


def test_event_files_hold_every_scalar_of_history(tiny_run):
    run_dir, metrics = tiny_run
    history = json.loads((run_dir / "history.json").read_text())
    acc = _events(run_dir / "tensorboard")
    tags = acc.Tags()
    assert {"train/loss", "train/lr", "train/tokens_per_second", "validation/loss", "validation/accuracy",
            "validation/macro_f1"} <= set(tags["scalars"])
    for key in ("loss", "lr"):
        events = acc.Scalars(f"train/{key}")
        assert [e.step for e in events] == [r["step"] for r in history["train"]]
        assert [e.value for e in events] == pytest.approx([r[key] for r in history["train"]], rel=1e-6)
    for key in ("loss", "accuracy", "macro_f1"):
        events = acc.Scalars(f"validation/{key}")
        assert [e.step for e in events] == [r["step"] for r in history["eval"]]
        assert [e.value for e in events] == pytest.approx([r[key] for r in history["eval"]], rel=1e-6)
    assert all(e.value > 0 for e in acc.Scalars("train/tokens_per_second"))
    # At the end: the test confusion matrix as an image, the resolved config as text.
    assert "test/confusion_matrix" in tags["images"]
    image = acc.Images("test/confusion_matrix")[-1]
    assert image.step == metrics["steps"] and image.width > 100 and image.height > 100
    text = acc.Tensors("config/text_summary")[-1]
    assert "tensorboard: true" in text.tensor_proto.string_val[0].decode()


def test_off_switch_and_identical_training(tmp_path, tiny_data, tiny_run):
    """train.tensorboard=false writes no event files, and the weights are the same bytes: writing
    events touches no random generator and no arithmetic."""
    from tfm_cls.train import train

    run_dir, on_metrics = tiny_run
    off = tmp_path / "off"
    off_metrics = train(tiny_config(tiny_data, off, "train.tensorboard=false"))
    assert not (off / "tensorboard").exists()
    assert (off / "model.safetensors").read_bytes() == (run_dir / "model.safetensors").read_bytes()
    timing = {"seconds", "texts_per_second"}
    for split in ("validation", "test"):
        assert {k: v for k, v in off_metrics[split].items() if k not in timing} == \
            {k: v for k, v in on_metrics[split].items() if k not in timing}


def test_missing_package_warns_once_and_training_goes_on(tmp_path, tiny_data, monkeypatch, caplog):
    from tfm_cls.train import train

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # `import` now raises ImportError
    monkeypatch.setattr(TB, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="tfm_cls.training.tensorboard"):
        assert TB.TensorBoardSink.open(tmp_path / "a") is None
        metrics = train(tiny_config(tiny_data, tmp_path / "run"))
    warnings = [r for r in caplog.records if r.name == "tfm_cls.training.tensorboard"]
    assert len(warnings) == 1 and "tfm-cls[tensorboard]" in warnings[0].getMessage()
    assert metrics["test"]["accuracy"] > 0 and not (tmp_path / "run" / "tensorboard").exists()


def test_disabled_open_returns_none(tmp_path):
    assert TB.TensorBoardSink.open(tmp_path, enabled=False) is None
    assert not (tmp_path / "tensorboard").exists()


def test_mlm_pretraining_logs_the_same_way(tmp_path, tiny_data):
    from tfm_cls.config import load_config
    from tfm_cls.pretrain import PretrainConfig, pretrain

    run_dir = tmp_path / "mlm"
    cfg = load_config(PretrainConfig, None, [
        f"data.path={tiny_data}", f"run_dir={run_dir}", "tokenizer.vocab_size=100", "tokenizer.min_frequency=1",
        "tokenizer.max_length=16", "model.d_model=16", "model.nhead=2", "model.num_layers=1",
        "model.dim_feedforward=32", "model.max_len=32", "mlm.seq_len=16", "train.batch_size=8", "train.epochs=2",
        "train.lr=3e-3", "train.warmup_steps=2", "train.eval_every=5", "train.log_every=2", "train.progress=false",
        "train.num_threads=1", "train.device=cpu",
    ])
    pretrain(cfg)
    history = json.loads((run_dir / "history.json").read_text())
    acc = _events(run_dir / "tensorboard")
    assert {"train/loss", "train/lr", "validation/loss", "validation/perplexity"} <= set(acc.Tags()["scalars"])
    assert [e.step for e in acc.Scalars("validation/perplexity")] == [r["step"] for r in history["eval"]]
    assert [e.value for e in acc.Scalars("train/loss")] == pytest.approx([r["loss"] for r in history["train"]], rel=1e-6)
