"""`tfm-cls quantize`: int8-quantize an exported model, refused when the task's metric drops by more
than --threshold points on labelled data (tfm_cls.export.quantize)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tfm_cls.cli.arguments import check_sizes, positive
from tfm_cls.cli.shared import CommandFailed


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("quantize", help="int8-quantize RUN/model.onnx; refuse if accuracy drops too much")
    p.add_argument("--run", required=True, help="run directory holding model.onnx")
    p.add_argument("--data", required=True, help="labelled .jsonl/.csv file (text, label) to evaluate on")
    p.add_argument("--model", help="fp32 ONNX file (default RUN/model.onnx)")
    p.add_argument("--output", help="int8 file (default RUN/model.int8.onnx)")
    p.add_argument("--threshold", type=float, default=0.5, help="largest accepted drop of the task's metric (accuracy, micro-F1, Pearson x 100), in points")
    p.add_argument("--per-channel", action="store_true", help="per-channel weight scales")
    p.add_argument("--fp32-embeddings", action="store_true",
                   help="keep the embedding tables fp32 (default: int8 with one scale per row, where the gate allows)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--limit", type=positive, help="evaluate on the first N examples only")
    p.add_argument("--text-field", default="text", help="the text's key / column (default: text)")
    p.add_argument("--label-field", default="label", help="the label's key / column (default: label)")
    p.add_argument("--pair-field", default="text_pair", help="sentence-pair models: the second text's key")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_sizes(args)
    from tfm_cls.export.quantize import quantize_and_evaluate

    fp32 = Path(args.model) if args.model else Path(args.run) / "model.onnx"
    int8 = Path(args.output) if args.output else fp32.with_name(fp32.stem + ".int8.onnx")
    report = quantize_and_evaluate(
        fp32, args.data, int8, threshold=args.threshold, per_channel=args.per_channel,
        embeddings=not args.fp32_embeddings, batch_size=args.batch_size, limit=args.limit,
        text_field=args.text_field, label_field=args.label_field, pair_field=args.pair_field,
    )
    print(report)
    if not report.accepted:
        raise CommandFailed(f"int8 model rejected: {report.metric} fell by more than {args.threshold} points", 1)
    return 0
