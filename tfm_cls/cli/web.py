"""`tfm-cls web MODEL.onnx DIR`: the static page that runs an exported model in the browser, offline
(tfm_cls.web_export; docs/export.md "In the browser"). Torch-free: the base install writes it, from
the bundle the wheel carries (or web/dist of a checkout)."""

from __future__ import annotations

import argparse

DESCRIPTION = ("Write a static page into DIR that classifies texts with MODEL.onnx in the browser, offline: the "
               "page, the JavaScript runtime, onnxruntime-web's WASM and the model. Serve DIR with any static server "
               "(python -m http.server -d DIR). Needs no torch and no Node.")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("web", help="a static page that runs an exported .onnx in the browser",
                              description=DESCRIPTION)
    p.add_argument("model", metavar="MODEL.onnx", help="an export of `tfm-cls export` (fp32 or int8)")
    p.add_argument("folder", metavar="DIR", help="the page's folder (created; the files it writes are replaced)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tfm_cls.web_export import bundle_dir, check_web_folder, write_web_folder

    check_web_folder(args.folder, args.model)  # before anything is read or written
    folder = write_web_folder(args.model, args.folder, bundle_dir())
    print(f"wrote the page to {folder}; serve it: python -m http.server -d {folder} 8000")
    return 0
