"""`tfm-cls` command line. Each job's module registers its own subcommands here."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# module -> it defines `register_commands(subparsers)`; each subcommand sets `func(args) -> int`.
COMMAND_MODULES = [
    "tfm_cls.commands",  # train, eval, predict
    "tfm_cls.pretrain",  # pretrain
    "export.commands",  # export, verify-onnx, quantize
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfm-cls", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # that job is not built into this install
                continue
            raise
        module.register_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
