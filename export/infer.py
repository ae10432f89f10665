#!/usr/bin/env python
"""Classify texts with an exported tfm_cls model, using only onnxruntime, tokenizers and numpy.

The .onnx file is all it needs: the tokenizer, the label names, the maximum length and the run's
long-text policy (truncation strategy, chunking) travel in its metadata. Texts are read in buffers
(--buffer-texts), sorted by length inside each buffer into batches of at most --max-tokens padded
tokens (or --batching fixed: --batch-size texts), and written back in input order as they are
done, so memory stays bounded on inputs of any size. A text longer than the model's length is
truncated by the policy (--truncation head / tail / head+tail), or with --chunk classified as
overlapping windows (--stride) whose logits or probabilities are aggregated (--aggregate mean /
max); its row then says how many windows it had. docs/long-documents.md

    python export/infer.py --model runs/x/model.onnx --input texts.txt --output predictions.jsonl
    cat texts.txt | python export/infer.py --model model.onnx > predictions.jsonl

Input: .txt (one text per line: lines end at "\n" only, "\r\n" accepted), .jsonl (an object per
line, text in --text-field, optional "id"), .csv (a header row, text in --text-field, optional "id"
column), or stdin (txt unless --input-format says otherwise). Invalid UTF-8 is an error naming the
line and byte offset unless --invalid-utf8 replace. Output: JSONL (default) or CSV (--output x.csv
or --output-format csv), exactly one row per input line / csv row, in input order, with id, line,
label, score, the probability of every label, whether the text was truncated, and whether it was
empty (an empty or blank line gets label null and "empty": true, never a guess). Multi-label
models list every label over its threshold with its score; regression rows hold the value;
sentence-pair models read the second text from --pair-field (a JSONL key, a CSV/TSV column).
"""


from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.batching import BATCHINGS, DEFAULT_MAX_TOKENS, RUNTIME_MAX_TOKENS
from tfm_cls.runtime.readers import (
    INPUT_FORMATS,
    Record,
    Stats,
    chunks,
    detect_format,
    open_input,
    read_records,
)
from tfm_cls.runtime.session import Classifier
from tfm_cls.runtime.text import AGGREGATE_SCORES, AGGREGATES, TRUNCATIONS
from tfm_cls.runtime.writers import OUTPUT_FORMATS, OutputFile, Writer

log = logging.getLogger("tfm_cls.infer")


# ---- the command -------------------------------------------------------------------------------


def _progress(disable: bool):
    """A tqdm bar on a terminal that appears once a run has lasted a second; None without tqdm
    or when stderr is redirected (a log file gets no carriage-return lines)."""
    if disable or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(unit="text", file=sys.stderr, delay=1.0, dynamic_ncols=True)


def buffer_size(args) -> int:
    """Texts read, sorted by length and batched at once: this bounds the memory of a run."""
    if args.chunk_batches is not None:
        return args.batch_size * args.chunk_batches
    return args.buffer_texts


def classify_stream(classifier: Classifier, records: Iterable[Record], writer: Writer, args, stats: Stats) -> None:
    bar = _progress(args.no_progress)
    # A chunk is sorted by length and cut into batches; its size bounds the memory used.
    for chunk in chunks(records, buffer_size(args)):
        full = [r for r in chunk if not r.empty]
        pairs = [r.pair for r in full] if classifier.pair else None
        probs, truncated, windows = classifier.classify([r.text for r in full], None, pairs) if full else ([], [], [])
        chosen = classifier.decide(probs) if full else None  # per-label decisions ride along with the scores
        results = iter(zip(probs, truncated, windows, *([chosen] if chosen is not None else [])))
        for record in chunk:
            if record.empty:
                writer.write(record, None, False)
                stats.empty += 1
                if len(stats.empty_lines) < 5:
                    stats.empty_lines.append(record.line)
            else:
                writer.write(record, *next(results))
        stats.texts += len(chunk)
        stats.truncated += sum(truncated)
        stats.windows += sum(windows)
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()


def add_inference_options(p: argparse.ArgumentParser, batch_size: int, streaming: bool = True,
                          max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
    """The batching, thread and long-text flags shared (same names, same meaning) by this script
    and `tfm-cls predict` (`tfm-cls eval`: no `streaming` ones); a long-text flag left out keeps
    the model's own setting. `max_tokens`: the engine's default budget (onnxruntime's is smaller)."""
    if streaming:
        p.add_argument("--batching", choices=BATCHINGS, default="tokens",
                       help="tokens: length-sorted batches of up to --max-tokens padded tokens (default); "
                            "fixed: length-sorted batches of --batch-size texts")
        p.add_argument("--max-tokens", type=int, default=max_tokens,
                       help=f"padded tokens per batch with --batching tokens (default {max_tokens})")
        p.add_argument("--batch-size", type=int, default=batch_size,
                       help=f"texts per batch with --batching fixed (default {batch_size})")
        p.add_argument("--buffer-texts", type=int, default=8192,
                       help="texts read, sorted by length and batched at once; bounds memory (default 8192)")
    else:
        p.add_argument("--batch-size", type=int, default=batch_size, help=f"texts per batch (default {batch_size})")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: the runtime decides)")
    p.add_argument("--max-length", type=int, help="truncate to fewer tokens than the model's maximum")
    p.add_argument("--truncation", choices=TRUNCATIONS, help="keep the head, the tail or head+tail of a long text "
                   "(default: as the model was trained)")
    p.add_argument("--head-fraction", type=float, help="share of the kept tokens taken from the head with head+tail")
    p.add_argument("--chunk", action=argparse.BooleanOptionalAction, default=None,
                   help="classify long texts as overlapping windows and aggregate them (default: the model's setting)")
    p.add_argument("--stride", type=int, help="tokens each window shares with the previous one (default: a quarter of a window)")
    p.add_argument("--aggregate", choices=AGGREGATES, help="mean or max over the windows (default: the model's setting)")
    p.add_argument("--aggregate-scores", choices=AGGREGATE_SCORES,
                   help="aggregate the windows' logits or their probabilities (default: the model's setting)")


def long_text_overrides(args) -> dict[str, Any]:
    """The LongText fields set on the command line (the rest keep the model's values)."""
    given = {"truncation": args.truncation, "head_fraction": args.head_fraction, "chunk": args.chunk,
             "stride": args.stride, "aggregate": args.aggregate, "scores": args.aggregate_scores}
    return {k: v for k, v in given.items() if v is not None}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
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
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    sizes = {"--batch-size": args.batch_size, "--chunk-batches": args.chunk_batches, "--max-tokens": args.max_tokens,
             "--buffer-texts": args.buffer_texts}
    bad = [f"{flag}: expected a positive integer, got {value}" for flag, value in sizes.items()
           if value is not None and value < 1]
    if bad:
        print(f"error: {'; '.join(bad)}", file=sys.stderr)
        return 2
    stats = Stats()
    start = time.perf_counter()
    try:
        classifier = Classifier(
            args.model, [p.strip() for p in args.providers.split(",") if p.strip()], args.threads, args.max_length,
            long_text_overrides(args), args.batching, args.batch_size, args.max_tokens,
        )
        in_fmt = detect_format(args.input, args.input_format, INPUT_FORMATS, "txt")
        out_fmt = detect_format(args.output, args.output_format, OUTPUT_FORMATS, "jsonl")
        source = open_input(args.input)
        output = None if args.output == "-" else OutputFile(args.output)
        try:
            name = "<stdin>" if args.input == "-" else args.input
            pair_field = args.pair_field if classifier.pair else None
            records = read_records(source, name, in_fmt, args.text_field, args.invalid_utf8, stats, pair_field)
            sink = sys.stdout if output is None else output.stream
            classify_stream(classifier, records, Writer(sink, out_fmt, classifier.labels, classifier.head, classifier.policy.chunk), args, stats)
            if output is None:
                sys.stdout.flush()
            else:
                output.commit()
                output = None
        except OSError as err:
            if output is None:
                raise InferenceError(f"cannot write the output: {err.strerror or err}") from None
            raise output.error(err) from None
        finally:
            if output is not None:
                output.discard()
            if args.input != "-":
                source.close()
    except InferenceError as err:
        print(f"error: {err}", file=sys.stderr)  # the convention of `tfm-cls`: one line, exit 2
        return 2
    seconds = time.perf_counter() - start
    log.info("classified %d texts in %.1f s (%.0f texts/s)", stats.texts, seconds, stats.texts / max(seconds, 1e-9))
    if stats.empty:
        log.warning("%d empty lines (e.g. lines %s) got a row with \"empty\": true and no label", stats.empty,
                    stats.empty_lines)
    if stats.truncated:
        log.warning("truncated %d texts to %d tokens (%s)", stats.truncated, classifier.max_length,
                    classifier.policy.truncation)
    if classifier.policy.chunk and stats.windows > stats.texts - stats.empty:
        log.info("chunked inference: %d windows for %d texts", stats.windows, stats.texts - stats.empty)
    if stats.invalid_utf8:
        log.warning("replaced invalid UTF-8 on %d lines with U+FFFD", stats.invalid_utf8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
