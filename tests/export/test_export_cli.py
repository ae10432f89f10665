"""`tfm-cls export` / `verify-onnx` on a run directory, as `make export` and `make verify-onnx` call them."""

from __future__ import annotations

import shutil
from argparse import Namespace

import numpy as np
import onnx
import pytest
from export_testkit import LABELS, MAX_LENGTH
from onnx import numpy_helper

from export import commands
from tfm_cls.artifacts import write_json
from tfm_cls.checkpoint import save_weights
from tfm_cls.config import ClassifierConfig, TokenizerConfig, save_config
from tfm_cls.tokenizer import save_tokenizer


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


def test_export_then_verify_on_a_run(run_dir, capsys):
    assert commands.run_export(Namespace(run=str(run_dir), output=None, fuse=False, no_verify=False, providers=None)) == 0
    assert (run_dir / "model.onnx").is_file() and not list(run_dir.glob("*.data"))
    assert "PASSED" in capsys.readouterr().out
    meta = {p.key: p.value for p in onnx.load(str(run_dir / "model.onnx")).metadata_props}
    assert meta["tfm_cls.max_length"] == str(MAX_LENGTH)

    assert commands.run_verify(Namespace(run=str(run_dir), model=None, providers=None)) == 0
    assert "values (CPU)" in capsys.readouterr().out


def test_verify_onnx_exits_nonzero_on_a_broken_file(run_dir, tmp_path, capsys):
    if not (run_dir / "model.onnx").exists():
        pytest.skip("needs the export of the previous test")
    bad = tmp_path / "bad.onnx"
    model = onnx.load(str(run_dir / "model.onnx"))
    init = next(i for i in model.graph.initializer if i.name.endswith("head.weight"))
    array = numpy_helper.to_array(init) * -1.0
    init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(array), init.name))
    onnx.save(model, str(bad))
    assert commands.run_verify(Namespace(run=str(run_dir), model=str(bad), providers=None)) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "worst difference" in out


def test_verify_onnx_without_export_says_what_to_do(run_dir, tmp_path, caplog):
    empty = tmp_path / "run"
    shutil.copytree(run_dir, empty, ignore=shutil.ignore_patterns("*.onnx"))
    assert commands.run_verify(Namespace(run=str(empty), model=None, providers=None)) == 2
    assert "make export" in caplog.text


def test_export_of_a_missing_run_is_a_clear_error(tmp_path, caplog):
    args = Namespace(run=str(tmp_path / "nope"), output=None, fuse=False, no_verify=False, providers=None)
    assert commands.run_export(args) == 2
    assert "does not exist" in caplog.text
