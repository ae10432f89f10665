"""The temperature in the ONNX file: `tfm-cls infer` (the runtime's Classifier, which the
service builds on) gives the PyTorch model's calibrated scores; an export without the key (an
uncalibrated run's, or one made before calibration existed) reads as temperature 1."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from tfm_cls.classify.predict import classify_texts, run_policy, texts_logits
from tfm_cls.cli import main
from tfm_cls.errors import InferenceError
from tfm_cls.runs import load_run
from tfm_cls.runtime.heads import softmax
from tfm_cls.runtime.metadata import FIELD_KEYS
from tfm_cls.runtime.session import Classifier

KEY = FIELD_KEYS["temperature"]


def _texts(data):
    return [json.loads(line)["text"] for line in (data / "test.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def exported(runs):
    for run in runs.values():
        assert main(["export", "--run", str(run)]) == 0
    return {name: run / "model.onnx" for name, run in runs.items()}


def _props(path):
    return {p.key: p.value for p in onnx.load(str(path)).metadata_props}


def test_onnx_scores_are_the_calibrated_pytorch_scores(runs, exported, noisy, tmp_path):
    run = load_run(runs["calibrated"])
    assert float(_props(exported["calibrated"])[KEY]) == run.temperature != 1.0
    texts = _texts(noisy)
    torch_scores, _, _ = classify_texts(run, texts)
    clf = Classifier(str(exported["calibrated"]))
    assert clf.head.temperature == run.temperature
    onnx_scores, _ = clf.predict_proba(texts)
    np.testing.assert_allclose(onnx_scores, torch_scores, atol=1e-5)
    # the logits path (a graph read for its logits, and chunked inference) applies it too
    chunked = Classifier(str(exported["calibrated"]), long_text={"chunk": True})
    windows, _, counts = classify_texts(run, texts, policy=run_policy(run, chunk=True))
    assert max(counts) > 1  # some texts are longer than max_length: their windows' logits are aggregated
    np.testing.assert_allclose(chunked.predict_proba(texts)[0], windows, atol=1e-5)
    # and the command line: tfm-cls infer rows == tfm-cls predict rows (6 decimals)
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    assert main(["infer", "--model", str(exported["calibrated"]), "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "onnx.jsonl")]) == 0
    assert main(["predict", "--run", str(runs["calibrated"]), "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "torch.jsonl")]) == 0
    rows = [[json.loads(line) for line in (tmp_path / f"{k}.jsonl").read_text().splitlines()] for k in ("onnx", "torch")]
    for a, b in zip(*rows):
        assert a["label"] == b["label"]
        assert max(abs(a["probabilities"][k] - b["probabilities"][k]) for k in a["probabilities"]) <= 2e-6


def test_an_export_without_the_key_reads_as_temperature_one(runs, exported, noisy):
    assert KEY not in _props(exported["raw"])  # what every export before calibration looks like
    clf = Classifier(str(exported["raw"]))
    assert clf.head.temperature == 1.0
    texts = _texts(noisy)
    logits, _, _ = texts_logits(load_run(runs["raw"]), texts)
    np.testing.assert_allclose(clf.predict_proba(texts)[0], softmax(logits), atol=1e-5)


def test_a_bad_temperature_in_the_file_is_one_inference_error(exported, tmp_path):
    model = onnx.load(str(exported["calibrated"]))
    for prop in model.metadata_props:
        if prop.key == KEY:
            prop.value = "-2"
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    with pytest.raises(InferenceError, match="tfm_cls.temperature.*positive number"):
        Classifier(str(path))
