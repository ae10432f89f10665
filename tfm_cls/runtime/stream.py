"""Classify a file (or stdin) with an exported model in bounded memory: the work of `tfm-cls infer`
and `python export/infer.py` (their flags: tfm_cls/cli/infer.py).

Texts are read in buffers (`buffer_texts`), each sorted by length and cut into batches by the
Classifier, and written back in input order as they are done, so memory stays bounded on inputs of
any size. Exactly one row per input line / csv row; an empty line gets a row with "empty": true and
no label. Torch-free: onnxruntime, tokenizers, numpy (tqdm for the bar, if installed).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.batching import RUNTIME_MAX_TOKENS
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
from tfm_cls.runtime.writers import OUTPUT_FORMATS, OutputFile, Writer

log = logging.getLogger("tfm_cls.infer")  # the name its log lines have always carried


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


def classify_stream(classifier: Classifier, records: Iterable[Record], writer: Writer, stats: Stats,
                    buffer_texts: int, progress: bool = True) -> None:
    """Write one row per record, in order: `buffer_texts` records at a time are classified (the
    Classifier sorts them by length into batches), empty ones get a row without a prediction.
    Counts texts, empty lines, truncated texts and windows into `stats`."""
    bar = _progress(not progress)
    # A chunk is sorted by length and cut into batches; its size bounds the memory used.
    for chunk in chunks(records, buffer_texts):
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


def classify_file(
    model: str, input: str = "-", output: str = "-", *, providers: list[str] | None = None, threads: int = 0,
    max_length: int | None = None, long_text: dict[str, Any] | None = None, batching: str = "tokens",
    batch_size: int = 32, max_tokens: int = RUNTIME_MAX_TOKENS, buffer_texts: int = 8192,
    input_format: str | None = None, output_format: str | None = None, text_field: str = "text",
    pair_field: str = "text_pair", invalid_utf8: str = "error", progress: bool = True,
) -> Stats:
    """Classify `input` (txt / jsonl / csv / tsv; `-`: stdin) with the export `model` into `output`
    (jsonl / csv; `-`: stdout). A file is written under a temporary name and renamed when complete,
    never left partial. Formats default to the extensions (stdin txt, stdout jsonl); `pair_field`
    is read for sentence-pair models only. Bad input or model: an InferenceError naming it. Logs a
    summary (texts/s, empty, truncated, windows, replaced UTF-8) and returns the counts."""
    stats = Stats()
    start = time.perf_counter()
    classifier = Classifier(model, providers, threads, max_length, long_text, batching, batch_size, max_tokens)
    in_fmt = detect_format(input, input_format, INPUT_FORMATS, "txt")
    out_fmt = detect_format(output, output_format, OUTPUT_FORMATS, "jsonl")
    source = open_input(input)
    target = None if output == "-" else OutputFile(output)
    try:
        name = "<stdin>" if input == "-" else input
        records = read_records(source, name, in_fmt, text_field, invalid_utf8, stats,
                               pair_field if classifier.pair else None)
        sink = sys.stdout if target is None else target.stream
        writer = Writer(sink, out_fmt, classifier.labels, classifier.head, classifier.policy.chunk)
        classify_stream(classifier, records, writer, stats, buffer_texts, progress)
        if target is None:
            sys.stdout.flush()
        else:
            target.commit()
            target = None
    except OSError as err:
        if target is None:
            raise InferenceError(f"cannot write the output: {err.strerror or err}") from None
        raise target.error(err) from None
    finally:
        if target is not None:
            target.discard()
        if input != "-":
            source.close()
    _log_summary(classifier, stats, time.perf_counter() - start)
    return stats


def _log_summary(classifier: Classifier, stats: Stats, seconds: float) -> None:
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
