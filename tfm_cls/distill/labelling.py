"""The teacher's outputs on the transfer set: computed once, in chunks, cached in the run directory.

    RUN/teacher_outputs/meta.json        teacher sha256, transfer-set sha256, counts
    RUN/teacher_outputs/chunk-00000.npy  outputs [chunk_size, num_outputs (+ pooled width)] float32, one file a chunk

Each chunk is written atomically as soon as it is done, so a killed run relabels at most one
chunk. The cache is keyed by the teacher's sha256 and the transfer set's: a cache made by another
teacher (or for other texts) is an error on --resume, and discarded on a fresh run.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from tfm_cls.distill.teacher import Teacher
from tfm_cls.errors import TeacherError
from tfm_cls.io import atomic_path, read_json, write_json

logger = logging.getLogger(__name__)

CACHE_DIR = "teacher_outputs"
META_FILE = "meta.json"


def _chunk_path(folder: Path, index: int) -> Path:
    return folder / f"chunk-{index:05d}.npy"


def _load_chunk(path: Path, rows: int, width: int) -> np.ndarray | None:
    """A finished chunk, or None where it is missing or does not have the expected shape."""
    if not path.is_file():
        return None
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    return array if array.shape == (rows, width) and array.dtype == np.float32 else None


def teacher_outputs(
    teacher: Teacher, texts: list[str], transfer_sha256: str, run_dir: Path, *, chunk_size: int, batch_size: int,
    resume: bool, progress: bool = True, features: bool = False, pairs: list[str] | None = None,
) -> tuple[np.ndarray, dict]:
    """Teacher outputs [len(texts), num_outputs] for the transfer set, from the cache where it has them
    (with `features`: [len(texts), num_outputs + the teacher's pooled width], logits first; with
    `pairs`, the second text of each sentence pair).
    Returns them with a report (texts labelled now / taken from the cache, seconds)."""
    folder = run_dir / CACHE_DIR
    width = len(teacher.labels) + (teacher.feature_width() if features else 0)
    meta = {
        "teacher_path": str(teacher.path), "teacher_sha256": teacher.sha256, "transfer_sha256": transfer_sha256,
        "texts": len(texts), "chunk_size": chunk_size, "outputs": width,
    }
    meta_path = folder / META_FILE
    if meta_path.is_file():
        saved = read_json(meta_path)
        keys = ("teacher_sha256", "transfer_sha256", "texts", "chunk_size", "outputs")
        differs = [k for k in keys if saved.get(k) != meta[k]]
        if differs:
            what = ", ".join(f"{k}: {saved.get(k)!r} -> {meta[k]!r}" for k in differs)
            if resume:
                raise TeacherError(
                    f"{folder}: the cached teacher outputs were made by another teacher or for another transfer set "
                    f"({what}); --resume would mix them; start over with --overwrite"
                )
            logger.warning("%s: discarding cached teacher outputs (%s)", folder, what)
            shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(meta_path, meta)

    n_chunks = -(-len(texts) // chunk_size)
    parts: list[np.ndarray | None] = []
    for c in range(n_chunks):
        rows = min(chunk_size, len(texts) - c * chunk_size)
        parts.append(_load_chunk(_chunk_path(folder, c), rows, width))
    cached = sum(len(p) for p in parts if p is not None)
    todo = [c for c, p in enumerate(parts) if p is None]
    if cached:
        logger.info("teacher outputs: %d of %d texts from the cache in %s", cached, len(texts), folder)
    start = time.perf_counter()
    if todo:
        logger.info("teacher (%s, %s) labels %d texts in %d chunk(s)", teacher.kind, teacher.path,
                    len(texts) - cached, len(todo))
    bar = tqdm(total=len(texts), initial=cached, desc="teacher labelling", unit="text", disable=not progress or not todo,
               leave=False, dynamic_ncols=True)
    for c in todo:
        chunk = texts[c * chunk_size : (c + 1) * chunk_size]
        second_texts = None if pairs is None else pairs[c * chunk_size : (c + 1) * chunk_size]
        out = (teacher.logits_and_features(chunk, batch_size, second_texts) if features
               else teacher.logits(chunk, batch_size, second_texts))
        out = np.ascontiguousarray(out, dtype=np.float32)  # [rows, C (+ D)]
        if out.shape != (len(chunk), width):
            raise TeacherError(f"teacher {teacher.path} returned outputs of shape {out.shape}, expected {(len(chunk), width)}")
        with atomic_path(_chunk_path(folder, c)) as tmp, open(tmp, "wb") as f:
            np.save(f, out, allow_pickle=False)
        parts[c] = out
        bar.update(len(chunk))
    bar.close()
    seconds = time.perf_counter() - start
    labelled = len(texts) - cached
    if labelled:
        logger.info("teacher labelled %d texts in %.1f s (%.0f texts/s)", labelled, seconds, labelled / max(seconds, 1e-9))
    outputs = np.concatenate(parts) if parts else np.zeros((0, width), np.float32)
    return outputs, {"labelled_texts": labelled, "cached_texts": cached, "labelling_seconds": seconds}
