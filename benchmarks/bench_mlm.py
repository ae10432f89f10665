"""The "ours + in-domain MLM" column of bench_accuracy.py: MLM pretraining before fine-tuning.

`prepare_mlm(dataset, folder, args)` is the variant's `prepare` hook. It pretrains with
configs/pretrain/<dataset>.yaml on the dataset's *training split only* (the data section is
taken from configs/cls/<dataset>.yaml, so the split is exactly the classifier's: no validation
or test text is ever pretrained on) and returns the overrides that fine-tune from it.

Budget: pretraining + fine-tuning share one total per dataset (`--minutes`, else TOTAL_MINUTES),
PRETRAIN_SHARE of it for MLM. The fine-tuning share is returned as train.max_minutes.

Extra unlabelled text (`--mlm-extra`): the *training* texts of other datasets under --data-root,
added through the pretraining config's `extra_text.paths`, whose overlap guard drops every extra
text that holds a piece of an evaluation text (tfm_cls.pretrain.corpus.find_overlap). That matters for sst2
and mr_polarity, both cut from Rotten Tomatoes sentences: most SST-2 phrases that come from MR's
test sentences are dropped as pieces of them, and the count is in the pretraining run's metrics.
`auto` takes every other dataset in the same language.
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

FINETUNE_OVERLAY = "configs/finetune/from-mlm.yaml"
"""How the "ours + MLM" column fine-tunes, on top of configs/cls/<name>.yaml (the recipe lives there)."""

LANGUAGE = {"sst2": "en", "trec": "en", "ag_news": "en", "mr_polarity": "en", "sms_spam": "en", "tnews": "zh"}

logger = logging.getLogger("bench_mlm")


def extra_datasets(dataset: str, spec: str, root: Path) -> list[str]:
    """The datasets whose training texts are extra MLM text for `dataset`, from --mlm-extra."""
    if spec in ("", "none"):
        return []
    if spec == "auto":
        wanted = [d for d, lang in LANGUAGE.items() if d != dataset and lang == LANGUAGE.get(dataset)]
    else:
        wanted = [d.strip() for d in spec.split(",") if d.strip() and d.strip() != dataset]
    return [d for d in wanted if (root / d / "train.jsonl").is_file()]


def prepare_mlm(dataset: str, folder: Path, args: argparse.Namespace) -> list[str]:
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.pretrain import PretrainConfig, pretrain

    total = args.minutes if args.minutes is not None else TOTAL_MINUTES
    pretrain_minutes = 0.5 if args.quick else PRETRAIN_SHARE * total
    run_dir = Path(args.out) / "runs" / f"{dataset}-mlm-pretrain"
    overrides = [f"data.path={folder}", f"run_dir={run_dir}", "train.progress=false",
                 f"train.max_minutes={pretrain_minutes}"]
    extra = extra_datasets(dataset, args.mlm_extra, folder.parent)
    if extra:
        paths = ",".join(str(folder.parent / d / "train.jsonl") for d in extra)
        overrides.append(f"extra_text.paths=[{paths}]")
        logger.info("%s: extra MLM text from the training splits of %s", dataset, extra)
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
    logger.info("%s: MLM corpus %s", dataset, json.dumps(metrics.get("corpus")))
    finetune_minutes = max(total - metrics["train_seconds"] / 60, 0.5)
    return [f"model.init_from={run_dir}", f"train.max_minutes={finetune_minutes:.2f}"]
