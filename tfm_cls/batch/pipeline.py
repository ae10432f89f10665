"""The pipeline of `tfm-cls batch` (its flags: tfm_cls/cli/batch.py): classify a file, a folder or a
glob of Parquet / JSONL / CSV with an exported model on Ray Data, into a folder of Parquet (or
JSONL) parts. docs/batch-inference.md

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

import dataclasses
import functools
import json
import logging
import time
from typing import Any

from tfm_cls.batch import cluster, outputs
from tfm_cls.batch.inputs import count_file, list_inputs, read_file
from tfm_cls.errors import InferenceError
from tfm_cls.runtime.batching import DEFAULT_MAX_TOKENS

log = logging.getLogger("tfm_cls.batch")

DEFAULT_RAY_BATCH = 4096


@dataclasses.dataclass(kw_only=True)
class BatchJob:
    """One run of the pipeline: what to classify, where to, on which cluster, and how."""

    model: str
    """An .onnx file written by `tfm-cls export`, at a path every node reads."""
    input: str
    """A file, a folder or a glob of .parquet / .jsonl / .csv files (local or a filesystem URI)."""
    output: str
    """The output folder (created; local or a filesystem URI)."""
    input_format: str | None = None
    """parquet, jsonl or csv; None: from each file's extension."""
    output_format: str = "parquet"
    text_field: str = "text"
    pair_field: str = "text_pair"
    """Sentence-pair models: the second text's key or column."""
    address: str | None = None
    """An existing Ray cluster (auto, HOST:6379, ray://HOST:10001); None: a local one of this machine's CPUs."""
    concurrency: int | None = None
    """Inference actors; None: the cluster's CPUs / threads."""
    max_restarts: int = 3
    """Times a dead actor is restarted and its batch retried before the run fails."""
    keep_text: bool = False
    overwrite: bool = False
    temp_dir: str | None = None
    """A local cluster's session folder; None: Ray's (/tmp/ray)."""
    progress: bool = True
    threads: int = 1
    """Intra-op threads of each actor (one CPU each)."""
    buffer_texts: int = DEFAULT_RAY_BATCH
    """Texts of one Ray batch: sorted by length and cut into batches inside the actor, one part each."""
    batching: str = "tokens"
    batch_size: int = 32
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_length: int | None = None
    long_text: dict[str, Any] = dataclasses.field(default_factory=dict)
    """LongText fields that override the export's long-text policy."""


def predictor_kwargs(job: BatchJob, pair: bool) -> dict[str, Any]:
    """The OnnxClassifier of every actor, as the job says."""
    return {"model": job.model, "text_column": "text", "pair_column": "pair" if pair else None, "id_column": "id",
            "threads": job.threads, "max_length": job.max_length, "long_text": job.long_text,
            "batching": job.batching, "batch_size": job.batch_size, "max_tokens": job.max_tokens}


def run(job: BatchJob, predictor: type | None = None) -> str:
    """The whole job: the JSON summary line, or an InferenceError (one line) after removing every
    part. `predictor` replaces OnnxClassifier (a subclass; the tests' actor that dies)."""
    from tfm_cls.runtime.ray_predictor import OnnxClassifier
    from tfm_cls.runtime.session import Classifier

    if not job.address:
        cluster.local_environment()
    ray = cluster.import_ray()
    start = time.perf_counter()
    # Bad model or flags: fail here, before any cluster work.
    probe = Classifier(job.model, None, 1, job.max_length, job.long_text, job.batching, job.batch_size, job.max_tokens)
    files = list_inputs(job.input, job.input_format)
    created = outputs.prepare_folder(job.output, job.overwrite)
    started = False
    try:
        try:
            started = cluster.connect(job.address, temp_dir=job.temp_dir)
            summary, orphans = _run_on_cluster(ray, job, probe, files, predictor or OnnxClassifier, start)
        except BaseException as err:
            outputs.remove_parts(job.output)
            if created:
                outputs.remove_if_empty(job.output)
            if isinstance(err, KeyboardInterrupt):
                raise
            known = cluster.user_error(err)
            if known is not None:
                raise InferenceError(str(known)) from None
            raise InferenceError(cluster.failure_message(err, job.max_restarts)) from None
    finally:
        if started:
            ray.shutdown()
    if orphans:
        log.info("removed %d parts of retried tasks that were never reported", orphans)
    return json.dumps(summary)


def _run_on_cluster(ray, job: BatchJob, probe, files, predictor: type, start: float) -> tuple[dict[str, Any], int]:
    """Count every input's rows (checking them), classify them into parts, check that every row is
    in the parts exactly once and write the manifest: (the summary, the parts removed as orphans)."""
    import ray.data

    from tfm_cls.io import file_sha256

    ray.data.DataContext.get_current().enable_progress_bars = job.progress
    pair_field = job.pair_field if probe.pair else None
    # One CPU each: before the actors start, the CPUs are free, and a task of no CPU
    # would start a worker process per file at once.
    count = ray.remote(count_file).options(num_cpus=1, max_retries=3)
    expected = ray.get([count.remote(f, job.text_field, pair_field) for f in files])
    checked = time.perf_counter()
    concurrency = job.concurrency or max(1, cluster.cluster_cpus() // job.threads)
    reports = _pipeline(ray, files, job, pair_field, predictor, predictor_kwargs(job, probe.pair), concurrency)
    problems = outputs.check_complete(expected, reports)
    if problems:
        raise InferenceError("the output is not every input row exactly once: " + "; ".join(problems[:5]))
    written = {r["file"] for r in reports if r["file"]}
    orphans = outputs.remove_parts(job.output, keep=written)
    rows = sum(e["rows"] for e in expected)
    seconds = time.perf_counter() - start
    parts = sorted(({"file": r["file"], "rows": r["rows"]} for r in reports if r["file"]), key=lambda p: p["file"])
    outputs.write_manifest(job.output, {
        "rows": rows, "format": job.output_format, "parts": parts,
        "inputs": [{"path": e["path"], "rows": e["rows"]} for e in expected],
        "model": job.model, "model_sha256": file_sha256(job.model), "labels": probe.labels,
        "columns": _columns(probe, job.keep_text),
        "concurrency": concurrency, "threads": job.threads, "seconds": round(seconds, 3),
        "check_seconds": round(checked - start, 3),
    })
    summary = {"output": job.output, "rows": rows, "parts": len(parts), "seconds": round(seconds, 3),
               "texts_per_second": round(rows / max(seconds, 1e-9), 1)}
    return summary, orphans


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


def _pipeline(ray, files, job: BatchJob, pair_field, predictor, kwargs, concurrency) -> list[dict]:
    """read -> predict and write parts; the reports of the parts written."""
    import ray.data

    items = [{"uri": f.uri, "name": f.name, "fmt": f.fmt} for f in files]
    drop = () if job.keep_text else ("text", "pair")
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    # Reading takes no CPU of its own: the actors hold the CPUs, and a step that waited for one
    # would wait for ever. A few tasks at a time: each is a worker process.
    readers = ray.data.TaskPoolStrategy(size=max(1, min(len(items), concurrency)))
    ds = ds.map_batches(_read_files, fn_kwargs={"text_field": job.text_field, "pair_field": pair_field},
                        batch_size=1, num_cpus=0, batch_format="numpy", compute=readers)
    ds = ds.map_batches(PredictAndWrite, fn_constructor_args=(predictor, kwargs, job.output, job.output_format, drop),
                        batch_size=job.buffer_texts, batch_format="pyarrow",
                        compute=ray.data.ActorPoolStrategy(size=concurrency), num_cpus=job.threads,
                        ray_remote_args_fn=functools.partial(retries, job.max_restarts))
    return ds.take_all()
