"""`tfm-cls train` under torchrun: 2 CPU processes (gloo) against 1 process, end to end."""

import json

import numpy as np
import pytest
import torch
from kits.ddp_tiny import SIZES, config_file, torchrun_killed_after_checkpoint, torchrun_train, write_data

from tfm_cls import runs as R
from tfm_cls.classify.predict import evaluate, run_head
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.data.tokenized import tokenize_dataset
from tfm_cls.runs import load_run
from tfm_cls.train import train
from tfm_cls.training.checkpoint import load_checkpoint


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    """One 2-process run (per-rank batch 4), shared by the tests below."""
    root = tmp_path_factory.mktemp("ddp")
    data = write_data(root / "data")
    run_dir = root / "two"
    done = torchrun_train(2, ["--config", str(config_file(root / "two.yaml", data, run_dir, 4))])
    return {"root": root, "data": data, "run_dir": run_dir, "stdout": done.stdout, "stderr": done.stderr}


def _final_weights(run_dir):
    return load_checkpoint(run_dir / R.LAST_CHECKPOINT)


def _max_difference(a: dict, b: dict) -> float:
    """Largest |a - b| over all parameters except the attention's key bias. Its gradient is zero
    in exact arithmetic (adding q.b_k to every score of a row leaves the softmax unchanged), so
    it only ever sees rounding noise, which Adam's m / sqrt(v) scales up to steps of size lr:
    any change in summation order (here DDP's all-reduce) moves it by ~lr per step."""
    worst = 0.0
    for key in b:
        diff = (a[key] - b[key]).abs()
        if key.endswith("self_attn.in_proj_bias"):
            d = diff.numel() // 3
            diff = torch.cat([diff[:d], diff[2 * d :]])  # query and value biases; not the key bias
        worst = max(worst, float(diff.max()))
    return worst


def test_two_processes_with_half_batches_reach_the_parameters_of_one_process(ddp_run):
    root, data = ddp_run["root"], ddp_run["data"]
    one = root / "one"
    train(load_config(ClassifierConfig, config_file(root / "one.yaml", data, one, 8)))
    two, single = _final_weights(ddp_run["run_dir"]), _final_weights(one)
    assert two["step"] == single["step"] == 2 * SIZES["train"] // 8  # 6 global batches per epoch, 2 epochs
    assert two["world_size"] == 2 and len(two["rng_per_rank"]) == 2
    worst = _max_difference(two["model"], single["model"])
    assert worst <= 1e-5, f"2 x batch 4 differs from 1 x batch 8 by {worst:.3g}"

    # The comparison can fail: one process with batch 4 (twice the steps) ends elsewhere.
    half = root / "half"
    train(load_config(ClassifierConfig, config_file(root / "half.yaml", data, half, 4)))
    other = _final_weights(half)
    assert _max_difference(other["model"], single["model"]) > 1e-3


def test_metrics_count_every_evaluation_example_exactly_once(ddp_run):
    run_dir = ddp_run["run_dir"]
    metrics = json.loads((run_dir / R.METRICS_FILE).read_text())
    assert metrics["world_size"] == 2 and metrics["device"] == "cpu"
    for split in ("validation", "test"):
        assert metrics[split]["examples"] == SIZES[split]
        assert sum(c["support"] for c in metrics[split]["per_class"].values()) == SIZES[split]
    # The same weights evaluated by one process over the whole split give the same numbers.
    run = load_run(run_dir)
    data_cfg = run.config.data
    from tfm_cls.data.sources import load_data

    data = load_data(data_cfg)
    for split in ("validation", "test"):
        # the run's head: its loss is the NLL of the calibrated scores (train.calibration)
        single, _ = evaluate(run.model, tokenize_dataset(data.splits[split], run.tokenizer), run.labels, 8,
                             torch.device("cpu"), head=run_head(run))
        assert single["accuracy"] == metrics[split]["accuracy"]
        assert single["per_class"] == metrics[split]["per_class"]
        assert single["loss"] == pytest.approx(metrics[split]["loss"], abs=1e-6)


def test_only_rank_zero_writes_prints_and_logs_and_the_group_shuts_down_cleanly(ddp_run):
    out_lines = [line for line in ddp_run["stdout"].splitlines() if line.startswith("{")]
    assert len(out_lines) == 1 and json.loads(out_lines[0])["run_dir"] == str(ddp_run["run_dir"])
    log = (ddp_run["run_dir"] / R.LOG_FILE).read_text()
    assert log.count("training stopped") == 1
    assert ddp_run["stderr"].count("training stopped") == 1  # rank 1 logs warnings only
    assert "terminate called" not in ddp_run["stderr"]
    assert "2 process(es) x batch 4" in log
    leftovers = [p.name for p in ddp_run["run_dir"].iterdir() if p.name.startswith(".")]
    assert leftovers == []  # no temporary files of a second writer


@pytest.mark.slow
def test_a_killed_two_process_run_resumes_to_the_uninterrupted_result(tmp_path):
    """SIGKILL (agent and ranks) after the first checkpoint, then --resume under torchrun: the
    same final weights and metrics as an uninterrupted 2-process run, dropout included (each
    rank's RNG state is in the checkpoint)."""
    data = write_data(tmp_path / "data")
    # 30 epochs (180 steps, a few seconds): long enough after the first checkpoint to be killed mid-run.
    extra = ("model.dropout=0.1", "train.checkpoint_every=5", "train.epochs=30")
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    killed_cfg = ["--config", str(config_file(tmp_path / "killed.yaml", data, killed, 4, *extra))]
    torchrun_killed_after_checkpoint(2, killed_cfg, killed / R.LAST_CHECKPOINT)
    state = load_checkpoint(killed / R.LAST_CHECKPOINT)
    assert 0 < state["step"] < 180 and not (killed / R.METRICS_FILE).exists()
    torchrun_train(2, [*killed_cfg, "--resume"])
    torchrun_train(2, ["--config", str(config_file(tmp_path / "reference.yaml", data, reference, 4, *extra))])
    a, b = _final_weights(killed), _final_weights(reference)
    assert a["step"] == b["step"] == 180
    for key in b["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    ma, mb = (json.loads((d / R.METRICS_FILE).read_text()) for d in (killed, reference))
    assert ma["test"]["per_class"] == mb["test"]["per_class"]
    assert np.isclose(ma["test"]["loss"], mb["test"]["loss"], atol=0, rtol=0)
