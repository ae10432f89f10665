"""`tfm-cls export`: a trained run's classifier to one .onnx file (RUN/model.onnx), verified against
the PyTorch model before it replaces the target (tfm_cls.export.exporter, tfm_cls.export.verify)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from tfm_cls.cli.arguments import REPORT_HELP, providers
from tfm_cls.cli.shared import CommandFailed, check_onnx, quiet_datasets

logger = logging.getLogger("tfm_cls.cli")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("export", help="export a trained run's classifier to RUN/model.onnx and verify it")
    p.add_argument("--run", required=True, help="run directory written by `tfm-cls train`")
    p.add_argument("--output", help="output file (default RUN/model.onnx)")
    p.add_argument("--candidate", metavar="NAME",
                   help="export another model the run made (its metrics.json `candidates` front; RUN/candidates/NAME) "
                        "instead of the one it chose; give --output so RUN/model.onnx stays the chosen one's")
    p.add_argument("--fuse", action="store_true", help="pre-fuse attention/GELU/LayerNorm into onnxruntime contrib ops")
    p.add_argument("--no-verify", action="store_true", help="skip verification against the PyTorch model")
    p.add_argument("--providers", help="comma-separated providers to verify on (default: CPU, plus CUDA if present)")
    p.add_argument("--report", action="store_true", help=REPORT_HELP)
    p.add_argument("--web", metavar="DIR",
                   help="also write a static page that runs the model in the browser, offline, into DIR "
                        "(RUN/model.int8.onnx where it passed its gate). Where RUN/model.onnx is already the export "
                        "of the run's weights it is used as is, without torch (tfm-cls web MODEL.onnx DIR: any file)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    target = Path(args.output) if args.output else Path(args.run) / "model.onnx"
    if args.web:
        from tfm_cls.web_export import bundle_dir, check_web_folder

        # every refusal of the page before anything is exported: no bundle, a file or the run as its folder
        bundle_dir()
        check_web_folder(args.web, target, args.run)
        if _current_export(args, target):
            return _write_web(args, target)
    from tfm_cls.classify.card import write_card
    from tfm_cls.export.exporter import export_run
    from tfm_cls.runs import WEIGHTS_FILE, candidate_folder

    def check(model, tmp: Path) -> None:  # runs on the temporary file, before it replaces `target`
        if not args.no_verify:
            check_onnx(model, tmp, providers(args.providers), target,
                       candidate_folder(args.run, args.candidate) / WEIGHTS_FILE)

    try:
        path = export_run(args.run, target, fuse=args.fuse, check=check, candidate=args.candidate)
    except CommandFailed as err:
        raise CommandFailed(f"{err}; {target} was not changed", err.code) from err
    logger.info("wrote %s (%.1f MB, one file)", path, Path(path).stat().st_size / 2**20)
    if args.report:
        from tfm_cls.report import write_report

        quiet_datasets()
        write_report(args.run)
    write_card(args.run)  # the card now says how to run this model.onnx
    if args.web:
        return _write_web(args, Path(path))
    return 0


def _current_export(args: argparse.Namespace, target: Path) -> bool:
    """Whether RUN/model.onnx is already the export `tfm-cls export --run RUN` would write (it records
    the digest of RUN/model.safetensors as it is now), so that --web runs on it as is, torch-free."""
    if args.output or args.candidate or args.fuse or args.report or not target.is_file():
        return False
    from tfm_cls.io import file_sha256
    from tfm_cls.runtime.metadata import WEIGHTS_FILE  # runtime's: tfm_cls.runs imports torch
    from tfm_cls.web_export import _weights_digest

    weights = Path(args.run) / WEIGHTS_FILE
    digest = _weights_digest(target)
    if digest is None or not weights.is_file() or file_sha256(weights) != digest:
        return False
    logger.info("%s is the export of %s as it is now: the page runs it (no export again)", target, weights)
    return True


def _write_web(args: argparse.Namespace, model: Path) -> int:
    from tfm_cls.web_export import web_model, write_web_folder

    write_web_folder(web_model(args.run, model), args.web)
    return 0
