"""Cases 1, 2 and 11: `tfm-cls export` never destroys a working model.onnx, a retrained run's
exports are removed or refused, and no onnxruntime entry point writes outside the run directory."""

from __future__ import annotations

import shutil

import torch
from kits.reliability_kit import TINY, error_line, hashes, read_jsonl, stderr_of
from safetensors.torch import load_file, save_file


def test_failed_verification_keeps_the_previous_model_onnx(run, runner):
    before = (run / "model.onnx").read_bytes()
    weights = load_file(str(run / "model.safetensors"))
    save_file({k: torch.full_like(v, float("nan")) if v.is_floating_point() else v for k, v in weights.items()},
              str(run / "model.safetensors"))
    proc = runner.cli("export", "--run", run, "--providers", "CPUExecutionProvider")
    assert proc.returncode == 1
    line = error_line(proc)
    assert "verification failed" in line and "model.onnx was not changed" in line and "NaN" in line
    assert (run / "model.onnx").read_bytes() == before
    assert not [p.name for p in run.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_export_to_a_full_disk_keeps_the_previous_file(run, runner, small_disk):
    disk = small_disk(200)  # holds one model.onnx (~140 KB), not two
    shutil.copy(run / "model.onnx", disk / "model.onnx")
    before = hashes(disk)
    proc = runner.cli("export", "--run", run, "--output", disk / "model.onnx", "--no-verify")
    assert proc.returncode == 2, stderr_of(proc)
    line = error_line(proc)
    assert "no space left on device" in line and str(disk / "model.onnx") in line
    assert hashes(disk) == before
    assert runner.infer("--model", disk / "model.onnx", stdin=b"cat dog\n").returncode == 0  # still works


def test_corrupt_weights_on_export_exit_2_and_keep_model_onnx(run, runner):
    before = hashes(run)
    data = (run / "model.safetensors").read_bytes()
    (run / "model.safetensors").write_bytes(data[: len(data) // 2])
    proc = runner.cli("export", "--run", run)
    assert proc.returncode == 2
    assert "model.safetensors: corrupt or truncated" in error_line(proc)
    after = hashes(run)
    assert after.pop("model.safetensors") != before.pop("model.safetensors")
    assert after == before


def test_verify_report_is_printed_once(run, runner):
    proc = runner.cli("verify-onnx", "--run", run, "--providers", "CPUExecutionProvider")
    assert proc.returncode == 0, stderr_of(proc)
    both = proc.stdout.decode() + stderr_of(proc)
    assert both.count("PASSED") == 1 and both.count("values (CPU)") == 1, both


def test_retrain_removes_exports_and_a_stale_copy_is_refused(run, runner, data, tmp_path):
    """--overwrite (here with another model.d_model) removes model.onnx; the old file put back is
    refused by infer and verify-onnx (weights digest); the warmup warning and the file mode too."""
    stale = tmp_path / "stale.onnx"
    shutil.copy(run / "model.onnx", stale)
    (run / "model.int8.onnx").write_bytes(stale.read_bytes())
    proc = runner.cli("train", *TINY, "model.d_model=8", "train.warmup_steps=500", f"data.path={data}",
                      f"run_dir={run}", "--overwrite")
    assert proc.returncode == 0, stderr_of(proc)
    assert not (run / "model.onnx").exists() and not (run / "model.int8.onnx").exists()
    assert "train.warmup_steps=500 is not below the 12 planned steps" in stderr_of(proc)
    assert {oct(p.stat().st_mode & 0o777) for p in run.iterdir() if p.is_file()} == {"0o644"}

    shutil.copy(stale, run / "model.onnx")
    proc = runner.infer("--model", run / "model.onnx", stdin=b"cat dog\n")
    assert proc.returncode == 2
    assert "was exported from other weights" in error_line(proc) and "re-export" in error_line(proc)
    proc = runner.cli("verify-onnx", "--run", run)
    assert proc.returncode == 2
    assert "was exported from other weights" in error_line(proc)
    proc = runner.cli("export", "--run", run, "--no-verify")
    assert proc.returncode == 0, stderr_of(proc)
    proc = runner.infer("--model", run / "model.onnx", stdin=b"cat dog\n")
    assert proc.returncode == 0 and len(read_jsonl(proc.stdout)) == 1


def test_onnxruntime_entry_points_write_nothing_under_home(run, runner, data, tmp_path):
    labelled = data / "test.jsonl"
    assert runner.infer("--model", run / "model.onnx", stdin=b"cat\n").returncode == 0
    proc = runner.cli("quantize", "--run", run, "--data", labelled, "--threshold", "100")
    assert proc.returncode == 0, stderr_of(proc)
    assert "INFO" not in stderr_of(proc).replace("INFO tfm_cls", "")  # onnxruntime's own INFO lines silenced
    assert list(runner.home.rglob("*")) == []  # no ~/.cache/Microsoft/DeveloperTools/.onnxruntime
