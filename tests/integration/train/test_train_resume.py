"""A run killed with SIGKILL mid-epoch and resumed ends exactly like an uninterrupted run (CPU)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from kits.tiny_topics import tiny_config, write_topic_data
from safetensors.torch import load_file

from tfm_cls import runs as R
from tfm_cls.config import save_config
from tfm_cls.train import train

EXTRA = ("train.epochs=3", "train.checkpoint_every=7",
         "train.eval_every=25", "train.lr=3e-3")
# the bag-of-tokens branch fitted before the first step: the resumed run reads its training
# offsets back from the run directory and keeps the fitted branch (tfm_cls.bag.warm_start)
WIDE = ("wide.enabled=true", "wide.weighting=tfidf", "wide.warm_start=true")


def _kill_after_first_checkpoint(config_path, run_dir, timeout=120.0):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfm_cls.cli", "train", "--config", str(config_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )
    ckpt = run_dir / R.LAST_CHECKPOINT
    deadline = time.monotonic() + timeout
    while not ckpt.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"run ended before the kill: {stderr.decode()[-2000:]}"


# warm-started-wide is slow (make test-slow): the SIGKILL-and-resume equality is the encoder case's, and that a resumed
# warm-started run reads its offsets back (or fails on bad ones) is tasks/test_wide_branch.py's quicker check
@pytest.mark.parametrize("wide", [pytest.param((), id="encoder"),
                                  pytest.param(WIDE, id="warm-started-wide", marks=pytest.mark.slow)])
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path, wide):
    data = write_topic_data(tmp_path / "data", (600, 60, 60), labels=False)
    extra = (*EXTRA, *wide)

    killed_dir, config_path = tmp_path / "killed", tmp_path / "killed.yaml"
    save_config(tiny_config(data, killed_dir, *extra), config_path)
    _kill_after_first_checkpoint(config_path, killed_dir)
    state = torch.load(killed_dir / R.LAST_CHECKPOINT, weights_only=True)["state"]
    assert 0 < state["position"] and state["step"] < 3 * 75  # killed mid-epoch, well before the end
    assert not (killed_dir / R.METRICS_FILE).exists()

    resumed = train(tiny_config(data, killed_dir, *extra), resume=True)
    reference = train(tiny_config(data, tmp_path / "reference", *extra))

    assert (killed_dir / R.TOKENIZER_FILE).read_text() == (tmp_path / "reference" / R.TOKENIZER_FILE).read_text()
    history = [json.loads((d / R.HISTORY_FILE).read_text()) for d in (killed_dir, tmp_path / "reference")]
    assert history[0] == history[1]
    for split in ("validation", "test"):
        for key in ("loss", "accuracy", "macro_f1", "per_class"):
            assert resumed[split][key] == reference[split][key], (split, key)
    assert (resumed["steps"], resumed["best_step"]) == (reference["steps"], reference["best_step"])
    a, b = load_file(killed_dir / R.WEIGHTS_FILE), load_file(tmp_path / "reference" / R.WEIGHTS_FILE)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
