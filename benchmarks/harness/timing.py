"""Paired rounds: every system runs once per round, in turn, so a change of load on a shared
machine slows them alike; medians over the rounds, and ratios taken within each round before the
median (a round's ratio compares two passes that saw the same load)."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


@dataclasses.dataclass
class Rounds:
    """Seconds of every timed call of each system, wall clock and this process's CPU time, and
    what each system's last call returned."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]
    outputs: dict[str, Any]

    def median(self, name: str, clock: str = "wall") -> float:
        """Median seconds of `name` (clock: wall or cpu)."""
        return statistics.median(getattr(self, clock)[name])

    def percentile(self, name: str, q: float) -> float:
        """The q-th percentile of `name`'s wall seconds."""
        return float(np.percentile(self.wall[name], q))

    def ratio(self, name: str, reference: str, clock: str = "wall") -> float:
        """Median over rounds of reference seconds / name seconds: > 1 when `name` is faster."""
        times = getattr(self, clock)
        return statistics.median(r / n for n, r in zip(times[name], times[reference]))


def paired_rounds(fns: dict[str, Callable[[], Any]], rounds: int, warmup: int = 1, min_seconds: float = 0.0,
                  max_rounds: int | None = None) -> Rounds:
    """Call each of `fns` `warmup` times in turn, then time `rounds` rounds of one call each, in
    turn; with `min_seconds`, more rounds until that much time has passed (at most `max_rounds`,
    default 20 x rounds)."""
    outputs: dict[str, Any] = {}
    for _ in range(warmup):
        for name, fn in fns.items():
            outputs[name] = fn()
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    limit = max_rounds if max_rounds is not None else 20 * rounds
    start, done = time.perf_counter(), 0
    while done < rounds or (time.perf_counter() - start < min_seconds and done < limit):
        for name, fn in fns.items():
            w, c = time.perf_counter(), time.process_time()
            outputs[name] = fn()
            cpu[name].append(time.process_time() - c)
            wall[name].append(time.perf_counter() - w)
        done += 1
    return Rounds(wall, cpu, outputs)


def median_seconds(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall seconds of `repeats` calls of one system alone (no warm-up), and its last result."""
    rounds = paired_rounds({"fn": fn}, repeats, warmup=0)
    return rounds.median("fn"), rounds.outputs["fn"]
