"""`tfm-cls batch`: batch inference on Ray Data (needs tfm-cls[ray]). The flags are parsed here;
the work is tfm_cls.batch.pipeline (docs/batch-inference.md)."""

from __future__ import annotations

import argparse

from tfm_cls.batch import pipeline
from tfm_cls.batch.inputs import FORMATS
from tfm_cls.batch.outputs import OUTPUT_FORMATS
from tfm_cls.cli.arguments import add_inference_options, check_sizes, long_text_overrides

DESCRIPTION = ("`tfm-cls batch`: classify a file, a folder or a glob of Parquet / JSONL / CSV with an exported "
               "model on Ray Data, into a folder of Parquet (or JSONL) parts. docs/batch-inference.md")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "batch", help="batch inference on Ray Data: files / folders / globs of Parquet, JSONL, CSV -> a folder "
                      "of parts (needs tfm-cls[ray]; its flags: tfm-cls batch --help)",
        description=DESCRIPTION)
    p.add_argument("--model", required=True, help="an .onnx file written by `tfm-cls export`, at a path every node reads")
    p.add_argument("--input", required=True, help="a file, a folder or a glob of .parquet / .jsonl / .csv files "
                   "(local, or a filesystem URI: s3://, gs://, hdfs://, ...)")
    p.add_argument("--output", required=True, help="the output folder (created; local or a filesystem URI)")
    p.add_argument("--input-format", choices=FORMATS, help="default: from each file's extension")
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, default="parquet", help="default: parquet")
    p.add_argument("--text-field", default="text", help="the text's key (jsonl) or column (parquet, csv)")
    p.add_argument("--pair-field", default="text_pair", help="sentence-pair models: the second text's key or column")
    p.add_argument("--address", help="an existing Ray cluster: auto, HOST:6379 or ray://HOST:10001 "
                   "(default: a local cluster of this machine's CPUs)")
    p.add_argument("--concurrency", type=int, help="inference actors (default: the cluster's CPUs / --threads)")
    p.add_argument("--max-restarts", type=int, default=3,
                   help="times a dead actor is restarted and its batch retried before the run fails (default 3)")
    p.add_argument("--keep-text", action="store_true", help="keep the text (and pair) columns in the output")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier batch output in --output")
    p.add_argument("--temp-dir", help="a local cluster's session folder (default: Ray's, /tmp/ray)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    # The flags of `tfm-cls infer` (same names, same meaning); --buffer-texts is the texts of one
    # Ray batch, sorted by length and cut into --max-tokens batches inside the actor. threads: 1.
    add_inference_options(p, batch_size=32)
    p.set_defaults(func=run, threads=1, buffer_texts=pipeline.DEFAULT_RAY_BATCH)


def job_of(args: argparse.Namespace) -> pipeline.BatchJob:
    """The pipeline's job, as the flags say."""
    return pipeline.BatchJob(
        model=args.model, input=args.input, output=args.output, input_format=args.input_format,
        output_format=args.output_format, text_field=args.text_field, pair_field=args.pair_field,
        address=args.address, concurrency=args.concurrency, max_restarts=args.max_restarts,
        keep_text=args.keep_text, overwrite=args.overwrite, temp_dir=args.temp_dir, progress=not args.no_progress,
        threads=args.threads, buffer_texts=args.buffer_texts, batching=args.batching, batch_size=args.batch_size,
        max_tokens=args.max_tokens, max_length=args.max_length, long_text=long_text_overrides(args),
    )


def run(args: argparse.Namespace) -> int:
    check_sizes(args, threads=1)  # a thread per actor at least
    # ray is imported by the pipeline (the ray extra, checked there with one clear message)
    print(pipeline.run(job_of(args)))
    return 0
