"""tfm_cls/cli/: every command module registers its subparser the same way, the size flags of every
command go through the one check (one `error:` line, exit 2, before any work), and building the
parser imports nothing an install without the training extra lacks."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from tfm_cls import cli
from tfm_cls.cli import arguments, entry

# The required arguments of each command with size flags; the paths do not exist, so a check
# that came after the work would fail on them instead.
REQUIRED = {
    "eval": ["--run", "no-such-run"],
    "predict": ["--run", "no-such-run"],
    "quantize": ["--run", "no-such-run", "--data", "no-such.jsonl"],
    "infer": ["--model", "no-such.onnx"],
    "batch": ["--model", "no-such.onnx", "--input", "no-such.jsonl", "--output", "no-such-folder"],
}
STREAMING = ("predict", "infer", "batch")  # the ones with --max-tokens and --buffer-texts too


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def test_every_command_module_registers_one_subparser_that_runs_its_run():
    commands = _subparsers(cli.build_parser())
    assert list(commands) == ["train", "pretrain", "tune", "distill", "compress", "eval", "report", "predict",
                              "export", "verify-onnx", "quantize", "infer", "batch", "serve", "suggest", "label", "web"]
    for module in entry.COMMANDS:
        name = module.__name__.rsplit(".", 1)[1].replace("_", "-")
        assert commands[name].get_default("func") is module.run, name
        assert commands[name].prog == f"tfm-cls {name}"
        # one parser style: no argument forwarded to a parser of its own
        assert all(a.nargs != argparse.REMAINDER for a in commands[name]._actions), name


@pytest.mark.parametrize("command", sorted(REQUIRED))
def test_a_batch_size_of_0_is_one_line_and_exit_2_before_any_work(command, capsys):
    assert cli.main([command, *REQUIRED[command], "--batch-size", "0"]) == 2
    assert capsys.readouterr().err == "error: --batch-size: expected a positive integer, got 0\n"


@pytest.mark.parametrize("command", STREAMING)
@pytest.mark.parametrize("flag", ["--max-tokens", "--buffer-texts"])
def test_the_streaming_size_flags_get_the_same_check(command, flag, capsys):
    assert cli.main([command, *REQUIRED[command], flag, "0"]) == 2
    assert capsys.readouterr().err == f"error: {flag}: expected a positive integer, got 0\n"


def test_every_bad_size_flag_is_named_in_the_one_line(capsys):
    assert cli.main(["infer", *REQUIRED["infer"], "--batch-size", "-3", "--chunk-batches", "0", "--threads", "-1"]) == 2
    assert capsys.readouterr().err == ("error: --batch-size: expected a positive integer, got -3; "
                                       "--chunk-batches: expected a positive integer, got 0; "
                                       "--threads: expected 0 or more, got -1\n")
    assert cli.main(["predict", *REQUIRED["predict"], "--threads", "-2"]) == 2
    assert capsys.readouterr().err == "error: --threads: expected 0 or more, got -2\n"


def test_batch_raises_the_minimum_of_threads_and_checks_its_cluster_flags(capsys):
    assert cli.main(["batch", *REQUIRED["batch"], "--threads", "0", "--concurrency", "0", "--max-restarts", "-1"]) == 2
    assert capsys.readouterr().err == ("error: --concurrency: expected a positive integer, got 0; "
                                       "--threads: expected a positive integer, got 0; "
                                       "--max-restarts: expected 0 or more, got -1\n")


def test_the_size_check_skips_flags_a_command_does_not_have():
    arguments.check_sizes(argparse.Namespace(batch_size=1, chunk_batches=None))  # no error
    with pytest.raises(ValueError, match=r"^--max-restarts: expected 2 or more, got 1$"):
        arguments.check_sizes(argparse.Namespace(max_restarts=1), max_restarts=2)


def test_the_inference_flags_are_the_same_in_every_command():
    commands = _subparsers(cli.build_parser())
    shared = _options(commands["infer"])
    inference = ["--batching", "--max-tokens", "--batch-size", "--buffer-texts", "--threads", "--max-length",
                 "--truncation", "--head-fraction", "--chunk", "--no-chunk", "--stride", "--aggregate",
                 "--aggregate-scores"]
    for name in ("predict", "batch"):
        ours = _options(commands[name])
        for flag in inference:
            assert ours[flag].choices == shared[flag].choices and ours[flag].type == shared[flag].type, (name, flag)
            assert type(ours[flag]) is type(shared[flag]), (name, flag)  # the defaults differ by engine


def test_the_script_export_infer_has_the_flags_of_tfm_cls_infer():
    from tfm_cls.export import infer as script

    command = _options(_subparsers(cli.build_parser())["infer"])
    ours = _options(script.build_parser())
    assert ours.keys() == command.keys()
    for flag, action in command.items():
        assert (ours[flag].dest, ours[flag].default, ours[flag].help) == (action.dest, action.default, action.help)


def test_building_the_parser_imports_only_what_the_base_install_holds():
    """`tfm-cls infer` runs on the base install (onnxruntime, tokenizers, numpy, tqdm): the command
    modules may import nothing of an extra at the top, nor onnxruntime (every --help is quick)."""
    code = ("import json, sys\nimport tfm_cls.cli\ntfm_cls.cli.build_parser()\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    extras = {"torch", "datasets", "sklearn", "scipy", "safetensors", "matplotlib", "onnx", "yaml", "starlette",
              "uvicorn", "prometheus_client", "ray", "pyarrow", "pandas", "onnxruntime"}
    assert loaded & extras == set()
