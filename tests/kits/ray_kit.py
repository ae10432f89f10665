"""Helpers of the Ray tests: inputs written as JSONL / Parquet, `tfm-cls batch` run in this
process (on the session's Ray), its output folder read back, rows compared with `tfm-cls infer`'s."""

from __future__ import annotations

import glob
import json
import math
import os
from pathlib import Path

from tfm_cls.batch import pipeline
from tfm_cls.cli import batch as batch_command
from tfm_cls.cli import build_parser

INFER_TOL = 2e-6
"""Scores are rounded to 6 digits; batches padded differently may move a value by one in the last digit."""


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_parquet(path: Path, columns: dict) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path)
    return path


def text_rows(texts: list[str], pairs: list[str] | None = None) -> list[dict]:
    return [{"text": t, **({"text_pair": p} if pairs else {})} for t, p in zip(texts, pairs or texts)]


def batch(model: Path, src, out: Path, *flags: str, predictor=None) -> dict:
    """`tfm-cls batch` in this process; its summary (a JSON line) as a dict."""
    args = build_parser().parse_args(["batch", "--model", str(model), "--input", str(src), "--output", str(out),
                                      "--no-progress", "--concurrency", "1", *flags])
    return json.loads(pipeline.run(batch_command.job_of(args), predictor=predictor))


def read_output(out: Path) -> list[dict]:
    """Every row of an output folder's parts (Parquet or JSONL), in no particular order."""
    import pyarrow.parquet as pq

    rows = []
    for part in sorted(glob.glob(os.path.join(out, "part-*"))):
        if part.endswith(".parquet"):
            rows += pq.read_table(part).to_pylist()
        else:
            rows += [json.loads(line) for line in Path(part).read_text(encoding="utf-8").splitlines()]
    return rows


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=0, abs_tol=INFER_TOL)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def mismatches(infer_rows: list[dict], batch_rows: list[dict]) -> list[tuple]:
    """(infer row, batch row) pairs that differ on a key of the infer row (batch rows found by id;
    a missing one pairs with None)."""
    by_id = {r["id"]: r for r in batch_rows}
    out = []
    for row in infer_rows:
        other = by_id.get(row["id"])
        if other is None or not all(k in other and _same(row[k], other[k]) for k in row):
            out.append((row, other))
    return out
