"""The few-label cross-validation's bag fits under the run's budget (tfm_cls.bag.few_labels.fit_deadlines)."""

import time

import pytest

from tfm_cls.bag.few_labels import fit_deadlines
from tfm_cls.training import budget
from tfm_cls.training.clock import WallClock


def test_the_few_label_fits_share_a_fifth_of_the_budget_in_turn_and_no_more_than_is_left():
    assert fit_deadlines(None, 3) == [None] * 3 and fit_deadlines(WallClock(None), 2) == [None] * 2
    now = time.monotonic()
    deadlines = fit_deadlines(WallClock(10.0, started=now), 4)  # 600 s: 120 s for four fits
    share = budget.FEW_LABEL_FIT_SHARE * 600
    assert [d - now for d in deadlines] == pytest.approx([share / 4 * (i + 1) for i in range(4)], abs=0.5)
    spent = fit_deadlines(WallClock(10.0, started=now - 590), 2)  # 10 s left: the fits share those
    assert [d - now for d in spent] == pytest.approx([5.0, 10.0], abs=0.5)
