"""int8 quantization: metadata kept, accuracy measured with the deployment path, and the gate."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from kits.export_testkit import LABELS, TEXTS
from onnx import numpy_helper
from tfm_cls.export import quantize

from tfm_cls.cli import main
from tfm_cls.runtime.session import Classifier


@pytest.fixture(scope="module")
def run_dir(classifier_onnx, tmp_path_factory):
    """A run directory holding only model.onnx (all `quantize` needs) and labelled data whose
    labels are the fp32 predictions, so fp32 accuracy is 100% by construction."""
    run = tmp_path_factory.mktemp("run")
    shutil.copy(classifier_onnx, run / "model.onnx")
    probs, _ = Classifier(str(run / "model.onnx")).predict_proba(TEXTS)
    data = run / "labelled.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": int(y)}) + "\n" for t, y in zip(TEXTS, probs.argmax(1))))
    return run


def _argv(run, **kw):
    """`tfm-cls quantize` arguments: --run RUN --data RUN/labelled.jsonl, then --key value for each kw."""
    options = {"data": str(run / "labelled.jsonl"), "batch_size": 16, **kw}
    argv = ["quantize", "--run", str(run)]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def test_quantize_keeps_metadata_and_reports_accuracy(run_dir):
    out = run_dir / "model.int8.onnx"
    report = quantize.quantize_and_evaluate(run_dir / "model.onnx", run_dir / "labelled.jsonl", out, threshold=100)
    assert report.accepted and out.is_file()
    assert report.accuracy_fp32 == 1.0 and report.examples == len(TEXTS)
    # Accuracy of int8 is its agreement with fp32 here; recompute it independently.
    int8_pred = Classifier(str(out)).predict_proba(TEXTS)[0].argmax(1)
    fp32_pred = Classifier(str(run_dir / "model.onnx")).predict_proba(TEXTS)[0].argmax(1)
    assert report.accuracy_int8 == pytest.approx(float((int8_pred == fp32_pred).mean()))
    assert report.drop_points == pytest.approx(100 * (1 - report.accuracy_int8), abs=1e-3)

    src = {p.key: p.value for p in onnx.load(str(run_dir / "model.onnx")).metadata_props}
    dst = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert {k: dst[k] for k in src} == src
    assert json.loads(dst["tfm_cls.quantization"])["weights"] == "int8"
    ops = {n.op_type for n in onnx.load(str(out)).graph.node}
    assert ops & {"MatMulInteger", "DynamicQuantizeMatMul"}
    assert json.loads((run_dir / "model.int8.quantization.json").read_text())["accepted"] is True


def _sabotaging_quantizer(force_class: int):
    """A stand-in for quantize_model that writes a model always predicting `force_class`."""

    def fake(fp32_path, int8_path, per_channel=False, embeddings=False):
        model = onnx.load(str(fp32_path))
        init = next(i for i in model.graph.initializer if i.name.endswith("head.bias"))
        bias = np.zeros(len(LABELS), dtype=np.float32)
        bias[force_class] = 1e4
        init.CopyFrom(numpy_helper.from_array(bias, init.name))
        onnx.save(model, str(int8_path))
        return int8_path

    return fake


def test_gate_refuses_a_drop_above_threshold(run_dir, monkeypatch, capsys):
    labels = [json.loads(line)["label"] for line in (run_dir / "labelled.jsonl").read_text().splitlines()]
    minority = min(range(len(LABELS)), key=labels.count)  # forcing it loses every other example
    monkeypatch.setattr(quantize, "quantize_model", _sabotaging_quantizer(minority))
    out = run_dir / "refused.int8.onnx"
    assert main(_argv(run_dir, output=str(out))) == 1
    assert not out.exists() and not (run_dir / "refused.int8.onnx.candidate").exists()
    printed = capsys.readouterr().out
    expected_drop = 100 * (1 - labels.count(minority) / len(labels))
    assert "REFUSED" in printed and f"{-expected_drop:+.2f} points" in printed
    # the same drop passes a threshold above it
    out.unlink(missing_ok=True)
    assert main(_argv(run_dir, output=str(out), threshold=expected_drop + 0.01)) == 0
    assert out.exists()


def test_cli_gate_follows_the_threshold_with_the_real_int8_quantizer(run_dir, capsys):
    # fp32 is 100% accurate on these labels by construction, so int8 cannot gain: any drop passes
    # a threshold of 100 points, and no model passes a threshold below zero.
    out = run_dir / "cli.int8.onnx"
    assert main(_argv(run_dir, output=str(out), threshold=100)) == 0
    assert out.is_file()
    out.unlink()
    assert main(_argv(run_dir, output=str(out), threshold=-0.01)) == 1
    assert not out.exists()
    assert "rejected" in capsys.readouterr().err


def test_bad_labelled_data_is_named(run_dir, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a", "label": 0}\n{"text": "b", "label": "delta"}\n')
    assert main(_argv(run_dir, data=str(bad), output=str(tmp_path / "x.onnx"))) == 2
    assert f"{bad}:2: label 'delta' is neither an index in [0, 3) nor one of" in capsys.readouterr().err


def test_missing_model_says_to_export_first(tmp_path, capsys):
    (tmp_path / "d.jsonl").write_text('{"text": "a", "label": 0}\n')
    assert main(_argv(tmp_path, data=str(tmp_path / "d.jsonl"))) == 2
    assert "tfm-cls export" in capsys.readouterr().err


def test_int8_embedding_tables_are_per_row_and_make_a_smaller_file(run_dir, tmp_path):
    fp32_path = run_dir / "model.onnx"
    plain = quantize.quantize_model(fp32_path, tmp_path / "plain.int8.onnx", per_channel=True)
    small = quantize.quantize_model(fp32_path, tmp_path / "small.int8.onnx", per_channel=True, embeddings=True)
    source = onnx.load(str(fp32_path))
    tables = {t.name: numpy_helper.to_array(t) for t in quantize._embedding_tables(source.graph)}
    assert any(t.shape[0] >= 100 for t in tables.values())  # the token embedding [vocab, d] is among them
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(small)).graph.initializer}
    saved = 0
    for name, table in tables.items():
        rows, scale = inits[f"{name}_int8"], inits[f"{name}_row_scale"]  # [V, D] int8, [V, 1]
        assert rows.dtype == np.int8 and name not in inits
        assert np.all(np.abs(rows.astype(np.float32) * scale - table) <= scale / 2 + 1e-7)  # round to the nearest step
        used = np.abs(table).max(axis=1) > 0  # the padding row is all zeros, and stays so
        assert np.all(np.abs(rows[used]).max(axis=1) == 127) and not rows[~used].any()  # each row uses its whole range
        saved += table.size * 3 - scale.size * 4
    assert plain.stat().st_size - small.stat().st_size >= 0.9 * saved  # 3 of every 4 bytes of each table
    meta = {p.key: p.value for p in onnx.load(str(small)).metadata_props}
    assert json.loads(meta["tfm_cls.quantization"])["embeddings"] == "int8 per-row"
    fp32_probs = Classifier(str(fp32_path)).predict_proba(TEXTS)[0]
    small_probs = Classifier(str(small)).predict_proba(TEXTS)[0]
    plain_probs = Classifier(str(plain)).predict_proba(TEXTS)[0]
    assert np.mean(small_probs.argmax(1) == fp32_probs.argmax(1)) >= 0.95
    # the tables' rounding adds little to the int8 weights' own error
    assert np.abs(small_probs - fp32_probs).max() < 0.05 + 2 * np.abs(plain_probs - fp32_probs).max()


def test_the_gate_keeps_int8_tables_or_falls_back_to_fp32_ones(run_dir, monkeypatch):
    out = run_dir / "tables.int8.onnx"
    report = quantize.quantize_and_evaluate(run_dir / "model.onnx", run_dir / "labelled.jsonl", out, threshold=100)
    assert report.accepted and report.embeddings == "int8" and not report.embeddings_note
    assert "embeddings int8" in str(report)
    real = quantize.quantize_model
    labels = [json.loads(line)["label"] for line in (run_dir / "labelled.jsonl").read_text().splitlines()]
    minority = min(range(len(LABELS)), key=labels.count)

    def tables_break_it(fp32_path, int8_path, per_channel=False, embeddings=False):
        if embeddings:  # int8 tables that cost accuracy: the gate must try fp32 ones
            return _sabotaging_quantizer(minority)(fp32_path, int8_path)
        return real(fp32_path, int8_path, per_channel)

    monkeypatch.setattr(quantize, "quantize_model", tables_break_it)
    report = quantize.quantize_and_evaluate(run_dir / "model.onnx", run_dir / "labelled.jsonl", out, threshold=5)
    assert report.accepted and report.embeddings == "fp32"
    assert report.embeddings_note.startswith("int8 tables dropped accuracy")
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert json.loads(meta["tfm_cls.quantization"])["embeddings"] == "fp32"
