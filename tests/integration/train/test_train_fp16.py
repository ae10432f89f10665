"""A whole training run in fp16 with DataLoader workers (tfm_cls.training.precision's loss scaler in a run)."""

import json

import torch
from kits.ddp_tiny import config_file, write_data

from tfm_cls import runs as R
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.train import train
from tfm_cls.training.checkpoint import load_checkpoint


def test_training_in_fp16_with_loader_workers(tmp_path):
    data = write_data(tmp_path / "data")
    run_dir = tmp_path / "run"
    cfg = load_config(ClassifierConfig, config_file(tmp_path / "c.yaml", data, run_dir, 8,
                                                     "train.precision=fp16", "train.num_workers=1"))
    metrics = train(cfg)
    assert metrics["precision"] == "fp16" and metrics["steps"] == 12
    assert metrics["validation"]["accuracy"] > 0.5  # it learned (3 classes, chance 1/3)
    scaler = load_checkpoint(run_dir / R.LAST_CHECKPOINT)["scaler"]
    assert scaler["scale"] > 0 and "_growth_tracker" in scaler
    history = json.loads((run_dir / R.HISTORY_FILE).read_text())
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in history["train"])
