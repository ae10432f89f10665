"""tests/integration/device/check_gpu.py (`make check-gpu`) on CPU: its refusals without a GPU, its pieces, and (slow) the whole dry run."""

import json

import numpy as np
import pytest
import torch
from kits.tiny_topics import write_topic_data

from integration.device import check_gpu  # the script beside this file (pytest collects only test_*.py)


@pytest.fixture
def data_root(tmp_path):
    write_topic_data(tmp_path / "data" / "tiny", (48, 33, 29))  # the dry run's test split: 29 texts
    return tmp_path / "data"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_stops_at_once_with_one_line(data_root, tmp_path, capsys):
    out = tmp_path / "out.json"
    assert check_gpu.main(["--data-root", str(data_root), "--dataset", "tiny", "--output", str(out)]) == 2
    line = _one_line(capsys)
    assert line.startswith("check-gpu: cannot run: no CUDA GPU visible to torch") and "--cpu-dry-run" in line
    assert not out.exists()


def test_without_the_onnxruntime_cuda_provider_it_stops_with_one_line(monkeypatch, data_root, capsys):
    _fake_gpu(monkeypatch, ["CPUExecutionProvider"])
    assert check_gpu.main(["--data-root", str(data_root), "--dataset", "tiny"]) == 2
    line = _one_line(capsys)
    assert "has no CUDAExecutionProvider" in line and "onnxruntime-gpu" in line and "--torch-only" in line


def test_a_missing_dataset_is_named(tmp_path, capsys):
    assert check_gpu.main(["--cpu-dry-run", "--data-root", str(tmp_path), "--dataset", "nope"]) == 2
    assert str(tmp_path / "nope" / "train.jsonl") in _one_line(capsys)


def test_attention_kernel_probe_runs_each_backend_alone_and_compares_with_math():
    from tfm_cls.model import TransformerClassifier

    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=50, num_classes=3, d_model=16, nhead=2, num_layers=1,
                                  dim_feedforward=32, dropout=0.0, max_len=16)
    ids = np.array([[2, 5, 6, 7, 3], [2, 9, 3, 0, 0]])
    result = check_gpu.attention_kernels(model, {"padded": (ids, (ids != 0).astype(np.int64))}, "cpu", None)
    rows = result["padded"]["backends"]
    assert result["padded"]["padded"] and rows["math"]["ok"]
    # On CPU the memory-efficient kernel does not exist: the probe must report it, not crash.
    assert not rows["efficient"]["ok"] and rows["efficient"]["error"]
    for name in result["padded"]["fused_usable"]:
        assert rows[name]["max_abs_diff_vs_math"] < 1e-5


def test_dry_run_pieces_train_export_and_time_on_cpu(data_root, tmp_path):
    plan = check_gpu.make_plan(check_gpu.argparse.Namespace(cpu_dry_run=True))
    assert (plan.device, plan.ort_provider, plan.verify_providers) == ("cpu", "CPUExecutionProvider", ["CPUExecutionProvider"])
    trained = check_gpu.run_training(plan, data_root / "tiny", tmp_path / "run", None)
    assert trained["steps"] == 4 and trained["test_examples"] == 29

    from tfm_cls.export.exporter import export_run

    from tfm_cls.runs import load_run

    run = load_run(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["precision"] == "bf16"
    onnx_path = export_run(tmp_path / "run", tmp_path / "classifier.onnx")
    texts = check_gpu.read_texts(data_root / "tiny", 32)
    batches = {b: check_gpu.text_batch(run.tokenizer, texts, b) for b in (1, 32)}
    ids, mask = batches[32]  # the tiny test split has 29 texts
    assert ids.shape[0] == 29 and (mask == 0).any() and (mask.sum(1) == mask.shape[1]).any()
    rows = check_gpu.time_inference(run.model, onnx_path, batches, plan)
    assert [r["batch"] for r in rows] == [1] * 4 + [29] * 4
    assert all(r["median_ms"] > 0 and r["texts_per_s"] > 0 for r in rows)
    assert rows[0]["speedup_vs_fp32"] == 1.0
    table = check_gpu.render_table(rows)
    assert table.count("\n") == len(rows) + 1 and "onnxruntime CPU" in table


def test_failures_name_each_failed_check():
    results = {
        "plan": {"dry_run": False},
        "verify": {"classifier": {"ok": True}, "seq2seq": {"ok": False}, "export_seconds_seq2seq": 1.0},
        "attention": {"padded batch": {"fused_usable": []}},
    }
    assert check_gpu.failures(results) == [
        "verification of seq2seq", "no fused attention kernel runs the padded (packed) batch on CUDA",
    ]
    results["attention"]["padded batch"]["fused_usable"] = ["efficient"]
    results["verify"]["seq2seq"]["ok"] = True
    assert check_gpu.failures(results) == []


@pytest.mark.slow
def test_the_whole_cpu_dry_run(data_root, tmp_path, capsys):
    out = tmp_path / "dry.json"
    assert check_gpu.main(["--cpu-dry-run", "--data-root", str(data_root), "--dataset", "tiny", "--output", str(out)]) == 0
    results = json.loads(out.read_text())
    assert set(results["verify"]) >= {"classifier", "seq2seq", "seq2seq-encoder", "seq2seq-decoder"}
    assert all(r["ok"] for r in results["verify"].values() if isinstance(r, dict))
    assert len(results["timing"]) == 8 and results["train"]["steps"] == 4
    assert "all checks passed" in capsys.readouterr().out


def _fake_gpu(monkeypatch, providers):
    import onnxruntime as ort

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: (9, 0))
    monkeypatch.setattr(ort, "get_available_providers", lambda: providers)


@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider':UserWarning")
def test_a_listed_cuda_provider_that_falls_back_to_cpu_counts_as_missing(monkeypatch):
    # The CPU build of onnxruntime here cannot start CUDA: the probe session must notice the fallback.
    _fake_gpu(monkeypatch, ["CUDAExecutionProvider", "CPUExecutionProvider"])
    with pytest.raises(check_gpu.CheckError, match="fell back to CPUExecutionProvider"):
        check_gpu.preflight(dry_run=False, torch_only=False)


def test_torch_only_needs_no_cuda_provider(monkeypatch, data_root, tmp_path):
    # A GPU, and an onnxruntime without CUDA: --torch-only must neither refuse nor try to start
    # the CUDA provider, and every onnxruntime step it plans runs on the CPU provider.
    _fake_gpu(monkeypatch, ["CPUExecutionProvider"])

    def no_cuda_probe():
        raise AssertionError("--torch-only started onnxruntime's CUDA provider")

    planned = []

    def run_all(plan, data_dir, work_dir, max_train_samples, info):
        planned.append(plan)
        return {"plan": {"dry_run": plan.dry_run}, "attention": {}, "verify": {}, "timing": []}

    monkeypatch.setattr(check_gpu, "_start_cuda_provider", no_cuda_probe)
    monkeypatch.setattr(check_gpu, "run_all", run_all)
    args = ["--data-root", str(data_root), "--dataset", "tiny", "--output", str(tmp_path / "out.json")]
    assert check_gpu.main([*args, "--torch-only"]) == 0
    (plan,) = planned
    assert (plan.dry_run, plan.device, plan.train_precision) == (False, "cuda", "bf16")
    assert plan.ort_provider == "CPUExecutionProvider" and plan.verify_providers == ["CPUExecutionProvider"]

    # Without --torch-only the same machine is refused before anything runs, naming the way out.
    with pytest.raises(check_gpu.CheckError, match=r"has no CUDAExecutionProvider .*--torch-only"):
        check_gpu.preflight(dry_run=False, torch_only=False)
    assert check_gpu.main(args) == 2 and len(planned) == 1
    plan = check_gpu.make_plan(check_gpu.argparse.Namespace(cpu_dry_run=False, torch_only=False, minutes=2.0, repeats=5))
    assert plan.ort_provider == "CUDAExecutionProvider"
    assert plan.verify_providers == ["CPUExecutionProvider", "CUDAExecutionProvider"]
