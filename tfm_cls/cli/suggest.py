"""`tfm-cls suggest`: the texts of a pool most worth labelling next (docs/suggest.md). Parsing
only; the work is tfm_cls.suggest."""

from __future__ import annotations

import argparse
import logging

from tfm_cls.cli.arguments import positive

DESCRIPTION = ("The N texts of a pool most worth labelling now, each with the current model's guess and why it was "
               "picked. Without labels or a run: representatives of the pool's clusters (guessed from the label "
               "names of DIR/labels.json where given); with labels (--data DIR) or a trained run (--run): the most "
               "uncertain texts, spread over the pool while the labels are few (--strategy), never a labelled text "
               "nor a near-duplicate of one.")


def add_common(p: argparse.ArgumentParser) -> None:
    """The arguments `suggest` and `label` share."""
    p.add_argument("--pool", required=True, help="unlabelled texts: .txt (one a line), .jsonl, .csv or .tsv")
    p.add_argument("--data", default=None, metavar="DIR",
                   help="the labelled folder: labels.json (names, or {name: description}) and train.jsonl")
    p.add_argument("--run", default=None, help="a trained run whose calibrated scores guess and choose")
    p.add_argument("--text-field", default="text", help="the text's field in jsonl / csv (default: text)")
    p.add_argument("--max-pool", type=positive, default=None,
                   help="distinct pool texts kept at most; beyond, a uniform sample (default 100000)")
    p.add_argument("--strategy", default="auto", choices=("auto", "spread", "top"),
                   help="with labels or a run: spread (the most uncertain text of each of N clusters of the pool), "
                        "top (the N most uncertain), or auto (default): spread while fewer than 16 labelled texts a "
                        "class (the folder's, else the run's training texts), top from there on")
    p.add_argument("--uncertainty", default="margin", choices=("margin", "entropy"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--invalid-utf8", choices=("error", "replace"), default="error",
                   help="invalid UTF-8 in the pool: error (default; names the line, as training does) or replace "
                        "(U+FFFD, counted in the log)")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("suggest", help="which texts of a pool to label next", description=DESCRIPTION)
    add_common(p)
    p.add_argument("-n", type=positive, default=20, help="texts to suggest (default 20)")
    p.add_argument("--output", "-o", required=True, help="the suggestions, one JSON row each (jsonl)")
    p.set_defaults(func=run)


def settings_of(args: argparse.Namespace):
    from tfm_cls.suggest import Settings

    return Settings(strategy=args.strategy, uncertainty=args.uncertainty, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.suggest.suggester import check_output, prepare, write_suggestions

    # before anything is read: an output that is an input would be overwritten with the suggestions
    check_output(args.output, args.pool, args.data, args.run)
    logging.getLogger("tfm_cls.init_from").setLevel(logging.WARNING)
    suggester, labelled, run_guess = prepare(args.pool, run=args.run, data=args.data, text_field=args.text_field,
                                             max_pool=args.max_pool, settings=settings_of(args),
                                             invalid_utf8=args.invalid_utf8)
    suggestions = suggester.suggest(args.n, labelled, run_guess)
    write_suggestions(args.output, suggestions)
    print(f"{len(suggestions)} suggestions -> {args.output}")
    return 0
