"""`tfm-cls export`, `tfm-cls verify-onnx` and `tfm-cls quantize` (see docs/export.md).

Heavy imports (torch, the exporter) happen inside the handlers, so `tfm-cls --help` stays quick.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def _providers(value: str | None) -> list[str] | None:
    return [p.strip() for p in value.split(",") if p.strip()] if value else None


def register_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("export", help="export a trained run's classifier to RUN/model.onnx and verify it")
    p.add_argument("--run", required=True, help="run directory written by `tfm-cls train`")
    p.add_argument("--output", help="output file (default RUN/model.onnx)")
    p.add_argument("--fuse", action="store_true", help="pre-fuse attention/GELU/LayerNorm into onnxruntime contrib ops")
    p.add_argument("--no-verify", action="store_true", help="skip verification against the PyTorch model")
    p.add_argument("--providers", help="comma-separated providers to verify on (default: CPU, plus CUDA if present)")
    p.set_defaults(func=run_export)

    p = subparsers.add_parser("verify-onnx", help="check RUN/model.onnx against the run's PyTorch model")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--model", help="ONNX file (default RUN/model.onnx)")
    p.add_argument("--providers", help="comma-separated providers (default: CPU, plus CUDA if present)")
    p.set_defaults(func=run_verify)

    p = subparsers.add_parser("quantize", help="int8-quantize RUN/model.onnx; refuse if accuracy drops too much")
    p.add_argument("--run", required=True, help="run directory holding model.onnx")
    p.add_argument("--data", required=True, help="labelled .jsonl/.csv file (text, label) to evaluate on")
    p.add_argument("--model", help="fp32 ONNX file (default RUN/model.onnx)")
    p.add_argument("--output", help="int8 file (default RUN/model.int8.onnx)")
    p.add_argument("--threshold", type=float, default=0.5, help="largest accepted accuracy drop, in points")
    p.add_argument("--per-channel", action="store_true", help="per-channel weight scales")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--limit", type=int, help="evaluate on the first N examples only")
    p.set_defaults(func=run_quantize)


def run_export(args: argparse.Namespace) -> int:
    from export.exporter import ExportError, export_run
    from export.verify import VerificationError, verify
    from tfm_cls.artifacts import RunDirError, load_run

    try:
        path = export_run(args.run, args.output, fuse=args.fuse)
    except (RunDirError, ExportError) as err:
        logger.error("%s", err)
        return 2
    size = Path(path).stat().st_size / 2**20
    logger.info("wrote %s (%.1f MB, one file)", path, size)
    if args.no_verify:
        return 0
    try:
        report = verify(load_run(args.run).model, path, _providers(args.providers))
    except VerificationError as err:
        print(err)
        return 1
    print(report)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from export.verify import VerificationError, verify
    from tfm_cls.artifacts import RunDirError, load_run

    path = Path(args.model) if args.model else Path(args.run) / "model.onnx"
    if not path.is_file():
        logger.error("%s not found; export it first: make export RUN=%s", path, args.run)
        return 2
    try:
        run = load_run(args.run)
    except RunDirError as err:
        logger.error("%s", err)
        return 2
    try:
        report = verify(run.model, path, _providers(args.providers))
    except VerificationError as err:
        print(err)
        return 1
    print(report)
    return 0


def run_quantize(args: argparse.Namespace) -> int:
    from export.infer import InferenceError
    from export.quantize import QuantizeError, quantize_and_evaluate

    fp32 = Path(args.model) if args.model else Path(args.run) / "model.onnx"
    int8 = Path(args.output) if args.output else fp32.with_name(fp32.stem + ".int8.onnx")
    try:
        report = quantize_and_evaluate(
            fp32, args.data, int8, threshold=args.threshold, per_channel=args.per_channel,
            batch_size=args.batch_size, limit=args.limit,
        )
    except (QuantizeError, InferenceError) as err:
        logger.error("%s", err)
        return 2
    print(report)
    return 0 if report.accepted else 1
