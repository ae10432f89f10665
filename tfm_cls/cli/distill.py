"""`tfm-cls distill`: distil a teacher (a run or an ONNX file) into a small from-scratch student."""

from __future__ import annotations

import argparse

from tfm_cls.cli.arguments import config_arguments
from tfm_cls.cli.shared import print_run_summary, quiet_datasets


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "distill", help="distil a teacher (a run or an ONNX file) into a small from-scratch student",
        description="Label a transfer set with the teacher and train a student on its soft targets; "
                    "the result is an ordinary classification run directory (docs/distillation.md).")
    config_arguments(p, "configs/distill", "trec", "trec")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.classify.heads import head_for
    from tfm_cls.config import load_config
    from tfm_cls.distill import DistillConfig, distill

    quiet_datasets()
    cfg = load_config(DistillConfig, args.config, args.overrides)
    metrics = distill(cfg, resume=args.resume, overwrite=args.overwrite)
    print_run_summary(cfg.resolved_run_dir(), metrics, head_for(cfg.student_config()).summary_keys)
    return 0
