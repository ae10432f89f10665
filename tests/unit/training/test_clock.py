"""The run's wall-clock budget (tfm_cls.training.clock, its figures tfm_cls.training.budget): what is left,
what the end of the run is measured to need, when the loop must stop, and the shares of the stages before it."""

import math
import time

from tfm_cls.training.budget import (
    BASELINE_GROWTH,
    BASELINE_MARGIN,
    CHEAP_SECONDS,
    FIRST_FIT,
    FIXED_SECONDS,
    LOOP_SHARE,
    MAX_OVERHEAD_SHARE,
    MIN_TRAINING_SHARE,
    TEXTS_PER_SECOND_EVAL,
    TOKENIZE_SHARE,
    UNHELD_SHARE,
    WRITE_SECONDS,
    next_baseline_fit,
    overhead_minutes,
)
from tfm_cls.training.clock import WallClock, process_started


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


def test_a_stage_recorded_is_read_back_and_an_unrecorded_one_is_zero():
    clock = WallClock(5.0)
    assert clock.recorded(FIRST_FIT) == 0.0
    clock.record(FIRST_FIT, 12.5)
    clock.record(FIRST_FIT, 7.0)  # a second bag's first fit: the last record stands
    assert clock.recorded(FIRST_FIT) == 7.0 and clock.recorded("another stage") == 0.0


def test_the_finish_rows_set_once_tokenized_grow_the_reserve():
    clock = WallClock(5.0)
    clock.measured(seconds=2.0, rows=100)  # 0.02 s a row
    assert clock.reserve() == FIXED_SECONDS
    clock.set_finish_rows(1000)
    assert abs(clock.reserve() - (FIXED_SECONDS + 20.0)) < 1e-9 and clock.finish_rows == 1000


def test_a_share_of_the_budget_holds_as_many_rows_as_its_seconds_pay_for():
    clock = WallClock(10.0)  # 600 s
    assert clock.share(TOKENIZE_SHARE) == 150.0
    assert clock.rows_in_share(TOKENIZE_SHARE, 0.001) == 150_000
    assert clock.rows_in_share(0.5, 0.0) == int(300 / 1e-9)  # a free row: bounded, not a division by zero


def test_the_loop_is_held_its_share_only_where_it_would_train_on_most_of_it():
    clock = WallClock(10.0)  # 600 s: the share is LOOP_SHARE of it, 240 s
    share = LOOP_SHARE * 600
    assert clock.loop_seconds is None and clock.loop_held() == share  # no plan: the share
    # the end's need at FIXED_SECONDS: the loop trains its whole share
    assert clock.plan_loop(FIXED_SECONDS) == share and clock.shrunk == []
    # it would train exactly MIN_TRAINING_SHARE of it: still held
    assert clock.plan_loop(FIXED_SECONDS + (1 - MIN_TRAINING_SHARE) * share) == share
    # less: only UNHELD_SHARE of it is kept, and the cut is said
    assert clock.plan_loop(FIXED_SECONDS + 200.0) == UNHELD_SHARE * share == clock.loop_held()
    assert len(clock.shrunk) == 1 and clock.shrunk[0].startswith(f"the encoder's loop is not held its share ({share:.0f} s)")
    clock.hold_loop(0.0)
    assert clock.loop_seconds == 0.0 == clock.loop_held()
    assert WallClock(None).plan_loop(1e9) is None


def test_the_warm_start_may_spend_what_leaves_the_loop_its_time_and_the_end_its_reserve():
    unbudgeted = WallClock(None)
    assert unbudgeted.warm_start_deadline() is None and not unbudgeted.warm_start_spent()
    assert unbudgeted.warm_start_affords(1e9)
    clock = WallClock(2.0, started=time.monotonic() - 20.0)  # ~100 s left
    clock.hold_loop(40.0)  # the end reserves FIXED_SECONDS (30 s): ~30 s for the warm start
    assert clock.warm_start_affords(20.0) and not clock.warm_start_affords(40.0)
    assert not clock.warm_start_spent()
    deadline = clock.warm_start_deadline()
    assert deadline is not None and 25.0 < deadline - time.monotonic() <= 30.0
    clock.hold_loop(80.0)  # the loop takes all that is left but the end's reserve: spent
    assert clock.warm_start_spent() and not clock.warm_start_affords(0.0)


def test_the_end_scores_a_cheap_candidate_always_and_writes_within_its_last_seconds():
    clock = WallClock(1.0, started=time.monotonic() - 50.0)  # ~10 s left
    assert clock.affords_scoring(CHEAP_SECONDS)  # cheap: whatever the clock says
    assert not clock.affords_scoring(CHEAP_SECONDS + 0.1)  # it and the end's FIXED_SECONDS do not fit
    assert WallClock(10.0).affords_scoring(60.0)  # they fit
    assert clock.affords_before_writing(9.0 - WRITE_SECONDS) and not clock.affords_before_writing(11.0 - WRITE_SECONDS)


def test_the_baseline_grows_by_its_factor_up_to_the_whole_set_its_time_scaled_with_a_margin():
    assert next_baseline_fit(100, 2.0, 10_000) == (100 * BASELINE_GROWTH, BASELINE_MARGIN * 2.0 * BASELINE_GROWTH)
    assert next_baseline_fit(6400, 64.0, 10_000) == (10_000, BASELINE_MARGIN * 100.0)  # the last: all of them


def test_the_planners_overhead_adds_its_parts_and_never_takes_more_than_its_share():
    # 10,000 training texts, 2,400 scored at the end, each twice a 32-token text's cost, 30 minutes
    scoring = 2400 * 2.0 / TEXTS_PER_SECOND_EVAL / 60  # 0.667 minutes
    short = overhead_minutes(30.0, 10_000, 2400, 2.0)
    assert abs(short - (0.3 + scoring + (0.1 + 0.25))) < 1e-9  # fixed, scoring, baseline; no warm start
    assert abs(overhead_minutes(30.0, 10_000, 2400, 2.0, wide=True) - (short + 0.2 + 1.0)) < 1e-9
    assert abs(overhead_minutes(30.0, 10_000, 2400, 2.0, wide=True, long_documents=True) - (short + 0.2 + 3.0)) < 1e-9
    assert overhead_minutes(2.0, 1_000_000, 0, 1.0, wide=True) == MAX_OVERHEAD_SHARE * 2.0
