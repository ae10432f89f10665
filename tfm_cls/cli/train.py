"""`tfm-cls train`: train a text classifier into a run directory, from a data folder or a Hugging Face
dataset (the recipe reads the data and chooses the config: tfm_cls.train.plan) or from a config (+ KEY=VALUE
overrides)."""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path

from tfm_cls.cli.arguments import config_arguments, positive_number
from tfm_cls.cli.shared import print_run_summary, quiet_datasets
from tfm_cls.errors import ConfigError, DataError

logger = logging.getLogger("tfm_cls.train.plan")

SPLIT_ROLES = ("train", "validation", "test")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
"""A Hugging Face dataset id: `ag_news`, `user/name`."""


def split_names(value: str) -> dict[str, str | None]:
    """An argparse type: `ROLE=SPLIT[,ROLE=SPLIT...]`, the hub splits read as train / validation /
    test (`none`: the dataset has none; validation and test are then carved from train)."""
    names: dict[str, str | None] = {}
    for item in value.split(","):
        role, _, split = (part.strip() for part in item.partition("="))
        if role not in SPLIT_ROLES or not split:
            raise argparse.ArgumentTypeError(
                f"expected ROLE=SPLIT[,ROLE=SPLIT...] with ROLE one of {', '.join(SPLIT_ROLES)}, got {item.strip()!r}")
        if role in names:
            raise argparse.ArgumentTypeError(f"{role} is given twice in {value!r}")
        names[role] = None if split.lower() in ("none", "null") else split
    if "train" in names and names["train"] is None:
        raise argparse.ArgumentTypeError("train=none: the training split is required")
    return names


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a text classifier: --data DIR or a hub dataset id (the recipe chooses) or --config "
                      "(+ KEY=VALUE overrides)",
        description="Train, evaluate and write a run directory. With --data and no --config the recipe reads the "
                    "data (a folder: train.*, optional validation.* / test.*, labels.json; or a Hugging Face dataset "
                    "id) and chooses the config; RUN/config.yaml keeps it, so --config RUN/config.yaml trains the "
                    "same run again.")
    config_arguments(p, "configs/cls", "bbc, trec, sst2-minilm", None)
    p.add_argument("--data", metavar="DIR|HUB_ID",
                   help="a folder of labelled data, or a Hugging Face dataset id (ag_news, user/name; a local path "
                        "that exists wins): the recipe chooses the config (with --config: that config's data)")
    p.add_argument("--data-config", metavar="NAME",
                   help="with a hub dataset id: its configuration (the second argument of datasets.load_dataset)")
    p.add_argument("--data-splits", type=split_names, metavar="ROLE=SPLIT,...",
                   help="with a hub dataset id: the splits read as train, validation and test, e.g. "
                        "validation=dev,test=none (none: carved from train; default train=train,"
                        "validation=validation,test=test)")
    p.add_argument("--minutes", type=positive_number, default=15.0,
                   help="the recipe's wall-clock budget for the whole run, a positive number (default 15)")
    p.add_argument("--explain", action="store_true",
                   help="check the data as training will, print what the recipe chose and why, and stop")
    p.set_defaults(func=run)


def data_source(args: argparse.Namespace) -> dict[str, str | None]:
    """The data.* keys `--data` names: {path} for a local path that exists, else {name, ...} for a
    Hugging Face dataset id with --data-config and --data-splits; {} without --data."""
    hub_options = [flag for flag, value in (("--data-config", args.data_config), ("--data-splits", args.data_splits))
                   if value is not None]
    if not args.data:
        if hub_options:
            raise DataError(f"{' and '.join(hub_options)} name a hub dataset's config and splits: give --data HUB_ID too")
        return {}
    if Path(args.data).expanduser().exists():
        if hub_options:
            raise DataError(f"--data {args.data} is a local path, and {' and '.join(hub_options)} name a hub dataset's "
                            "config and splits (a folder's splits are its files: train.*, validation.*, test.*)")
        return {"path": str(Path(args.data).expanduser())}
    if not HUB_ID.fullmatch(args.data):
        raise DataError(f"--data {args.data}: no such file or folder, and not a Hugging Face dataset id "
                        "(e.g. ag_news or user/name)")
    splits = {f"{role}_split": split for role, split in (args.data_splits or {}).items()}
    return {"path": None, "name": args.data, "config_name": args.data_config, **splits}


def _yaml(value: str | None) -> str:
    return "null" if value is None else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def resolve(args: argparse.Namespace):
    """The ClassifierConfig of the command line and the data it trains on: the recipe's config for
    --data alone, with the data read and checked as training reads them; else the config (default
    preset bbc) with --data as its data source, and None (training reads them)."""
    from tfm_cls.config import ClassifierConfig, DataConfig, load_config

    source = data_source(args)
    if source and not args.config:
        from tfm_cls.data.sources import load_data
        from tfm_cls.train.plan import plan_run, profile_data

        quiet_datasets()
        plan = plan_run(profile_data(DataConfig(**source)), minutes=args.minutes)
        cfg = plan.config(args.overrides)
        # What training would refuse (the planned carves and the overrides included) is refused
        # now, with training's error, before anything is printed or written.
        data = load_data(cfg.data)
        for line in plan.describe():
            (print if args.explain else logger.info)(line)
        return cfg, data
    if args.explain:
        raise ConfigError("--explain describes the recipe's choices: give --data DIR (or a hub dataset id) without --config")
    overrides = [*(f"data.{key}={_yaml(value)}" for key, value in source.items()), *args.overrides]
    return load_config(ClassifierConfig, args.config or "bbc", overrides), None  # a bad config fails before torch


def run(args: argparse.Namespace) -> int:
    from tfm_cls.training.stages import StageLog

    stages = StageLog()
    with stages.stage("read and plan"):
        cfg, data = resolve(args)
    if args.explain:
        return 0
    from tfm_cls.classify.heads import head_for
    from tfm_cls.train import train
    from tfm_cls.training.clock import process_started

    quiet_datasets()
    # train.wall_minutes (the recipe's --minutes) counts from this process's start: loading counts too
    metrics = train(cfg, data, resume=args.resume, overwrite=args.overwrite, started=process_started(),
                    stages=stages)
    print_run_summary(cfg.resolved_run_dir(), metrics, head_for(cfg).summary_keys)
    return 0
