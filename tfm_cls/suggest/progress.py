"""How far the pool's vectors are, and how long is left: a tqdm bar on a terminal, else (a log file, a
pipe, CI) a log line at most every LOG_EVERY seconds — never minutes of silence."""

from __future__ import annotations

import logging
import sys
import time

logger = logging.getLogger("tfm_cls.suggest")

LOG_EVERY = 20.0
"""Seconds between two log lines where there is no terminal (the target: one at least every 30 s)."""


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Progress:
    """`total` units (texts) of `what`; `advance_to(done)` as they go (a float is fine: a share of a
    chunk), `close()` at the end. `tty=None`: a bar where stderr is a terminal."""

    def __init__(self, total: int, what: str = "pool vectors", unit: str = "texts", every: float | None = None,
                 tty: bool | None = None, clock=time.monotonic) -> None:
        self.total, self.what, self.unit, self.clock = total, what, unit, clock
        self.every = LOG_EVERY if every is None else every
        self.start = self.last = clock()
        self.done = 0.0
        self.bar = None
        if (sys.stderr.isatty() if tty is None else tty) and total:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=what, unit=unit[:-1] if unit.endswith("s") else unit,
                                file=sys.stderr, dynamic_ncols=True, delay=0.5)
            except ImportError:  # tqdm is a base dependency; without it, the log lines
                self.bar = None
        if self.bar is None and total:  # at once: what came before (reading, tokenizing) may have taken a while
            logger.info("%s: %d %s to go", what, total, unit)

    def line(self) -> str:
        """`pool vectors: 1200 of 3000 texts (40%), 45 texts/s, about 40 s left`."""
        elapsed = self.clock() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        left = f"about {_duration((self.total - self.done) / rate)} left" if rate > 0 else "time left unknown yet"
        return (f"{self.what}: {int(self.done)} of {self.total} {self.unit} ({self.done / max(self.total, 1):.0%}), "
                f"{rate:.0f} {self.unit}/s, {left}")

    def advance_to(self, done: float) -> None:
        done = min(float(done), float(self.total))
        if self.bar is not None:
            self.bar.update(done - self.done)
            self.done = done
            return
        self.done = done
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            logger.info(self.line())

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.clock() - self.start >= self.every:  # a long run says it ended; a short one needs no more
            logger.info("%s: %d %s in %s", self.what, int(self.done), self.unit, _duration(self.clock() - self.start))
