"""`tfm-cls label`: a local page that shows the suggestions of a pool and appends each label given
to DIR/train.jsonl (docs/suggest.md). Parsing only; the work is tfm_cls.suggest."""

from __future__ import annotations

import argparse
import logging

from tfm_cls.cli.arguments import positive
from tfm_cls.cli.suggest import add_common, settings_of

DESCRIPTION = ("Serve a page on 127.0.0.1 that shows the texts of a pool most worth labelling, with the current "
               "guess; a key per label appends the text to DIR/train.jsonl (atomically, under a lock: a second tab "
               "loses nothing). Then `tfm-cls train --data DIR`, and label again.")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("label", help="a local page to label the suggested texts into DIR/train.jsonl",
                              description=DESCRIPTION)
    add_common(p)
    p.add_argument("-n", type=positive, default=20, help="texts a round (default 20)")
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0: any free one)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.cli.shared import CommandFailed
    from tfm_cls.suggest.server import HOST, LabelSession, make_server
    from tfm_cls.suggest.suggester import prepare

    if args.data is None:
        raise CommandFailed("tfm-cls label needs --data DIR: the folder the labels go to (labels.json holds the "
                            "label names)", 2)
    logging.getLogger("tfm_cls.init_from").setLevel(logging.WARNING)
    suggester, _, run_guess = prepare(args.pool, run=args.run, data=args.data, text_field=args.text_field,
                                      max_pool=args.max_pool, settings=settings_of(args))
    session = LabelSession(suggester, args.data, args.n, args.pool, run_guess, args.text_field)
    try:
        server = make_server(session, args.port)
    except OSError as err:
        raise CommandFailed(f"cannot listen on {HOST}:{args.port}: {err.strerror} (try --port 0)", 2) from None
    print(f"label at http://{HOST}:{server.server_address[1]}/  (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
