"""`tfm-cls report`: write RUN/report.html, one self-contained page on a finished run (docs/report.md)."""

from __future__ import annotations

import argparse

from tfm_cls.cli.shared import quiet_datasets


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("report", help="write RUN/report.html: errors, calibration, label errors, a baseline",
                              description="One self-contained HTML page on a finished run (docs/report.md).")
    p.add_argument("--run", required=True, help="run directory of a finished run")
    p.add_argument("--data", default=None, help="labelled file or folder (default: the run's own data)")
    p.add_argument("--split", default="test", help="split to report on (file stem in a folder; default: test)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.report import write_report

    quiet_datasets()
    path = write_report(args.run, args.data, args.split)
    print(path)
    return 0
