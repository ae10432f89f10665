"""The run's wall-clock budget (`train.wall_minutes`): from the start of the process to the written run
directory, measured as it goes, not estimated once.

    clock = WallClock(cfg.train.wall_minutes, started=process_started(), finish_rows=...)
    Engine(..., clock=clock)      # stops the loop when the time left is what the end of the run needs
    clock.left(), clock.affords(seconds)   # the steps after the loop shrink when it says no

What the end of the run needs (`reserve`) is measured: each validation pass tells the engine the
seconds a row costs the model (`measured`), and the end scores `finish_rows` rows with it (the
candidates' validation, the test split for the shipped model and the one not shipped), plus a fixed
FIXED_SECONDS for the speed measurements, the files and the card. Nothing here is specific to
classification.
"""

from __future__ import annotations

import logging
import math
import os
import time

logger = logging.getLogger(__name__)

FIXED_SECONDS = 30.0
"""The end of a run beyond scoring rows: timing each candidate (tfm_cls.classify.candidates, at most
10 s each), calibration, writing the weights, figures and the card."""

WRITE_SECONDS = 5.0
"""The very end of a run: calibration, the weights, figures and the card written (within FIXED_SECONDS)."""


def process_started() -> float:
    """time.monotonic() at this process's start (Linux /proc), so the budget covers loading and
    profiling too; time.monotonic() now where /proc is not there."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time after boot
        return time.monotonic() - max(0.0, uptime - started)
    except (OSError, ValueError, IndexError):
        return time.monotonic()


class WallClock:
    """A budget of `minutes` (None: none) counted from `started` (a time.monotonic() value)."""

    def __init__(self, minutes: float | None, started: float | None = None, finish_rows: int = 0) -> None:
        self.budget = minutes * 60.0 if minutes else None
        self.started = time.monotonic() if started is None else started
        self.finish_rows = finish_rows
        self.seconds_per_row: float | None = None
        self.loop_seconds: float | None = None
        """Seconds the steps before the training loop leave it, where a plan decided (None: theirs to
        choose; tfm_cls.classify.wide_fit.plan_loop)."""
        self.shrunk: list[str] = []  # what the budget cut short, in the order it happened (metrics.json)
        self.took: dict[str, float] = {}
        """Seconds steps of the run took, by name, for later steps to estimate theirs by (`took[...]`)."""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        """Seconds left of the budget (inf without one; negative once over)."""
        return math.inf if self.budget is None else self.budget - self.elapsed()

    def measured(self, seconds: float, rows: int) -> None:
        """A pass of the model over `rows` rows took `seconds` (the engine's validation)."""
        if rows > 0:
            self.seconds_per_row = seconds / rows

    def reserve(self) -> float:
        """Seconds the end of the run is measured to need."""
        return self.reserve_at(self.seconds_per_row or 0.0)

    def reserve_at(self, seconds_per_row: float) -> float:
        """Seconds the end of the run would need where the model costs `seconds_per_row`."""
        return FIXED_SECONDS + seconds_per_row * self.finish_rows

    def shrink(self, what: str) -> None:
        """Say (a warning, and `shrunk` for metrics.json) that the budget cut `what` short."""
        self.shrunk.append(what)
        logger.warning("wall-clock budget: %s", what)

    def affords(self, seconds: float) -> bool:
        """Whether `seconds` more fit in what is left."""
        return seconds <= self.left()

    def stop_reason(self, next_step: float = 0.0) -> str | None:
        """Why the loop stops now (the time left is what the end needs, after a step as long as the last,
        `next_step` seconds: a 90-label set's long documents took 20 s a step), or None."""
        if self.budget is None or self.left() > self.reserve() + next_step:
            return None
        return (f"wall-clock budget: {max(self.left(), 0):.0f} s left of {self.budget / 60:g} minutes, and the end "
                f"of the run is measured to need {self.reserve():.0f} s" + (f" after a step of ~{next_step:.0f} s"
                                                                           if next_step >= 1 else ""))
