"""`tfm-cls eval`: evaluate a trained run on labelled data (tfm_cls.classify.evaluate)."""

from __future__ import annotations

import argparse

from tfm_cls.cli.arguments import (
    DEVICE_HELP,
    REPORT_HELP,
    add_inference_options,
    check_sizes,
    long_text_overrides,
)
from tfm_cls.cli.shared import quiet_datasets
from tfm_cls.errors import InputError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("eval", help="evaluate a trained run on labelled data")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--data", nargs="?", default=None, help="data file or folder (default: the run's own data, --split of it)")
    p.add_argument("--split", default="test", help="split to evaluate (file stem in a folder; default: test)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="data config overrides, e.g. label_column=topic text_columns=[title,body]")
    p.add_argument("--output", help="write the metrics JSON here (default: stdout)")
    p.add_argument("--candidate", metavar="NAME",
                   help="evaluate another model the run made (its metrics.json `candidates` front; RUN/candidates/NAME) "
                        "instead of the one it chose; not recorded in the run's card")
    add_inference_options(p, batch_size=128, streaming=False)
    p.add_argument("--device", default="cpu", help=DEVICE_HELP)
    p.add_argument("--report", action="store_true", help=REPORT_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_sizes(args)
    if args.candidate and args.report:
        raise InputError(f"--report shows the model the run chose, not --candidate {args.candidate}: "
                         "evaluate the candidate without --report")
    from tfm_cls.classify.card import write_card
    from tfm_cls.classify.evaluate import evaluate_run

    quiet_datasets()
    evaluate_run(args.run, args.data, args.split, args.overrides, batch_size=args.batch_size, device=args.device,
                 threads=args.threads, max_length=args.max_length, long_text=long_text_overrides(args),
                 output=args.output, candidate=args.candidate)
    if args.report:
        from tfm_cls.report import write_report

        write_report(args.run, args.data, args.split)
    write_card(args.run)  # the card's table shows this evaluation beside the run's own (and links the page)
    return 0
