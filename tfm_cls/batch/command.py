"""`tfm-cls batch`: classify a file, a folder or a glob of Parquet / JSONL / CSV with an exported
model on Ray Data, into a folder of Parquet (or JSONL) parts. docs/batch-inference.md

    tfm-cls batch --model model.onnx --input 'data/*.parquet' --output preds/
    tfm-cls batch --model /shared/model.onnx --input s3://bucket/docs/ --output s3://bucket/preds/ --address auto

Before the cluster classifies anything, the model is opened here (a file that is not a tfm_cls
export fails now) and every input file is read once by a Ray task (a missing column, a text that
is not a string, a pair without its second text fail now, naming the file and line); that pass
also counts the rows. Then: read -> OnnxClassifier actors (`--concurrency` of them, `--threads`
intra-op threads each, `--buffer-texts` texts a call), each call's rows written by the actor as
one part, under a temporary name and renamed. The run ends by checking that every input row is in the parts exactly
once and writing `_manifest.json`; on any failure the parts go and no manifest is written.

A row holds what `tfm-cls infer` writes for it (id, line, the prediction fields, truncated,
windows with chunking, empty) plus `path`, the input file it came from: join on (path, line), or
on id where the input has an `id` column. A null or blank text gets a row with `empty` true and no
label, as in `tfm-cls infer`; no row is dropped.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
import time
from typing import Any

from tfm_cls.batch import cluster, outputs
from tfm_cls.batch.inputs import FORMATS, count_file, list_inputs, read_file
from tfm_cls.errors import InferenceError
from tfm_cls.export.infer import add_inference_options, long_text_overrides

log = logging.getLogger("tfm_cls.batch")

DEFAULT_RAY_BATCH = 4096


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tfm-cls batch", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", required=True, help="an .onnx file written by `tfm-cls export`, at a path every node reads")
    p.add_argument("--input", required=True, help="a file, a folder or a glob of .parquet / .jsonl / .csv files "
                   "(local, or a filesystem URI: s3://, gs://, hdfs://, ...)")
    p.add_argument("--output", required=True, help="the output folder (created; local or a filesystem URI)")
    p.add_argument("--input-format", choices=FORMATS, help="default: from each file's extension")
    p.add_argument("--output-format", choices=outputs.OUTPUT_FORMATS, default="parquet", help="default: parquet")
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
    p.set_defaults(threads=1, buffer_texts=DEFAULT_RAY_BATCH)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    try:
        summary = run(args)
    except InferenceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(summary)
    return 0


def _check_sizes(args) -> None:
    sizes = {"--batch-size": args.batch_size, "--max-tokens": args.max_tokens, "--buffer-texts": args.buffer_texts,
             "--threads": args.threads, "--concurrency": args.concurrency}
    bad = [f"{flag}: expected a positive integer, got {value}" for flag, value in sizes.items()
           if value is not None and value < 1]
    if args.max_restarts < 0:
        bad.append(f"--max-restarts: expected 0 or more, got {args.max_restarts}")
    if bad:
        raise InferenceError("; ".join(bad))


def predictor_kwargs(args, pair: bool) -> dict[str, Any]:
    """The OnnxClassifier of every actor, as the flags say."""
    return {"model": args.model, "text_column": "text", "pair_column": "pair" if pair else None, "id_column": "id",
            "threads": args.threads, "max_length": args.max_length, "long_text": long_text_overrides(args),
            "batching": args.batching, "batch_size": args.batch_size, "max_tokens": args.max_tokens}


def run(args, predictor: type | None = None) -> str:
    """The whole command (main without the exit code): the JSON summary line, or an InferenceError.
    `predictor` replaces OnnxClassifier (a subclass; the tests' actor that dies)."""
    from tfm_cls.io import file_sha256
    from tfm_cls.runtime.ray_predictor import OnnxClassifier
    from tfm_cls.runtime.session import Classifier

    _check_sizes(args)
    if not args.address:
        cluster.local_environment()
    ray = cluster.import_ray()
    start = time.perf_counter()
    # Bad model or flags: fail here, before any cluster work.
    kwargs = predictor_kwargs(args, pair=False)
    probe = Classifier(args.model, None, 1, args.max_length, kwargs["long_text"], args.batching, args.batch_size,
                       args.max_tokens)
    kwargs = predictor_kwargs(args, probe.pair)
    files = list_inputs(args.input, args.input_format)
    created = outputs.prepare_folder(args.output, args.overwrite)
    started = False
    try:
        try:
            started = cluster.connect(args.address, temp_dir=args.temp_dir)
            import ray.data

            ray.data.DataContext.get_current().enable_progress_bars = not args.no_progress
            pair_field = args.pair_field if probe.pair else None
            # One CPU each: before the actors start, the CPUs are free, and a task of no CPU
            # would start a worker process per file at once.
            count = ray.remote(count_file).options(num_cpus=1, max_retries=3)
            expected = ray.get([count.remote(f, args.text_field, pair_field) for f in files])
            checked = time.perf_counter()
            concurrency = args.concurrency or max(1, cluster.cluster_cpus() // args.threads)
            reports = _pipeline(ray, files, args, pair_field, predictor or OnnxClassifier, kwargs, concurrency)
            problems = outputs.check_complete(expected, reports)
            if problems:
                raise InferenceError("the output is not every input row exactly once: " + "; ".join(problems[:5]))
            written = {r["file"] for r in reports if r["file"]}
            orphans = outputs.remove_parts(args.output, keep=written)
            rows = sum(e["rows"] for e in expected)
            seconds = time.perf_counter() - start
            parts = sorted(({"file": r["file"], "rows": r["rows"]} for r in reports if r["file"]),
                           key=lambda p: p["file"])
            outputs.write_manifest(args.output, {
                "rows": rows, "format": args.output_format, "parts": parts,
                "inputs": [{"path": e["path"], "rows": e["rows"]} for e in expected],
                "model": args.model, "model_sha256": file_sha256(args.model), "labels": probe.labels,
                "columns": _columns(probe, args.keep_text),
                "concurrency": concurrency, "threads": args.threads, "seconds": round(seconds, 3),
                "check_seconds": round(checked - start, 3),
            })
        except BaseException as err:
            outputs.remove_parts(args.output)
            if created:
                outputs.remove_if_empty(args.output)
            if isinstance(err, KeyboardInterrupt):
                raise
            known = cluster.user_error(err)
            if known is not None:
                raise InferenceError(str(known)) from None
            raise InferenceError(cluster.failure_message(err, args.max_restarts)) from None
    finally:
        if started:
            ray.shutdown()
    if orphans:
        log.info("removed %d parts of retried tasks that were never reported", orphans)
    return json.dumps({"output": args.output, "rows": rows, "parts": len(parts), "seconds": round(seconds, 3),
                       "texts_per_second": round(rows / max(seconds, 1e-9), 1)})


def _columns(probe, keep_text: bool) -> list[str]:
    from tfm_cls.runtime.ray_predictor import ROW_KEYS
    from tfm_cls.runtime.readers import Record
    from tfm_cls.runtime.writers import output_row

    row = output_row(Record("", "", 0), probe.head, probe.labels, None, False, 0 if probe.policy.chunk else None)
    texts = ["text", *(["pair"] if probe.pair else [])] if keep_text else []
    return ["id", "path", "line", *texts, *(k for k in row if k not in ROW_KEYS)]


def _read_files(batch, text_field: str, pair_field: str | None):
    """A Ray Data map step over the file list: the records of each file, as tables."""
    from tfm_cls.batch.inputs import InputFile

    for uri, name, fmt in zip(batch["uri"], batch["name"], batch["fmt"]):
        yield from read_file(InputFile(str(uri), str(name), str(fmt)), text_field, pair_field)


def retries(times: int) -> dict[str, int]:
    """The actors' fault tolerance: a dead actor is restarted, and its batch retried, `times`
    times (Ray Data's default is for ever, which turns a batch that kills every actor, an
    out-of-memory one, into a job that never ends)."""
    return {"max_restarts": times, "max_task_retries": times}


class PredictAndWrite:
    """The actor of the pipeline: the predictor, and the part each of its batches becomes, in one
    process (a separate writing step would move every prediction through the object store, and
    start a short-lived worker process per block on a full machine). Returns the part's report."""

    def __init__(self, predictor: type, predictor_kwargs: dict[str, Any], uri: str, fmt: str, drop: tuple[str, ...]):
        self.predictor = predictor(**predictor_kwargs)
        self.uri, self.fmt, self.drop = uri, fmt, drop

    def __call__(self, batch):
        return outputs.write_block(self.predictor(batch), self.uri, self.fmt, self.drop)


def _pipeline(ray, files, args, pair_field, predictor, kwargs, concurrency) -> list[dict]:
    """read -> predict and write parts; the reports of the parts written."""
    import ray.data

    items = [{"uri": f.uri, "name": f.name, "fmt": f.fmt} for f in files]
    drop = () if args.keep_text else ("text", "pair")
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    # Reading takes no CPU of its own: the actors hold the CPUs, and a step that waited for one
    # would wait for ever. A few tasks at a time: each is a worker process.
    readers = ray.data.TaskPoolStrategy(size=max(1, min(len(items), concurrency)))
    ds = ds.map_batches(_read_files, fn_kwargs={"text_field": args.text_field, "pair_field": pair_field},
                        batch_size=1, num_cpus=0, batch_format="numpy", compute=readers)
    ds = ds.map_batches(PredictAndWrite, fn_constructor_args=(predictor, kwargs, args.output, args.output_format, drop),
                        batch_size=args.buffer_texts, batch_format="pyarrow",
                        compute=ray.data.ActorPoolStrategy(size=concurrency), num_cpus=args.threads,
                        ray_remote_args_fn=functools.partial(retries, args.max_restarts))
    return ds.take_all()
