"""`tfm-cls export --run RUN --web DIR` on a run directory (the files `tfm-cls train` leaves, built
here without training): the folder holds the page, the bundle, ort's wasm and the run's model;
the int8 file is chosen where `tfm-cls quantize` accepted it for the same weights."""

from __future__ import annotations

import json

import pytest
from kits.export_testkit import LABELS, MAX_LENGTH, tiny_classifier

from tfm_cls.cli import main
from tfm_cls.config import ClassifierConfig, TokenizerConfig, save_config
from tfm_cls.data.tokenizer import save_tokenizer, train_tokenizer
from tfm_cls.errors import InferenceError
from tfm_cls.io import write_json
from tfm_cls.web_export import BUNDLE_FILES, ENV_DIST, bundle_dir, web_model
from tfm_cls.weights import save_weights


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from kits.export_testkit import TEXTS

    run = tmp_path_factory.mktemp("web_run")
    tokenizer = train_tokenizer(TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=MAX_LENGTH))
    classifier = tiny_classifier(vocab_size=tokenizer.get_vocab_size())
    save_config(ClassifierConfig(name="tiny", tokenizer=TokenizerConfig(max_length=MAX_LENGTH)), run / "config.yaml")
    write_json(run / "model_config.json", classifier.config)
    write_json(run / "labels.json", LABELS)
    save_tokenizer(tokenizer, run / "tokenizer.json")
    save_weights(classifier, run / "model.safetensors")
    return run


def test_export_web_writes_the_folder(run_dir, web_dist, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_DIST, str(web_dist))
    site = tmp_path / "site"
    assert main(["export", "--run", str(run_dir), "--web", str(site), "--no-verify"]) == 0
    assert {p.name for p in site.iterdir()} == {*BUNDLE_FILES, "model.onnx", "SERVING.txt"}
    assert (site / "model.onnx").read_bytes() == (run_dir / "model.onnx").read_bytes()

    # A gated int8 file of the same weights is what the page gets; a rejected one is not.
    from tfm_cls.export.quantize import quantize_model

    int8 = quantize_model(run_dir / "model.onnx", run_dir / "model.int8.onnx")
    report = run_dir / "model.int8.quantization.json"
    report.write_text(json.dumps({"accepted": True}), encoding="utf-8")
    assert web_model(run_dir, run_dir / "model.onnx") == int8
    report.write_text(json.dumps({"accepted": False}), encoding="utf-8")
    assert web_model(run_dir, run_dir / "model.onnx") == run_dir / "model.onnx"


def test_an_unbuilt_bundle_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_DIST, str(tmp_path))
    with pytest.raises(InferenceError, match="make web-install"):
        bundle_dir()
