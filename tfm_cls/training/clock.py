"""The run's wall-clock budget (`train.wall_minutes`): from the start of the process to the written run
directory, measured as it goes, not estimated once. The one object that makes the run's time decisions;
the figures it decides by are tfm_cls.training.budget's.

    clock = WallClock(cfg.train.wall_minutes, started=process_started())
    clock.rows_in_share(TOKENIZE_SHARE, seconds_per_text)   # tokenizing: how many training texts fit its share
    clock.set_finish_rows(rows)                            # once tokenized: the texts the end of the run scores
    clock.plan_loop(finish_seconds)                        # before the bags: what they leave the encoder's loop
    clock.warm_start_deadline(), clock.warm_start_affords(seconds), clock.warm_start_spent()
    clock.record(FIRST_FIT, seconds), clock.recorded(FIRST_FIT)   # a stage's seconds, for a later one to go by
    Engine(..., clock=clock)                               # stops the loop when the time left is what the end needs
    clock.affords_scoring(seconds), clock.affords_before_writing(seconds)   # the end's steps shrink when it says no
    clock.shrink(what), clock.shrunk                       # what the budget cut short (metrics.json)

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

from tfm_cls.training import budget

logger = logging.getLogger(__name__)


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
    """A budget of `minutes` (None: none) counted from `started` (a time.monotonic() value). Its state is
    written only through its methods: `budget`, `started`, `finish_rows`, `seconds_per_row`, `loop_seconds`
    and `shrunk` are there to read."""

    def __init__(self, minutes: float | None, started: float | None = None, finish_rows: int = 0) -> None:
        self.budget = minutes * 60.0 if minutes else None
        self.started = time.monotonic() if started is None else started
        self.finish_rows = finish_rows
        self.seconds_per_row: float | None = None
        self.shrunk: list[str] = []  # what the budget cut short, in the order it happened (metrics.json)
        self._loop_seconds: float | None = None
        self._took: dict[str, float] = {}

    # ---- the budget and what is left -------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        """Seconds left of the budget (inf without one; negative once over)."""
        return math.inf if self.budget is None else self.budget - self.elapsed()

    def affords(self, seconds: float) -> bool:
        """Whether `seconds` more fit in what is left."""
        return seconds <= self.left()

    def shrink(self, what: str) -> None:
        """Say (a warning, and `shrunk` for metrics.json) that the budget cut `what` short."""
        self.shrunk.append(what)
        logger.warning("wall-clock budget: %s", what)

    def share(self, fraction: float) -> float:
        """Seconds of `fraction` of the budget (it has one)."""
        return fraction * self.budget

    def rows_in_share(self, fraction: float, seconds_per_row: float) -> int:
        """Rows at `seconds_per_row` that `fraction` of the budget holds (tokenizing: TOKENIZE_SHARE)."""
        return int(self.share(fraction) / max(seconds_per_row, 1e-9))

    # ---- stages' seconds, for later stages to go by -------------------------------------------------

    def record(self, stage: str, seconds: float) -> None:
        """`stage` took `seconds` (the last record of a stage stands): a later step estimates its own by it."""
        self._took[stage] = seconds

    def recorded(self, stage: str) -> float:
        """The seconds `stage` was recorded to take; 0 where it was not."""
        return self._took.get(stage, 0.0)

    # ---- the end of the run ------------------------------------------------------------------------

    def set_finish_rows(self, rows: int) -> None:
        """The end of the run scores `rows` texts with the trained model (known once the splits are tokenized)."""
        self.finish_rows = rows

    def measured(self, seconds: float, rows: int) -> None:
        """A pass of the model over `rows` rows took `seconds` (the engine's validation)."""
        if rows > 0:
            self.seconds_per_row = seconds / rows

    def reserve(self) -> float:
        """Seconds the end of the run is measured to need."""
        return self.reserve_at(self.seconds_per_row or 0.0)

    def reserve_at(self, seconds_per_row: float) -> float:
        """Seconds the end of the run would need where the model costs `seconds_per_row`."""
        return budget.FIXED_SECONDS + seconds_per_row * self.finish_rows

    def affords_scoring(self, seconds: float) -> bool:
        """Whether the end may score a candidate measured to take `seconds` on test: a cheap one
        (CHEAP_SECONDS) always, else where it and the end's FIXED_SECONDS fit."""
        return seconds <= budget.CHEAP_SECONDS or self.affords(seconds + budget.FIXED_SECONDS)

    def affords_before_writing(self, seconds: float) -> bool:
        """Whether `seconds` more fit and still leave the very end its WRITE_SECONDS (the baseline, the last
        scoring: then only files are written)."""
        return self.affords(seconds + budget.WRITE_SECONDS)

    # ---- the encoder's loop ------------------------------------------------------------------------

    def stop_reason(self, next_step: float = 0.0) -> str | None:
        """Why the loop stops now (the time left is what the end needs, after a step as long as the last,
        `next_step` seconds: a 90-label set's long documents took 20 s a step), or None."""
        if self.budget is None or self.left() > self.reserve() + next_step:
            return None
        return (f"wall-clock budget: {max(self.left(), 0):.0f} s left of {self.budget / 60:g} minutes, and the end "
                f"of the run is measured to need {self.reserve():.0f} s" + (f" after a step of ~{next_step:.0f} s"
                                                                           if next_step >= 1 else ""))

    @property
    def loop_seconds(self) -> float | None:
        """Seconds the steps before the training loop leave it, where a plan decided (None: theirs to
        choose; `plan_loop`, `hold_loop`)."""
        return self._loop_seconds

    def hold_loop(self, seconds: float) -> None:
        """The steps before the loop leave it `seconds` (`plan_loop` decides them; a test may set them)."""
        self._loop_seconds = seconds

    def plan_loop(self, finish_seconds: float) -> float | None:
        """Decide, before the warm start, what it leaves the encoder's loop (`loop_seconds`): its
        LOOP_SHARE of the budget where at least MIN_TRAINING_SHARE of that would train, else only a margin
        (UNHELD_SHARE of it), and the share goes to the bags' fits. `finish_seconds`: what the end of the run
        would need to score the trained encoder (a probe of the model's cost, `reserve_at` it).
        The loop trains from where the warm start ends until the end's need is what is left (the engine):
        for the share and the end's unmeasured reserve, less that need. On tnews (5 minutes, 15,336
        validation and test texts) the end needed 135-171 s, the share is 120 s: the loop trained 0-31 steps
        (25 s) that moved nothing, while the bag of triples went without its folds (docs/recipe.md). Returns
        the seconds held (None without a budget)."""
        if self.budget is None:
            return None
        share = budget.LOOP_SHARE * self.budget
        training = share + self.reserve() - finish_seconds
        self.hold_loop(share if training >= budget.MIN_TRAINING_SHARE * share else budget.UNHELD_SHARE * share)
        if self._loop_seconds < share:
            self.shrink(f"the encoder's loop is not held its share ({share:.0f} s): it would train "
                        f"~{max(training, 0):.0f} s, scoring the trained encoder at the end needing "
                        f"~{finish_seconds:.0f} s; the bags' fits take it")
        return self._loop_seconds

    def loop_held(self) -> float:
        """Seconds the warm start leaves the loop: the plan's (`plan_loop`), else LOOP_SHARE of the budget
        (it has one)."""
        return budget.LOOP_SHARE * self.budget if self._loop_seconds is None else self._loop_seconds

    # ---- the warm start's share (tfm_cls.bag.fit, warm_start, second) ------------------------------

    def warm_start_deadline(self) -> float | None:
        """When (time.monotonic()) the warm start's fits must stop to leave the loop its time (`loop_held`)
        and the end of the run its reserve; None without a budget."""
        if self.budget is None:
            return None
        return time.monotonic() + self.left() - self.loop_held() - self.reserve()

    def warm_start_spent(self) -> bool:
        """Whether the warm start's share of the budget (`warm_start_deadline`) is spent."""
        deadline = self.warm_start_deadline()
        return deadline is not None and time.monotonic() >= deadline

    def warm_start_affords(self, seconds: float) -> bool:
        """Whether the warm start may spend `seconds` more and still leave the loop its time (`loop_held`) and
        the end of the run its reserve (always, without a budget)."""
        if self.budget is None:
            return True
        return self.affords(seconds + self.loop_held() + self.reserve())
