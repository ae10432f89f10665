"""`tfm-cls` as a whole: --help / --version load nothing heavy, and one error convention
(bad input: exit 2 and one `error: ` line naming what was wrong; internal failure: exit 1, one
line pointing at -v; with -v the traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tfm_cls import __version__, cli

HEAVY = ("torch", "matplotlib", "safetensors", "datasets", "onnxruntime", "sklearn", "transformers")

# Runs tfm_cls.cli.main with the given arguments, then reports its exit code and which heavy
# modules it imported.
_PROBE = """
import json, sys
from tfm_cls.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
heavy = [m for m in {heavy!r} if m in sys.modules]
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def run_cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tfm_cls.cli", *argv], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def probe(*argv: str, cwd: Path) -> tuple[dict, str]:
    """(exit code and heavy modules loaded, stdout) of `tfm-cls ARGV` in a fresh interpreter."""
    code = _PROBE.format(heavy=HEAVY)
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True, timeout=120)
    return json.loads(proc.stderr.strip().splitlines()[-1]), proc.stdout


@pytest.mark.parametrize("argv", [["--help"], ["--version"]], ids=["help", "version"])
def test_help_and_version_exit_0(argv, tmp_path):
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (f"tfm-cls {__version__}" in proc.stdout) if argv == ["--version"] else ("usage: tfm-cls" in proc.stdout)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"]]
    + [[command, "--help"] for command in ("train", "pretrain", "tune", "distill", "compress", "eval", "report", "predict",
                                           "export", "verify-onnx", "quantize", "infer", "batch", "serve")],
    ids=lambda a: "-".join(a).strip("-"),
)
def test_help_and_version_import_nothing_heavy(argv, tmp_path):
    report, stdout = probe(*argv, cwd=tmp_path)
    assert report["code"] == 0 and stdout
    assert report["heavy"] == [], f"`tfm-cls {' '.join(argv)}` imported {report['heavy']}"


# ---- bad input: exit 2, one line ------------------------------------------------------------------


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_an_unknown_config_key_names_the_key_and_the_file(tmp_path):
    bad = tmp_path / "exp.yaml"
    bad.write_text("name: exp\ntrain:\n  learning_rate: 0.1\n")
    line = _one_error_line(run_cli("train", "--config", str(bad), cwd=tmp_path))
    assert str(bad) in line and "'learning_rate'" in line and "valid keys" in line


def test_an_unknown_override_key_is_named(tmp_path):
    line = _one_error_line(run_cli("train", "--config", "trec", "train.learning_rate=0.1", cwd=tmp_path))
    assert "train.learning_rate=0.1" in line and "unknown key 'learning_rate' under train" in line


def _presets(folder: str) -> str:
    return ", ".join(sorted(p.stem for p in (Path(__file__).resolve().parents[3] / "configs" / folder).glob("*.yaml")))


def test_an_unknown_preset_lists_the_presets(tmp_path, capsys):
    line = _one_error_line(run_cli("train", "--config", "no-such-preset", cwd=tmp_path))
    assert "no-such-preset" in line and "no preset has that name" in line
    assert line.endswith("presets: " + _presets("cls"))
    # pretrain imports torch before reading its config: in-process, so as not to pay for it again
    assert cli.main(["pretrain", "--config", "no-such-preset"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.rstrip("\n").endswith("presets: " + _presets("pretrain"))


def test_a_bad_override_value_names_the_key(tmp_path):
    line = _one_error_line(run_cli("train", "--config", "trec", "train.lr=fast", cwd=tmp_path))
    # the override is to blame, not the YAML file (issue 13, item 10)
    assert "train.lr: expected a number, got 'fast'" in line and "command line train.lr=fast" in line
    assert "trec.yaml" not in line


# ---- internal failure: exit 1, one line; -v shows the traceback ---------------------------------------


@pytest.fixture
def broken_predict(monkeypatch):
    def boom(args):
        raise RuntimeError("the GPU caught fire")

    monkeypatch.setattr(cli.predict, "run", boom)


def test_an_internal_failure_is_exit_1_and_one_line(broken_predict, capsys):
    assert cli.main(["predict", "--run", "somewhere"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: internal failure: RuntimeError: the GPU caught fire")
    assert "-v" in err


def test_verbose_lets_the_exception_through(broken_predict):
    with pytest.raises(RuntimeError, match="the GPU caught fire"):
        cli.main(["-v", "predict", "--run", "somewhere"])


def test_a_user_error_is_exit_2_even_with_verbose(monkeypatch, capsys):
    from tfm_cls.errors import RunDirError

    def refuse(args):
        raise RunDirError("runs/x has no model.safetensors; train it first")

    monkeypatch.setattr(cli.predict, "run", refuse)
    assert cli.main(["-v", "predict", "--run", "runs/x"]) == 2
    assert capsys.readouterr().err == "error: runs/x has no model.safetensors; train it first\n"


def test_the_inference_scripts_own_error_is_bad_input_too(tmp_path, capsys):
    """export/infer.py raises its own InferenceError (it imports nothing of tfm_cls); through
    `tfm-cls quantize`, which reads models with its Classifier, that is exit 2 and one line."""
    garbage, data = tmp_path / "model.onnx", tmp_path / "labelled.jsonl"
    garbage.write_bytes(b"not a protobuf")
    data.write_text(json.dumps({"text": "a text", "label": 0}) + "\n")
    assert cli.main(["quantize", "--run", str(tmp_path), "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {garbage} is not a readable ONNX model")
