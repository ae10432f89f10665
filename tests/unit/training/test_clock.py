"""The run's wall-clock budget (tfm_cls.training.clock): what is left, what the end of the run is
measured to need, and when the loop must stop."""

import math
import time

from tfm_cls.training.clock import FIXED_SECONDS, WallClock, process_started


def test_without_a_budget_nothing_stops():
    clock = WallClock(None)
    assert clock.left() == math.inf and clock.stop_reason() is None and clock.affords(1e9)


def test_the_reserve_grows_with_the_measured_cost_of_a_row_and_stops_the_loop():
    clock = WallClock(1.0, started=time.monotonic() - 20, finish_rows=1000)  # 40 s left
    assert clock.reserve() == FIXED_SECONDS and clock.stop_reason() is None
    clock.measured(seconds=5.0, rows=500)  # 0.01 s a row: the end needs 30 + 10 s
    assert abs(clock.reserve() - (FIXED_SECONDS + 10.0)) < 1e-9
    reason = clock.stop_reason()
    assert reason is not None and "wall-clock budget" in reason and "1 minutes" in reason
    assert not clock.affords(60.0) and clock.affords(1.0)


def test_the_process_started_before_now():
    started = process_started()
    assert started <= time.monotonic() and time.monotonic() - started < 24 * 3600


def test_a_step_as_long_as_the_last_is_taken_only_where_the_end_keeps_its_time():
    clock = WallClock(1.0, started=time.monotonic() - 20, finish_rows=0)  # 40 s left, the end needs 30
    assert clock.stop_reason(next_step=5.0) is None
    reason = clock.stop_reason(next_step=15.0)  # a 15-second step would leave the end 25 s
    assert reason is not None and "after a step of ~15 s" in reason
