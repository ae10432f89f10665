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


def one_error(capsys, says: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err
    return err


def test_export_web_refusals_come_before_any_export(run_dir, web_dist, tmp_path, monkeypatch, capsys):
    """--web onto a file, or onto the run itself: one error line, exit 2, the run's model.onnx not
    exported again and the file as it was."""
    monkeypatch.setenv(ENV_DIST, str(web_dist))
    model = run_dir / "model.onnx"
    if not model.exists():
        assert main(["export", "--run", str(run_dir), "--no-verify"]) == 0
    before = (model.stat().st_mtime_ns, model.read_bytes())
    taken = tmp_path / "page.html"
    taken.write_text("mine")
    capsys.readouterr()
    assert main(["export", "--run", str(run_dir), "--web", str(taken), "--no-verify", "--fuse"]) == 2
    one_error(capsys, "is a file, not a folder")
    assert taken.read_text() == "mine"
    assert main(["export", "--run", str(run_dir), "--web", str(run_dir), "--no-verify", "--fuse"]) == 2
    one_error(capsys, "is the run folder")
    assert main(["export", "--run", str(run_dir), "--web", str(run_dir / ".." / run_dir.name), "--no-verify"]) == 2
    one_error(capsys, "is the run folder")
    monkeypatch.setenv(ENV_DIST, str(tmp_path / "nothing"))
    assert main(["export", "--run", str(run_dir), "--web", str(tmp_path / "site"), "--no-verify", "--fuse"]) == 2
    one_error(capsys, "the browser runtime is not built")
    assert (model.stat().st_mtime_ns, model.read_bytes()) == before and not (tmp_path / "site").exists()


def test_web_command_and_export_web_from_a_current_export_need_no_torch(run_dir, web_dist, tmp_path):
    """`tfm-cls web MODEL DIR` and `export --run RUN --web DIR` where RUN/model.onnx is the export of
    the run's weights as they are: both write the page in a process where torch cannot be imported."""
    import subprocess
    import sys

    from kits.import_guard import guarded_env

    model = run_dir / "model.onnx"
    if not model.exists():
        assert main(["export", "--run", str(run_dir), "--no-verify"]) == 0
    before = model.stat().st_mtime_ns
    env = {**guarded_env(tmp_path, "torch"), ENV_DIST: str(web_dist)}
    for argv, site in ((["web", str(model)], tmp_path / "a"), (["export", "--run", str(run_dir), "--web"], tmp_path / "b")):
        proc = subprocess.run([sys.executable, "-m", "tfm_cls.cli", *argv, str(site)], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert {p.name for p in site.iterdir()} == {*BUNDLE_FILES, "model.onnx", "SERVING.txt"}
        assert (site / "model.onnx").read_bytes() == model.read_bytes()
    assert "no export again" in proc.stderr and model.stat().st_mtime_ns == before


def test_web_command_refusals(run_dir, web_dist, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_DIST, str(web_dist))
    model = run_dir / "model.onnx"
    if not model.exists():
        assert main(["export", "--run", str(run_dir), "--no-verify"]) == 0
    site = tmp_path / "site"
    site.mkdir()
    (site / "model.onnx").write_bytes(model.read_bytes())
    before = (site / "model.onnx").read_bytes()
    capsys.readouterr()
    assert main(["web", str(site / "model.onnx"), str(site)]) == 2  # the page's model.onnx is the model itself
    one_error(capsys, "is the model")
    assert main(["web", str(site / ".." / "site" / "model.onnx"), str(site)]) == 2
    one_error(capsys, "is the model")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a protobuf")
    assert main(["web", str(garbage), str(tmp_path / "g")]) == 2
    one_error(capsys, "is not a readable ONNX model")
    assert main(["web", str(tmp_path / "missing.onnx"), str(tmp_path / "m")]) == 2
    one_error(capsys, "not found")
    assert sorted(p.name for p in site.iterdir()) == ["model.onnx"] and (site / "model.onnx").read_bytes() == before
    assert not (tmp_path / "g").exists() and not (tmp_path / "m").exists()
