"""`tfm-cls predict`: predict labels with the PyTorch model of a run; writes JSONL
(tfm_cls.classify.predict.predict_file)."""

from __future__ import annotations

import argparse

from tfm_cls.cli.arguments import DEVICE_HELP, add_inference_options, check_sizes, long_text_overrides


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("predict", help="predict labels with the PyTorch model; writes JSONL")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--input", default="-", help="txt (one text per line), .jsonl or .csv; - = stdin")
    p.add_argument("--output", default="-", help="JSONL output: label, score, probabilities; - = stdout")
    p.add_argument("--input-format", "--format", dest="input_format", choices=("auto", "txt", "jsonl", "csv", "tsv"),
                   default="auto", help="input format (auto: by file extension; stdin: txt)")
    p.add_argument("--text-field", "--column", dest="text_field", default="text",
                   help="the text's key (jsonl) or column (csv) (default: text)")
    p.add_argument("--pair-field", default=None,
                   help="sentence pairs: the second text's key (jsonl) or column (csv/tsv) "
                        "(default: the run's data.text_pair_column)")
    add_inference_options(p, batch_size=64)
    p.add_argument("--device", default="cpu", help=DEVICE_HELP)
    p.add_argument("--invalid-utf8", choices=("error", "replace"), default="error",
                   help="error: stop, naming the line and byte offset (default); replace: substitute U+FFFD and count")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_sizes(args)
    from tfm_cls.classify.predict import predict_file

    predict_file(
        args.run, args.input, args.output, input_format=args.input_format, text_field=args.text_field,
        pair_field=args.pair_field, invalid_utf8=args.invalid_utf8, device=args.device, threads=args.threads,
        batch_size=args.batch_size, batching=args.batching, max_tokens=args.max_tokens,
        buffer_texts=args.buffer_texts, max_length=args.max_length, long_text=long_text_overrides(args),
    )
    return 0
