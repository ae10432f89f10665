"""A trained classifier's predictions: logits and metrics over a tokenized split (the training
engine's evaluation, DDP-aware), and batch prediction of texts read from txt / jsonl / csv / stdin
(`predict_file`: the work of `tfm-cls predict`)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from tfm_cls.classify.heads import Head, head_for
from tfm_cls.data.tokenized import LengthBucketSampler, TokenizedSplit, batch_loader
from tfm_cls.data.tokenizer import PAD_ID, load_tokenizer_str, long_text_of, max_length_of, text_encoder
from tfm_cls.errors import InferenceError, InputError
from tfm_cls.io import atomic_path, disk_full_error, is_disk_full
from tfm_cls.runs import LoadedRun, load_run
from tfm_cls.runtime.batching import DEFAULT_MAX_TOKENS, pad_batch, pad_types, plan_batches
from tfm_cls.runtime.readers import Record, Stats, chunks, open_input, read_records
from tfm_cls.runtime.text import LongText, TextEncoder, aggregate_windows, encode_pairs
from tfm_cls.runtime.writers import output_row
from tfm_cls.training import distributed as D
from tfm_cls.training.precision import Precision

logger = logging.getLogger(__name__)


# ---- a tokenized split: logits and metrics ------------------------------------------------------------------------------------


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module, split: TokenizedSplit, batch_size: int, device: torch.device, pad_id: int = PAD_ID,
    *, env: D.DistEnv | None = None, amp: Precision | None = None,
) -> np.ndarray:
    """Logits [N, C] in the split's order (batches sorted by length for speed). Under DDP each
    rank predicts its shard and the rows are gathered: every rank gets all N rows, each once.
    A windowed split (chunked inference) gets the aggregate of each example's windows."""
    env = env or D.DistEnv(device=device)
    was_training = model.training
    model.eval()
    sampler = LengthBucketSampler(split.lengths, batch_size, shuffle=False, rank=env.rank, world_size=env.world_size)
    shard = [indices for indices in sampler.epoch_batches(0) if indices]
    rows, parts = [], []
    for indices, batch in zip(shard, batch_loader(split, shard, pad_id, device)):
        inputs = [batch["input_ids"], batch["attention_mask"]]
        if "token_type_ids" in batch:  # sentence pairs
            inputs.append(batch["token_type_ids"])
        with amp.autocast() if amp else contextlib.nullcontext():
            logits = model(*(t.to(device, non_blocking=True) for t in inputs))  # [B, C]
        rows.extend(indices)
        parts.append(logits.float().cpu().numpy())
    num_classes = model.config["num_classes"]
    local = np.concatenate(parts) if parts else np.zeros((0, num_classes), dtype=np.float32)  # [n_rank, C]
    indices = D.all_gather_rows(np.asarray(rows, dtype=np.int64), env)  # [N]
    gathered = D.all_gather_rows(local, env)  # [N, C]
    counts = np.bincount(indices, minlength=split.num_rows)
    if len(counts) != split.num_rows or not (counts == 1).all():
        raise RuntimeError(
            f"evaluation covered {int((counts > 0).sum())} of {split.num_rows} examples with {len(indices)} predictions: "
            "each example must be predicted exactly once"
        )
    out = np.empty((split.num_rows, num_classes), dtype=np.float32)
    out[indices] = gathered
    model.train(was_training)
    if split.windows is None:
        return out
    policy = split.policy or LongText(chunk=True)
    return aggregate_windows(out, split.windows, policy.aggregate, policy.scores)


def evaluate(
    model: torch.nn.Module, split: TokenizedSplit, labels: list[str], batch_size: int, device: torch.device,
    pad_id: int = PAD_ID, *, env: D.DistEnv | None = None, amp: Precision | None = None,
    head: Head | None = None, tune: bool = False,
) -> tuple[dict[str, Any], np.ndarray]:
    """Metrics (loss, accuracy, macro_f1, per_class, examples, seconds, texts_per_second) and the
    logits, over the whole split (gathered from every rank under DDP). `head` (tfm_cls.classify.heads):
    the metrics of another task type; `tune`: a multi-label head first tunes its thresholds on
    this split (validation)."""
    start = time.perf_counter()
    logits = predict_logits(model, split, batch_size, device, pad_id, env=env, amp=amp)
    seconds = time.perf_counter() - start
    head = head if head is not None else Head()
    if tune:
        head.tune(logits, split.labels)
    metrics = head.metrics(logits, split.labels, labels)
    metrics.update(examples=len(logits), seconds=seconds, texts_per_second=len(logits) / max(seconds, 1e-9))
    return metrics, logits


# ---- texts from a file: probabilities -----------------------------------------------------------------


def _format_of(path: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    suffix = Path(path).suffix.lower()
    return {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}.get(suffix, "txt")


@contextlib.contextmanager
def open_records(
    path: str, fmt: str = "auto", column: str = "text", invalid_utf8: str = "error", stats: Stats | None = None,
    pair_column: str | None = None,
) -> Iterator[Iterator[Record]]:
    """One Record per line (txt, jsonl) or row (csv, tsv) of `path` (`-` = stdin), empty ones
    included, read lazily (a file of any size in bounded memory) with the reader of `tfm-cls infer`
    (tfm_cls.runtime.readers), so both inference paths agree on what a line is: lines end at "\n"
    only; invalid UTF-8 is an InputError naming the line and byte offset unless
    `invalid_utf8="replace"` (counted in `stats`). `pair_column`: sentence pairs, each record's
    second text (a JSONL key or a CSV/TSV column). A bad line is an InputError when the iteration
    reaches it."""
    stats = stats if stats is not None else Stats()
    name = "<stdin>" if path == "-" else path
    try:
        stream = open_input(path)
    except InferenceError as err:
        raise InputError(str(err).replace("input file not found:", "input file does not exist:")) from None

    def records() -> Iterator[Record]:
        try:
            yield from read_records(stream, name, _format_of(path, fmt), column, invalid_utf8, stats, pair_column)
        except InferenceError as err:
            raise InputError(str(err)) from None

    try:
        yield records()
    finally:
        if path != "-":
            stream.close()


def run_policy(run: LoadedRun, **overrides: Any) -> LongText:
    """The run's long-text policy (its tokenizer config), with command-line overrides (None = keep).
    Chunking (windows aggregated per text) serves single-label runs on single texts; a sentence
    pair is truncated by the tokenizer, its longer text first, so it takes no other strategy."""
    policy = long_text_of(run.config.tokenizer, run.config.inference, **overrides)
    data = run.config.data
    if policy.chunk and (not run_head(run).chunkable or data.text_pair_column is not None):
        raise InputError(f"--chunk applies to single_label runs on single texts; {run.run_dir} is a "
                         f"{data.task}{' sentence-pair' if data.text_pair_column else ''} run")
    if data.text_pair_column is not None and policy.truncation != "head":
        raise InputError(f"--truncation applies to single texts; {run.run_dir} classifies sentence pairs "
                         "(truncated longer text first)")
    return policy


def run_head(run: LoadedRun) -> Head:
    """The head (tfm_cls.classify.heads) of a loaded run, with its tuned thresholds and calibration temperature."""
    return head_for(run.config, thresholds=run.thresholds, temperature=run.temperature)


@torch.no_grad()
def _row_logits(
    run: LoadedRun, ids: list[list[int]], types: list[list[int]] | None, batches: list[list[int]]
) -> np.ndarray:
    """Logits [len(ids), outputs] of model rows (with token types for sentence pairs), batch by
    batch, in row order."""
    device = next(run.model.parameters()).device
    pad_id = run.model.config.get("pad_token_id") or 0
    logits = np.zeros((len(ids), int(run.model.config["num_classes"])), dtype=np.float32)
    for rows in batches:
        input_ids, mask = pad_batch(ids, rows, pad_id)  # [B, T]
        args = [torch.from_numpy(input_ids).to(device), torch.from_numpy(mask).to(device)]
        if types is not None:
            args.append(torch.from_numpy(pad_types(types, rows, input_ids.shape[1])).to(device))  # [B, T]
        logits[rows] = run.model(*args).float().cpu().numpy()
    return logits


def _pair_rows(run: LoadedRun, texts: list[str], pairs: list[str], max_length: int | None):
    """Token ids, types and truncation flags of sentence pairs, the longer side truncated first."""
    from tfm_cls.data.tokenized import pair_truncation
    from tfm_cls.data.tokenizer import configure_truncation

    tokenizer = run.tokenizer if max_length is None else configure_truncation(run.tokenizer, max_length)
    tokenizer = pair_truncation(tokenizer)
    tokenizer.no_padding()  # each batch is padded to its own longest pair
    return encode_pairs(tokenizer, texts, pairs)


def texts_logits(
    run: LoadedRun, texts: list[str], pairs: list[str] | None = None, *, policy: LongText | None = None,
    batching: str = "tokens", batch_size: int = 64, max_tokens: int = DEFAULT_MAX_TOKENS,
    max_length: int | None = None, encoder: TextEncoder | None = None,
) -> tuple[np.ndarray, list[bool], list[int]]:
    """Logits [len(texts), outputs] in input order, whether each text was truncated and its number
    of windows: the PyTorch twin of the runtime's Classifier.classify (same encoder, same batches,
    same aggregation). Single texts are cut or windowed by the run's long-text policy (windows
    aggregated per text); (texts[i], pairs[i]) sentence pairs are truncated longer side first.
    Rows are sorted by length into batches (`tokens`: up to `max_tokens` padded tokens each;
    `fixed`: `batch_size` rows)."""
    if pairs is not None:
        ids, types, truncated = _pair_rows(run, texts, pairs, max_length)
        windows, chunked = [1] * len(texts), None
    else:
        encoder = encoder or text_encoder(run.tokenizer, policy or run_policy(run), max_length)
        enc = encoder.encode(texts)
        ids, types, truncated, windows = enc.ids, None, enc.truncated, enc.windows
        chunked = encoder.policy if encoder.policy.chunk else None
    logits = _row_logits(run, ids, types, plan_batches([len(x) for x in ids], batching, batch_size, max_tokens))
    if chunked is not None:
        logits = aggregate_windows(logits, windows, chunked.aggregate, chunked.scores)
    return logits, truncated, windows


def classify_texts(
    run: LoadedRun, texts: list[str], pairs: list[str] | None = None, **options: Any
) -> tuple[np.ndarray, list[bool], list[int]]:
    """The head's scores of `texts_logits` (probabilities [N, C]; regression values [N]), whether
    each text was truncated and its number of windows."""
    logits, truncated, windows = texts_logits(run, texts, pairs, **options)
    return run_head(run).scores(logits), truncated, windows


def predict_proba(
    run: LoadedRun, texts: list[str], batch_size: int = 64, *, batching: str = "tokens",
    max_tokens: int = DEFAULT_MAX_TOKENS, policy: LongText | None = None,
) -> np.ndarray:
    """The head's scores [len(texts), num_classes] (regression [len(texts)]), in input order."""
    return classify_texts(run, texts, batching=batching, batch_size=batch_size, max_tokens=max_tokens,
                          policy=policy)[0]


def predict_records(
    run: LoadedRun, records: Iterable[Record], batch_size: int = 64, *, policy: LongText | None = None,
    batching: str = "tokens", max_tokens: int = DEFAULT_MAX_TOKENS, buffer_texts: int = 8192,
    max_length: int | None = None,
) -> Iterator[dict[str, Any]]:
    """One output row per record, in order: the rows of `tfm-cls infer` (tfm_cls.runtime.writers:
    id, line, the head's fields, truncated, windows with chunking, empty); an empty record's row
    has no prediction and "empty": true. Records holding a second text are classified as pairs.
    Records are consumed `buffer_texts` at a time, so memory stays bounded."""
    head = run_head(run)
    policy = policy or run_policy(run)
    encoder = text_encoder(run.tokenizer, policy, max_length)  # a bad policy fails before the first row
    for chunk in chunks(records, buffer_texts):
        full = [r for r in chunk if not r.empty]
        pairs = [r.pair for r in full] if full and full[0].pair is not None else None
        logits, truncated, windows = texts_logits(
            run, [r.text for r in full], pairs, batching=batching, batch_size=batch_size, max_tokens=max_tokens,
            max_length=max_length, encoder=encoder,
        ) if full else (np.zeros((0, int(run.model.config["num_classes"])), dtype=np.float32), [], [])
        scores = head.scores(logits)
        chosen = head.decide(scores) if full else None
        results = iter(zip(scores, truncated, windows, *([chosen] if chosen is not None else [])))
        for record in chunk:
            if record.empty:
                yield output_row(record, head, run.labels, None, False, 0 if policy.chunk else None)
            else:
                score, cut, count, *picked = next(results)
                yield output_row(record, head, run.labels, score, cut, count if policy.chunk else None,
                                 picked[0] if picked else None)


def write_jsonl(records: Iterator[dict[str, Any]], out: TextIO) -> int:
    count = 0
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count


def predict_file(
    run_dir: str | Path, input: str = "-", output: str = "-", *, input_format: str = "auto", text_field: str = "text",
    pair_field: str | None = None, invalid_utf8: str = "error", device: str = "cpu", threads: int = 0,
    batch_size: int = 64, batching: str = "tokens", max_tokens: int = DEFAULT_MAX_TOKENS, buffer_texts: int = 8192,
    max_length: int | None = None, long_text: dict[str, Any] | None = None,
) -> int:
    """Predict every record of `input` (`open_records`; `-`: stdin) with the run in `run_dir` and write
    the rows of `predict_records` as JSONL to `output` (`-`: stdout; a file is written beside the
    target and renamed when complete, never left partial). `pair_field` defaults to the run's
    data.text_pair_column; `long_text` overrides the run's long-text policy; `threads` sets torch's
    intra-op threads (0: torch's default). Returns the number of rows written."""
    if threads:
        torch.set_num_threads(threads)
    run = load_run(run_dir, device=D.select_device(device))
    if max_length is not None:
        load_tokenizer_str(run.tokenizer.to_str(), max_length, max_length_of(run.tokenizer))  # checks it
    policy = run_policy(run, **(long_text or {}))
    stats = Stats()
    pair_field = pair_field or run.config.data.text_pair_column
    with open_records(input, input_format, text_field, invalid_utf8, stats, pair_field) as records:
        rows = predict_records(
            run, _counting(records, stats), batch_size, policy=policy, batching=batching, max_tokens=max_tokens,
            buffer_texts=buffer_texts, max_length=max_length,
        )
        if output == "-":
            count = write_jsonl(rows, sys.stdout)
        else:
            try:  # written beside the target and renamed when complete: never a partial file
                with atomic_path(output) as tmp, open(tmp, "w", encoding="utf-8") as out:
                    count = write_jsonl(rows, out)
            except OSError as err:
                if is_disk_full(err, Path(output).parent):
                    raise disk_full_error(output) from err
                raise
    empty = stats.empty
    logger.info("predicted %d texts -> %s%s", count - empty, output,
                f" ({empty} empty lines: rows with \"empty\": true and no label)" if empty else "")
    if stats.invalid_utf8:
        logger.warning("replaced invalid UTF-8 on %d lines with U+FFFD", stats.invalid_utf8)
    return count


def _counting(records: Iterable[Record], stats: Stats) -> Iterator[Record]:
    """Pass records through, counting the empty ones (the input is read lazily)."""
    for record in records:
        stats.empty += record.empty
        yield record
