"""`tfm-cls pretrain`: masked-language-model pretraining of the encoder on in-domain text."""

from __future__ import annotations

import argparse
import logging

from tfm_cls.cli.arguments import config_arguments
from tfm_cls.cli.shared import quiet_datasets

logger = logging.getLogger("tfm_cls.cli")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain", help="masked-language-model pretraining of the encoder on in-domain text",
        description="MLM pretraining; fine-tune afterwards with `tfm-cls train ... model.init_from=RUN_DIR`.")
    config_arguments(p, "configs/pretrain", "trec, sst2", None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.config import load_config
    from tfm_cls.pretrain import PretrainConfig, pretrain

    quiet_datasets()
    cfg = load_config(PretrainConfig, args.config, args.overrides)
    metrics = pretrain(cfg, resume=args.resume, overwrite=args.overwrite)
    val = metrics.get("validation") or {}
    if val:
        logger.info("validation MLM loss %.4f, perplexity %.1f", val["loss"], val["perplexity"])
    return 0
