"""SIGKILL while the teacher labels, and while the student trains; `--resume` then gives the very
student an uninterrupted run gives (weights, history, metrics)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from kits.distill_tiny import distill_config
from safetensors.torch import load_file

from tfm_cls import runs as R
from tfm_cls.config import save_config
from tfm_cls.distill import distill
from tfm_cls.distill.labelling import CACHE_DIR

EXTRA = ("transfer.copies=20", "teacher.batch_size=1", "teacher.chunk_size=8", "train.epochs=3",
         "train.checkpoint_every=7", "train.eval_every=25", "train.lr=3e-3")


def _kill_when(config_path, ready, timeout=120.0):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen([sys.executable, "-m", "tfm_cls.cli", "distill", "--config", str(config_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + timeout
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"run ended before the kill: {stderr.decode()[-2000:]}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_data, teacher_run):
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    return run_dir, distill(distill_config(tiny_data, teacher_run, run_dir, *EXTRA))


def _same_student(a_dir, a_metrics, b_dir, b_metrics):
    a, b = load_file(a_dir / R.WEIGHTS_FILE), load_file(b_dir / R.WEIGHTS_FILE)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((a_dir / R.HISTORY_FILE).read_text()) == json.loads((b_dir / R.HISTORY_FILE).read_text())
    for key in ("loss", "accuracy", "macro_f1"):
        assert a_metrics["test"][key] == b_metrics["test"][key]
    assert a_metrics["steps"] == b_metrics["steps"]


# Slow (make test-slow): an interrupted labelling keeping its chunks and labelling only the rest is
# test_distill_labelling.py's quicker check, and SIGKILL then --resume giving the very student is the training case below.
@pytest.mark.slow
def test_sigkill_while_labelling_then_resume(tmp_path, tiny_data, teacher_run, reference):
    run_dir, config_path = tmp_path / "killed", tmp_path / "killed.yaml"
    save_config(distill_config(tiny_data, teacher_run, run_dir, *EXTRA), config_path)
    first_chunk = run_dir / CACHE_DIR / "chunk-00000.npy"
    _kill_when(config_path, first_chunk.exists)
    done = len(list((run_dir / CACHE_DIR).glob("chunk-*.npy")))
    total = -(-reference[1]["distillation"]["transfer_set"]["transfer_texts"] // 8)
    assert 1 <= done < total and not (run_dir / R.LAST_CHECKPOINT).exists()  # killed while labelling

    resumed = distill(distill_config(tiny_data, teacher_run, run_dir, *EXTRA), resume=True)
    assert resumed["distillation"]["cached_texts"] >= 8 * done - 8  # the chunks written before the kill were kept
    assert resumed["distillation"]["labelled_texts"] + resumed["distillation"]["cached_texts"] == 8 * (total - 1) + (
        reference[1]["distillation"]["transfer_set"]["transfer_texts"] - 8 * (total - 1))
    _same_student(run_dir, resumed, *reference)


def test_sigkill_while_training_then_resume(tmp_path, tiny_data, teacher_run, reference):
    run_dir, config_path = tmp_path / "killed", tmp_path / "killed.yaml"
    save_config(distill_config(tiny_data, teacher_run, run_dir, *EXTRA), config_path)
    _kill_when(config_path, (run_dir / R.LAST_CHECKPOINT).exists)
    state = torch.load(run_dir / R.LAST_CHECKPOINT, weights_only=True)["state"]
    assert state["step"] < reference[1]["steps"] and not (run_dir / R.METRICS_FILE).exists()

    resumed = distill(distill_config(tiny_data, teacher_run, run_dir, *EXTRA), resume=True)
    assert resumed["distillation"]["labelled_texts"] == 0  # the teacher was not called again
    _same_student(run_dir, resumed, *reference)
