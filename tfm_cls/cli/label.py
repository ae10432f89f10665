"""`tfm-cls label`: a local page that shows the suggestions of a pool and appends each label given
to DIR/train.jsonl (docs/suggest.md). Parsing only; the work is tfm_cls.suggest."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from tfm_cls.cli.arguments import positive
from tfm_cls.cli.suggest import add_common, settings_of

DESCRIPTION = ("Serve a page on 127.0.0.1 that shows the texts of a pool most worth labelling, with the current "
               "guess; a key per label appends the text to DIR/train.jsonl (atomically, under a lock: a second tab "
               "loses nothing). Then `tfm-cls train --data DIR`, and label again. Needs the serve extra.")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("label", help="a local page to label the suggested texts into DIR/train.jsonl",
                              description=DESCRIPTION)
    add_common(p)
    p.add_argument("-n", type=positive, default=20, help="texts a round (default 20)")
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0: any free one)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.errors import InputError
    from tfm_cls.io import output_clash
    from tfm_cls.suggest.store import LOCK, TRAIN

    if args.data is None:
        raise InputError("tfm-cls label needs --data DIR: the folder the labels go to (labels.json holds the "
                         "label names)")
    folder = Path(args.data)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--data {folder} is a file; give the folder the labels go to")
    if args.pool != "-":  # the page appends to DIR/train.jsonl: the pool must not be that file
        clash = output_clash(folder / TRAIN, {"the pool (--pool)": (args.pool, None)}) or \
            output_clash(folder / LOCK, {"the pool (--pool)": (args.pool, None)})
        if clash:
            raise InputError(f"--data {folder}: {clash}; the page appends the labels there, so nothing was read or "
                             "written: give a pool file outside the labelled files")
    import uvicorn  # noqa: F401 (the serve extra: without it, one line naming it before the pool is read)

    from tfm_cls.suggest.server import LabelServer, LabelSession, listening_socket
    from tfm_cls.suggest.suggester import prepare

    sock = listening_socket(args.port)  # the port before the pool's vectors: a port in use says so at once
    try:
        logging.getLogger("tfm_cls.init_from").setLevel(logging.WARNING)
        suggester, _, run_guess = prepare(args.pool, run=args.run, data=args.data, text_field=args.text_field,
                                          max_pool=args.max_pool, settings=settings_of(args),
                                          invalid_utf8=args.invalid_utf8)
        session = LabelSession(suggester, args.data, args.n, args.pool, run_guess, args.text_field)
        server = LabelServer(session, sock)
        print(f"label at {server.url}  (Ctrl-C to stop)", flush=True)
        try:
            server.run()
        except KeyboardInterrupt:  # uvicorn stops cleanly, then raises Ctrl-C again: the way to stop, no error
            pass
    finally:
        sock.close()
    return 0
