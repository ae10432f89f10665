"""A sentence-pair regression run under torchrun (2 CPU processes, gloo) reaches the parameters
of one process with the same global batch: token types and float targets shard and gather."""

import json
import os
import subprocess
import sys

import pytest
import torch
from kits import tasks_tiny as T

from tfm_cls import runs as R
from tfm_cls.config import ClassifierConfig, load_config, save_config
from tfm_cls.train import train
from tfm_cls.training.checkpoint import load_checkpoint

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not available")


def _config(path, data, run, batch_size):
    extra = [*T.REGRESSION, f"train.batch_size={batch_size}", "train.epochs=2", "model.dropout=0.0",
             "train.checkpoint_every=1000"]
    save_config(load_config(ClassifierConfig, None, T.overrides(data, run, *extra)), path)
    return path


# Slow (make test-slow): two processes matching one are tests/integration/distributed's (single label), the
# collectives (float rows gathered) tests/unit/training/test_distributed.py's, pair and regression runs and the
# token types reaching the model test_tasks_train.py's; this one joins them under torchrun (about 30 s).
@pytest.mark.slow
def test_pair_regression_two_processes_match_one(pair_data, tmp_path):
    two, one = tmp_path / "two", tmp_path / "one"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "tfm_cls.cli",
           "train", "--config", str(_config(tmp_path / "two.yaml", pair_data, two, 4))]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    reference = train(load_config(ClassifierConfig, _config(tmp_path / "one.yaml", pair_data, one, 8)))
    a, b = load_checkpoint(two / R.LAST_CHECKPOINT), load_checkpoint(one / R.LAST_CHECKPOINT)
    assert a["world_size"] == 2 and a["step"] == b["step"]
    for key in b["model"]:
        if key.endswith("self_attn.in_proj_bias"):  # the key bias only sees rounding noise (tests/integration/distributed)
            continue
        assert torch.allclose(a["model"][key], b["model"][key], atol=1e-4), key
    metrics = json.loads((two / R.METRICS_FILE).read_text())
    assert metrics["test"]["examples"] == reference["test"]["examples"] == 45
    assert metrics["test"]["pearson"] == pytest.approx(reference["test"]["pearson"], abs=1e-3)
