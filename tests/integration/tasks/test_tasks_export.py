"""ONNX for every head: export, the one verify (shapes other than the export shapes), metadata,
the standalone inference script (pairs from JSONL fields and TSV columns, rows in input order),
and the int8 gate on the task's own metric."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from kits import tasks_tiny as T
from tfm_cls.export import infer
from tfm_cls.export.exporter import export_run
from tfm_cls.export.quantize import quantize_and_evaluate
from tfm_cls.export.verify import verify

from tfm_cls import runs as R
from tfm_cls.classify.predict import run_head, texts_logits
from tfm_cls.runtime.heads import sigmoid, softmax


@pytest.fixture(scope="session")
def exported(ml_run, pair_run, reg_run):
    """{name: (run dir, model.onnx)} for the multi-label, pair and regression runs."""
    return {name: (run, export_run(run)) for name, (run, _) in
            (("multi_label", ml_run), ("pair", pair_run), ("regression", reg_run))}


@pytest.mark.parametrize("name", ["multi_label", "pair", "regression"])
def test_every_head_verifies_against_torch(exported, name):
    run, path = exported[name]
    report = verify(R.load_run(run).model, path)
    assert report.ok and report.worst_diff < 1e-4
    assert any(c.name == "output shapes (CPU)" and c.status == "ok" for c in report.checks)


def test_graph_inputs_outputs_and_metadata_follow_the_task(exported):
    inputs = {name: [i.name for i in ort.InferenceSession(str(p)).get_inputs()] for name, (_, p) in exported.items()}
    assert inputs["multi_label"] == ["input_ids", "attention_mask"]
    assert inputs["pair"] == inputs["regression"] == ["input_ids", "attention_mask", "token_type_ids"]
    run, path = exported["multi_label"]
    meta = ort.InferenceSession(str(path)).get_modelmeta().custom_metadata_map
    assert meta["tfm_cls.task"] == "multi-label-classification" and meta["tfm_cls.head"] == "multi_label"
    assert json.loads(meta["tfm_cls.labels"]) == T.TOPICS
    saved = json.loads((run / R.THRESHOLDS_FILE).read_text())
    assert json.loads(meta["tfm_cls.thresholds"]) == pytest.approx(list(saved.values()))
    _, path = exported["regression"]
    session = ort.InferenceSession(str(path))
    assert [o.name for o in session.get_outputs()] == ["logits", "value"]
    assert session.get_modelmeta().custom_metadata_map["tfm_cls.task"] == "text-regression-pair"


def test_the_onnx_graph_uses_the_token_types(exported):
    run, path = exported["pair"]
    loaded = R.load_run(run)
    enc = loaded.tokenizer.encode("cat dog", "soup rice")
    feeds = {"input_ids": np.array([enc.ids]), "attention_mask": np.ones((1, len(enc.ids)), np.int64),
             "token_type_ids": np.array([enc.type_ids])}
    session = ort.InferenceSession(str(path))
    real = session.run(["logits"], feeds)[0]
    zeros = session.run(["logits"], {**feeds, "token_type_ids": np.zeros_like(feeds["token_type_ids"])})[0]
    assert not np.allclose(real, zeros)
    assert np.allclose(real, texts_logits(loaded, ["cat dog"], ["soup rice"])[0], atol=1e-4)


def _standalone(tmp_path: Path) -> Path:
    """export/infer.py, the command line over the torch-free runtime, run as a script."""
    return Path(infer.__file__)


def _infer(script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args, "--no-progress"], capture_output=True, text=True,
                          timeout=120)


def test_infer_pairs_from_jsonl_fields_and_tsv_columns_in_input_order(exported, tmp_path):
    run, path = exported["regression"]
    pairs = [("cat dog fish", "dog cat"), ("golf", "bread soup"), ("tennis chess golf rugby", "golf"), ("rice", "rice")]
    T.write_jsonl(tmp_path / "in.jsonl", [{"id": f"r{i}", "a": a, "b": b} for i, (a, b) in enumerate(pairs)])
    with open(tmp_path / "in.tsv", "w", newline="") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(["a", "b"])
        writer.writerows(pairs)
    script = _standalone(tmp_path)
    expected = texts_logits(R.load_run(run), [a for a, _ in pairs], [b for _, b in pairs])[0][:, 0]
    for source, ids in (("in.jsonl", [f"r{i}" for i in range(4)]), ("in.tsv", ["1", "2", "3", "4"])):
        out = tmp_path / f"{source}.out.jsonl"
        proc = _infer(script, "--model", str(path), "--input", str(tmp_path / source), "--text-field", "a",
                      "--pair-field", "b", "--batch-size", "2", "--chunk-batches", "1", "--output", str(out))
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["id"] for r in rows] == ids
        assert [r["value"] for r in rows] == pytest.approx(expected.tolist(), abs=1e-4)


def test_infer_multi_label_rows_list_every_label_over_its_threshold(exported, tmp_path):
    run, path = exported["multi_label"]
    texts = ["golf tennis", "cat and bread", "soup", "chess with a tiger and some rice"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    proc = _infer(_standalone(tmp_path), "--model", str(path), "--input", str(tmp_path / "in.txt"))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    loaded = R.load_run(run)
    probs = sigmoid(texts_logits(loaded, texts)[0])
    thresholds = np.array(loaded.thresholds)
    for row, p in zip(rows, probs):
        over = [T.TOPICS[j] for j in np.argsort(-p) if p[j] >= thresholds[j]] or [T.TOPICS[int(p.argmax())]]
        assert row["labels"] == over
        assert row["scores"] == pytest.approx([p[T.TOPICS.index(n)] for n in over], abs=1e-4)
    head = run_head(loaded)
    scores = head.scores(np.log(probs / (1 - probs)))
    assert head.fields(scores[1], head.decide(scores)[1], loaded.labels)["labels"] == rows[1]["labels"]


def test_infer_single_label_pairs_match_torch(exported, tmp_path):
    run, path = exported["pair"]
    T.write_jsonl(tmp_path / "in.jsonl", [{"text": "cat", "text_pair": "dog"}, {"text": "golf", "text_pair": "rice"}])
    proc = _infer(_standalone(tmp_path), "--model", str(path), "--input", str(tmp_path / "in.jsonl"))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    loaded = R.load_run(run)  # a calibrated single-label run: softmax(logits / T), as `infer` gives
    probs = softmax(texts_logits(loaded, ["cat", "golf"], ["dog", "rice"])[0] / loaded.temperature)
    assert np.allclose([list(r["probabilities"].values()) for r in rows], probs, atol=1e-4)


def test_infer_pair_row_missing_its_second_text_names_file_and_line(exported, tmp_path):
    _, path = exported["pair"]
    T.write_jsonl(tmp_path / "in.jsonl", [{"text": "cat", "text_pair": "dog"}, {"text": "golf"}])
    proc = _infer(_standalone(tmp_path), "--model", str(path), "--input", str(tmp_path / "in.jsonl"))
    assert proc.returncode == 2 and f"{tmp_path / 'in.jsonl'}, line 2: the pair's second text 'text_pair' is missing" in proc.stderr
    (tmp_path / "in.txt").write_text("cat\n")
    proc = _infer(_standalone(tmp_path), "--model", str(path), "--input", str(tmp_path / "in.txt"))
    assert proc.returncode == 2 and "sentence pairs need jsonl, csv or tsv input" in proc.stderr


def test_infer_refuses_long_text_options_a_pair_or_regression_model_cannot_take(exported, tmp_path):
    """Long documents merged with tasks: a pair keeps longest_first truncation; windows are for single-label."""
    T.write_jsonl(tmp_path / "in.jsonl", [{"text": "cat", "text_pair": "dog"}])
    script = _standalone(tmp_path)
    for name, flags, message in (("pair", ["--chunk"], "classifies sentence pairs"),
                                 ("pair", ["--truncation", "tail"], "classifies sentence pairs"),
                                 ("multi_label", ["--chunk"], "--chunk applies to single-label models")):
        proc = _infer(script, "--model", str(exported[name][1]), "--input", str(tmp_path / "in.jsonl"), *flags)
        assert proc.returncode == 2 and message in proc.stderr, (name, flags, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name, label_field, metric", [("multi_label", "labels", "micro_f1"),
                                                        ("regression", "score", "pearson"),
                                                        ("pair", "label", "accuracy")])
def test_int8_gate_uses_the_tasks_own_metric(exported, ml_data, pair_data, tmp_path, name, label_field, metric):
    _, path = exported[name]
    data = (ml_data if name == "multi_label" else pair_data) / "test.jsonl"
    fields = {} if name == "multi_label" else {"text_field": "first", "pair_field": "second"}
    report = quantize_and_evaluate(path, data, tmp_path / "m.int8.onnx", threshold=100.0, label_field=label_field, **fields)
    assert report.metric == metric and report.accepted and report.examples == 45
    assert report.drop_points == pytest.approx(100 * (report.accuracy_fp32 - report.accuracy_int8), abs=1e-3)
    if name == "multi_label":
        assert report.accuracy_fp32 > 0.85  # the fp32 file's micro-F1 at its own thresholds
    strict = quantize_and_evaluate(path, data, tmp_path / "s.int8.onnx", threshold=-1.0, label_field=label_field, **fields)
    assert not strict.accepted and not (tmp_path / "s.int8.onnx").exists()


def test_int8_gate_data_with_invalid_utf8_names_the_line(exported, ml_data, tmp_path):
    from tfm_cls.errors import QuantizeError

    bad = tmp_path / "bad.jsonl"
    lines = (ml_data / "test.jsonl").read_bytes().splitlines(keepends=True)
    bad.write_bytes(b"".join(lines[:2]) + b'{"text": "caf\xe9", "labels": [0]}\n' + b"".join(lines[2:]))
    with pytest.raises(QuantizeError, match=r"bad.jsonl, line 3: invalid UTF-8"):
        quantize_and_evaluate(exported["multi_label"][1], bad, tmp_path / "m.int8.onnx", threshold=100.0,
                              label_field="labels")
    assert not (tmp_path / "m.int8.onnx").exists()
