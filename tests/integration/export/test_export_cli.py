"""`tfm-cls export` / `verify-onnx` on a run directory, through the CLI as `make export` calls it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from kits.export_testkit import LABELS, MAX_LENGTH, TEXTS
from onnx import numpy_helper

from tfm_cls.cli import main
from tfm_cls.config import ClassifierConfig, TokenizerConfig, save_config
from tfm_cls.data.tokenizer import save_tokenizer
from tfm_cls.io import write_json
from tfm_cls.weights import save_weights


@pytest.fixture(scope="module")
def run_dir(classifier, tokenizer, tmp_path_factory):
    """A finished run as `tfm-cls train` leaves it (the files load_run reads)."""
    run = tmp_path_factory.mktemp("run")
    save_config(ClassifierConfig(name="tiny", tokenizer=TokenizerConfig(max_length=MAX_LENGTH)), run / "config.yaml")
    write_json(run / "model_config.json", classifier.config)
    write_json(run / "labels.json", LABELS)
    save_tokenizer(tokenizer, run / "tokenizer.json")
    save_weights(classifier, run / "model.safetensors")
    return run


@pytest.fixture(scope="module")
def exported(run_dir):
    """The run with RUN/model.onnx, exported (and verified) by `tfm-cls export`."""
    assert main(["export", "--run", str(run_dir)]) == 0
    return run_dir


def test_export_then_verify_on_a_run(exported, capsys):
    assert (exported / "model.onnx").is_file() and not list(exported.glob("*.data"))
    meta = {p.key: p.value for p in onnx.load(str(exported / "model.onnx")).metadata_props}
    assert meta["tfm_cls.max_length"] == str(MAX_LENGTH)
    assert main(["verify-onnx", "--run", str(exported)]) == 0
    out = capsys.readouterr().out
    assert "PASSED" in out and "values (CPU)" in out


def test_verify_onnx_exits_1_on_a_broken_file(exported, tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    model = onnx.load(str(exported / "model.onnx"))
    init = next(i for i in model.graph.initializer if i.name.endswith("head.weight"))
    array = numpy_helper.to_array(init) * -1.0
    init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(array), init.name))
    onnx.save(model, str(bad))
    assert main(["verify-onnx", "--run", str(exported), "--model", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "FAILED" in err and "worst difference" in err


def test_verify_onnx_without_export_says_what_to_do(run_dir, tmp_path, capsys):
    empty = tmp_path / "run"
    shutil.copytree(run_dir, empty, ignore=shutil.ignore_patterns("*.onnx"))
    assert main(["verify-onnx", "--run", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"tfm-cls export --run {empty}" in err and len(err.splitlines()) == 1


def test_export_of_a_missing_run_is_a_clear_error(tmp_path, capsys):
    assert main(["export", "--run", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and len(err.splitlines()) == 1


def test_tfm_cls_infer_writes_what_the_standalone_script_writes(classifier_onnx, tmp_path):
    """`tfm-cls infer` is export/infer.py: the same arguments give the same bytes."""
    src = tmp_path / "in.txt"
    src.write_text("\n".join(TEXTS[:7]) + "\n\n" + " ".join(TEXTS) + "\n", encoding="utf-8")  # an empty and a long line
    script = Path(__file__).resolve().parents[3] / "export" / "infer.py"
    outputs = {}
    for name, command in (("cli", [sys.executable, "-m", "tfm_cls.cli", "infer"]), ("script", [sys.executable, str(script)])):
        out = tmp_path / f"{name}.jsonl"
        args = ["--model", str(classifier_onnx), "--input", str(src), "--output", str(out), "--no-progress"]
        proc = subprocess.run([*command, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs[name] = out.read_bytes()
    assert len(outputs["cli"].splitlines()) == 9  # one row per line, the empty one included ("empty": true)
    assert outputs["cli"] == outputs["script"]


def test_tfm_cls_infer_errors_are_one_line(classifier_onnx, tmp_path, capsys):
    assert main(["infer", "--model", str(classifier_onnx), "--input", str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: input file not found: {tmp_path / 'missing.txt'}\n"
