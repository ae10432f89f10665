"""`tfm-cls compress`: distil a finished run into a student cut from it (a subset of its layers)."""

from __future__ import annotations

import argparse

from tfm_cls.cli.arguments import config_arguments
from tfm_cls.cli.shared import print_run_summary, quiet_datasets


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compress", help="distil a finished run into a student cut from it (a subset of its layers)",
        description="A student that keeps some of the teacher run's layers (with its embeddings and "
                    "head), distilled with the configs/distill/cut.yaml preset; data, seed and "
                    "tokenizer length come from the run; the result is RUN-cutK beside it.")
    p.add_argument("--run", required=True, help="the teacher: a finished classification run directory")
    p.add_argument("--layers", required=True,
                   help="K (the first K layers, first:K), a list 0,2,4, spread:K (evenly spaced, ending at the last) or every_other")
    config_arguments(p, "configs/distill", "cut", "cut")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.classify.heads import head_for
    from tfm_cls.distill import distill
    from tfm_cls.distill.compress import compress_config, parse_layers

    quiet_datasets()
    cfg = compress_config(args.run, parse_layers(args.layers), args.overrides, args.config)
    metrics = distill(cfg, resume=args.resume, overwrite=args.overwrite)
    print_run_summary(cfg.resolved_run_dir(), metrics, head_for(cfg.student_config()).summary_keys)
    return 0
