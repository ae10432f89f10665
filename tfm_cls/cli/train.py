"""`tfm-cls train`: train a text classifier into a run directory, from a data folder (the recipe
reads the data and chooses the config: tfm_cls.plan) or from a config (+ KEY=VALUE overrides)."""

from __future__ import annotations

import argparse
import logging

from tfm_cls.cli.arguments import config_arguments
from tfm_cls.cli.shared import print_run_summary, quiet_datasets

logger = logging.getLogger("tfm_cls.plan")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a text classifier: --data DIR (the recipe chooses) or --config (+ KEY=VALUE overrides)",
        description="Train, evaluate and write a run directory. With --data and no --config the recipe reads the "
                    "folder (train.*, optional validation.* / test.*, labels.json) and chooses the config; "
                    "RUN/config.yaml keeps it, so --config RUN/config.yaml trains the same run again.")
    config_arguments(p, "configs/cls", "bbc, trec, sst2-minilm", None)
    p.add_argument("--data", metavar="DIR", help="a folder of labelled data: the recipe chooses the config "
                   "(with --config: that config's data.path)")
    p.add_argument("--minutes", type=float, default=15.0,
                   help="the recipe's wall-clock budget for the whole run (default 15)")
    p.add_argument("--explain", action="store_true", help="print what the recipe chose and why, and stop")
    p.set_defaults(func=run)


def resolve(args: argparse.Namespace):
    """The ClassifierConfig of the command line: the recipe's for --data alone, else the config
    (default preset bbc) with --data as data.path."""
    from tfm_cls.config import ClassifierConfig, load_config

    if args.data and not args.config:
        from tfm_cls.plan import plan_run, profile_data

        quiet_datasets()
        plan = plan_run(profile_data(args.data), minutes=args.minutes)
        for line in plan.describe():
            (print if args.explain else logger.info)(line)
        return plan.config(args.overrides)
    if args.explain:
        raise SystemExit("error: --explain describes the recipe's choices: give --data DIR without --config")
    overrides = [*([f"data.path={args.data}"] if args.data else []), *args.overrides]
    return load_config(ClassifierConfig, args.config or "bbc", overrides)  # a bad config fails before torch loads


def run(args: argparse.Namespace) -> int:
    if args.minutes <= 0:
        raise SystemExit(f"error: --minutes: expected a positive budget, got {args.minutes:g}")
    cfg = resolve(args)
    if args.explain:
        return 0
    from tfm_cls.classify.heads import head_for
    from tfm_cls.train import train

    quiet_datasets()
    metrics = train(cfg, resume=args.resume, overwrite=args.overwrite)
    print_run_summary(cfg.resolved_run_dir(), metrics, head_for(cfg).summary_keys)
    return 0
