"""Where a benchmark's results go: OUT/NAME-<time>.json (everything measured) and, where the
benchmark prints a table, OUT/NAME-<time>.md; `-quick` after the time for a --quick run, so a
smoke run is never taken for a measurement. Written atomically (tfm_cls.io): a killed run leaves
the previous complete file, and a long benchmark may rewrite its file after every row. NaN and
infinities are written as null."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.data import REPO
from tfm_cls.io import finite_or_none, write_text

OUT = REPO / "bench_results"
"""The default results folder (git-ignored)."""


class Results:
    """One benchmark run's result files, named once (the time is taken when it is made)."""

    def __init__(self, out: str | Path, name: str, quick: bool = False) -> None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.folder = Path(out)
        self.stem = f"{name}-{stamp}{'-quick' if quick else ''}"

    @property
    def json(self) -> Path:
        return self.folder / f"{self.stem}.json"

    def beside(self, suffix: str) -> Path:
        """A further file of this run (a figure: `.png`), named like its JSON."""
        return self.folder / f"{self.stem}{suffix}"

    def write(self, results: dict[str, Any], table: str | None = None) -> Path:
        """Write the JSON (and the Markdown table, when given); returns the JSON's path."""
        self.folder.mkdir(parents=True, exist_ok=True)
        write_text(self.json, json.dumps(finite_or_none(results), indent=2, ensure_ascii=False, default=_plain) + "\n")
        if table is not None:
            write_text(self.beside(".md"), table + "\n")
        return self.json


def _plain(value: Any) -> Any:
    """What json cannot write itself: paths as strings, numpy values as Python's (NaN: null)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return finite_or_none(value.tolist())
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def write_results(out: str | Path, name: str, results: dict[str, Any], table: str | None = None,
                  quick: bool = False) -> Path:
    """Write one run's results at once (Results(out, name, quick).write); returns the JSON's path."""
    return Results(out, name, quick).write(results, table)


def environment() -> dict[str, Any]:
    """The machine as a result records it: CPUs, load average now, platform, Python, the command."""
    return {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "platform": platform.platform(),
            "host": platform.node(), "python": platform.python_version(), "argv": sys.argv}


def paired_lead(right: np.ndarray, other_right: np.ndarray) -> dict[str, float]:
    """The accuracy lead of one system over another on the same texts (`right`, `other_right`: whether
    each got each text right) and its paired standard error."""
    d = np.asarray(right, dtype=np.float64) - np.asarray(other_right, dtype=np.float64)
    return {"lead": float(d.mean()), "se": float(d.std(ddof=1) / np.sqrt(len(d))), "texts": len(d)}


def lead_line(what: str, differences: list[float]) -> str:
    """One summary line under a paired table: on how many sets `what` is ahead (difference > 0) and
    the mean difference, in points (differences are fractions)."""
    return (f"{what} ahead on {sum(d > 0 for d in differences)} of {len(differences)} sets; mean difference "
            f"{100 * float(np.mean(differences)):+.2f} points")
