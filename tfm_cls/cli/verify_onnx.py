"""`tfm-cls verify-onnx`: check an exported .onnx file against its run's PyTorch model (the one
verifier, tfm_cls.export.verify)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tfm_cls.cli.arguments import providers
from tfm_cls.cli.shared import check_onnx


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("verify-onnx", help="check RUN/model.onnx against the run's PyTorch model")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--model", help="ONNX file (default RUN/model.onnx)")
    p.add_argument("--providers", help="comma-separated providers (default: CPU, plus CUDA if present)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.errors import RunDirError
    from tfm_cls.runs import WEIGHTS_FILE, load_run

    path = Path(args.model) if args.model else Path(args.run) / "model.onnx"
    if not path.is_file():
        raise RunDirError(f"{path} not found; export it first: tfm-cls export --run {args.run}")
    check_onnx(load_run(args.run).model, path, providers(args.providers), path, Path(args.run) / WEIGHTS_FILE)
    return 0
