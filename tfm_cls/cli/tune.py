"""`tfm-cls tune`: hyperparameter search with Optuna over a configs/tune preset."""

from __future__ import annotations

import argparse
import json

from tfm_cls.cli.arguments import positive
from tfm_cls.cli.shared import quiet_datasets


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "tune", help="hyperparameter search with Optuna (needs tfm-cls[optuna]); trials scored on validation",
        description="Search the `tune.space` of a configs/tune preset; each trial is a short training run in "
                    "RUN/trials/<n>, the study is kept in RUN/study.db (rerun the same command to resume), the "
                    "best config is written to RUN/best.yaml. KEY=VALUE: tune.* / name / run_dir / base go to the "
                    "search, anything else (data.path=...) to the base classifier config.",
    )
    p.add_argument("--config", required=True, help="a configs/tune preset (trec, mr_polarity) or a YAML file")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="e.g. tune.trials=10 or data.path=../shared/data/trec")
    p.add_argument("--trials", type=positive, help="finished trials the study should hold (tune.trials)")
    p.add_argument("--max-minutes", type=float, help="wall-clock budget of the search (tune.max_minutes)")
    p.add_argument("--retrain", action="store_true", help="train the best config in full into RUN/best/ (test scored)")
    p.add_argument("--overwrite", action="store_true", help="discard a different earlier search in run_dir")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.tune import load_tune_config, tune

    quiet_datasets()
    overrides = list(args.overrides)
    if args.trials is not None:
        overrides.append(f"tune.trials={args.trials}")
    if args.max_minutes is not None:
        overrides.append(f"tune.max_minutes={args.max_minutes}")
    cfg = load_tune_config(args.config, overrides)
    result = tune(cfg, retrain=args.retrain, overwrite=args.overwrite)
    print(json.dumps({"run_dir": str(cfg.resolved_run_dir()), **result}))
    return 0
