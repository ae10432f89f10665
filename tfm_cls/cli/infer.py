"""`tfm-cls infer` (and `python export/infer.py`, the same code): classify texts with an exported
model, torch-free. The flags are parsed here; the work is tfm_cls.runtime.stream.classify_file."""

from __future__ import annotations

import argparse

from tfm_cls.cli.arguments import add_inference_options, check_sizes, long_text_overrides, providers
from tfm_cls.runtime.batching import RUNTIME_MAX_TOKENS
from tfm_cls.runtime.readers import INPUT_FORMATS
from tfm_cls.runtime.writers import OUTPUT_FORMATS

DESCRIPTION = "Classify texts with an exported tfm_cls model, using only onnxruntime, tokenizers and numpy."


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "infer", help="torch-free ONNX inference (the code of export/infer.py; its flags: tfm-cls infer --help)",
        description=DESCRIPTION)
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `tfm-cls infer`, also those of `python export/infer.py`."""
    p.add_argument("--model", required=True, help="an .onnx file written by `tfm-cls export`")
    p.add_argument("--input", default="-", help="txt / jsonl / csv file, or - for stdin (default)")
    p.add_argument("--output", default="-", help="jsonl / csv file, or - for stdout (default)")
    p.add_argument("--input-format", choices=INPUT_FORMATS, help="default: from the extension; txt for stdin")
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, help="default: from the extension; jsonl for stdout")
    p.add_argument("--text-field", default="text", help="the text's key (jsonl) or column (csv/tsv)")
    p.add_argument("--pair-field", default="text_pair",
                   help="sentence-pair models: the second text's key (jsonl) or column (csv/tsv) (default: text_pair)")
    p.add_argument("--chunk-batches", type=int, help="read --batch-size x this many texts at once (instead of --buffer-texts)")
    p.add_argument(
        "--providers", default="CPUExecutionProvider", help="comma-separated onnxruntime execution providers"
    )
    add_inference_options(p, batch_size=32, max_tokens=RUNTIME_MAX_TOKENS)
    p.add_argument(
        "--invalid-utf8",
        choices=("error", "replace"),
        default="error",
        help="error: stop, naming the line (default); replace: substitute U+FFFD and count",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    check_sizes(args)
    from tfm_cls.runtime.stream import classify_file

    # Texts read, sorted by length and batched at once: this bounds the memory of a run.
    buffer_texts = args.buffer_texts if args.chunk_batches is None else args.batch_size * args.chunk_batches
    classify_file(
        args.model, args.input, args.output, providers=providers(args.providers), threads=args.threads,
        max_length=args.max_length, long_text=long_text_overrides(args), batching=args.batching,
        batch_size=args.batch_size, max_tokens=args.max_tokens, buffer_texts=buffer_texts,
        input_format=args.input_format, output_format=args.output_format, text_field=args.text_field,
        pair_field=args.pair_field, invalid_utf8=args.invalid_utf8, progress=not args.no_progress,
    )
    return 0
