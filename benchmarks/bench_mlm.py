"""The "ours + in-domain MLM" column of bench_accuracy.py: MLM pretraining before fine-tuning.

`prepare_mlm(dataset, folder, args)` is the variant's `prepare` hook. It pretrains with
configs/pretrain/<dataset>.yaml on the dataset's *training split only* (the data section is
taken from configs/cls/<dataset>.yaml, so the split is exactly the classifier's: no validation
or test text is ever pretrained on) and returns the overrides that fine-tune from it.

Budget: pretraining + fine-tuning share one total per dataset (`--minutes`, else TOTAL_MINUTES),
PRETRAIN_SHARE of it for MLM. The fine-tuning share is returned as train.max_minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOTAL_MINUTES = 30.0
"""Pretraining + fine-tuning per dataset when --minutes is not given (the issue's equal budget)."""
PRETRAIN_SHARE = 2 / 3
"""Fine-tuning a pretrained encoder early-stops within a few minutes; pretraining is what needs time."""

logger = logging.getLogger("bench_mlm")


def prepare_mlm(dataset: str, folder: Path, args: argparse.Namespace) -> list[str]:
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.pretrain import PretrainConfig, pretrain

    total = args.minutes if args.minutes is not None else TOTAL_MINUTES
    pretrain_minutes = 0.5 if args.quick else PRETRAIN_SHARE * total
    run_dir = Path(args.out) / "runs" / f"{dataset}-mlm-pretrain"
    overrides = [f"data.path={folder}", f"run_dir={run_dir}", "train.progress=false",
                 f"train.max_minutes={pretrain_minutes}"]
    if args.quick:
        overrides += ["data.max_train_samples=1500", "train.eval_every=null"]
    cfg = load_config(PretrainConfig, ROOT / f"configs/pretrain/{dataset}.yaml", overrides)
    classifier = load_config(
        ClassifierConfig, ROOT / f"configs/cls/{dataset}.yaml",
        [f"data.path={folder}"] + (["data.max_train_samples=1500"] if args.quick else []),
    )
    cfg = dataclasses.replace(cfg, data=classifier.data)  # the classifier's split, whatever its config says
    metrics = pretrain(cfg, overwrite=True)
    logger.info(
        "%s: MLM pretraining %.1f min, %d steps, validation MLM loss %s -> %s", dataset,
        metrics["train_seconds"] / 60, metrics["steps"], json.dumps(metrics.get("validation")), run_dir,
    )
    finetune_minutes = max(total - metrics["train_seconds"] / 60, 0.5)
    return [f"model.init_from={run_dir}", f"train.max_minutes={finetune_minutes:.2f}"]
