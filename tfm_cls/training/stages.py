"""The train job's stages, each timed with its peak memory: one log line as a stage ends, and the rows
metrics.json keeps (`stages`), so how a run's cost grows with its data can be read stage by stage.

    stages = StageLog()
    with stages.stage("tokenize"):
        ...
    stages.rows    # [{"stage": "tokenize", "seconds": 12.3, "peak_rss_mb": 812.0}, ...]

The peak is the process's resident high-water mark over the stage alone: Linux lets a process reset it
(`/proc/self/clear_refs`, "5"), read back as VmHWM in /proc/self/status; where that is not possible the
peak since the process began (ru_maxrss) stands, which is still an upper bound.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """The process's resident high-water mark, MB (since the last reset, where one was made)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


HEARTBEAT_SECONDS = 30.0
"""While a stage runs, a line at least this often, even where its work is a library's call that says
nothing (reading a JSON file into Arrow, one liblinear fit): a log read later never goes silent for long."""


class StageLog:
    """The stages a job ran, in order: their seconds and peak resident memory."""

    def __init__(self, heartbeat: float = HEARTBEAT_SECONDS) -> None:
        self.rows: list[dict[str, Any]] = []
        self.heartbeat = heartbeat

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        _reset_peak()
        started = time.monotonic()
        logger.debug("stage %s: started", name)
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.heartbeat):
                logger.info("stage %s: running, %.0f s so far, peak RSS %.0f MB", name, time.monotonic() - started,
                            peak_rss_mb())

        beating = threading.Thread(target=beat, name=f"stage {name}", daemon=True)
        beating.start()
        try:
            yield
        finally:  # a stage that failed says nothing more: its error is the one line the user reads
            done.set()
            beating.join()
        row = {"stage": name, "seconds": round(time.monotonic() - started, 2), "peak_rss_mb": round(peak_rss_mb(), 1)}
        self.rows.append(row)
        logger.info("stage %s: %.1f s, peak RSS %.0f MB", name, row["seconds"], row["peak_rss_mb"])
