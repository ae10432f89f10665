"""The hinge fit's C walk (tfm_cls.bag.fit.next_c): outwards from the start, the stronger penalty
first, and on only while the best sits at the edge of what was tried."""

import pytest

from tfm_cls.bag.fit import HINGE_C, HINGE_START, next_c, next_fit_seconds

# validation accuracy by C of the warm start's bag, every value of the grid fitted (5-minute recipe
# runs of docs/recipe.md, "All twelve rows again": train.log of each)
CURVES = {
    "ag_news": {1.0: 0.8900, 0.3: 0.8840, 3.0: 0.8960, 0.1: 0.8740, 10.0: 0.8960},
    "emotions6": {1.0: 0.8640, 0.3: 0.8544, 3.0: 0.8640, 0.1: 0.8272, 10.0: 0.8640},
    "mr_polarity": {1.0: 0.7692, 0.3: 0.7795, 3.0: 0.7645, 0.1: 0.7636, 10.0: 0.7655},
    "sms_spam": {1.0: 0.9910, 0.3: 0.9910, 3.0: 0.9910, 0.1: 0.9910, 10.0: 0.9910},
    "sst2": {1.0: 0.8440, 0.3: 0.8406, 3.0: 0.8372, 0.1: 0.8372, 10.0: 0.8200},
    "tnews": {1.0: 0.5504, 0.3: 0.5618, 3.0: 0.5418, 0.1: 0.5521, 10.0: 0.5315},
    "tnews5k": {1.0: 0.4800, 0.3: 0.4880, 3.0: 0.4640, 0.1: 0.4940, 10.0: 0.4580},
    "trec": {1.0: 0.8608, 0.3: 0.8370, 3.0: 0.8626, 0.1: 0.8333, 10.0: 0.8626},
}


def _walk(curve: dict[float, float], start: float = HINGE_START) -> tuple[float, list[float]]:
    """The C kept (the first of the best, as the warm start keeps it) and the values fitted, in order."""
    tried, best, c = [], None, start
    while c is not None:
        tried.append(c)
        if best is None or curve[c] > curve[best]:
            best = c
        c = next_c(HINGE_C, tried, best)
    return best, tried


@pytest.mark.parametrize("name", sorted(CURVES))
def test_the_walk_keeps_the_c_the_whole_grid_kept_on_every_measured_curve(name):
    curve = CURVES[name]
    whole = max(sorted(curve, key=list(HINGE_C).index), key=curve.get)  # the full grid's best (smallest C on ties)
    kept, tried = _walk(curve)
    assert curve[kept] == curve[whole]
    assert tried[:2] == [1.0, 0.3] and len(tried) == len(set(tried)) <= len(HINGE_C)
    # the weaker penalty (the slower liblinear fit) only where the stronger did not beat the start
    assert (3.0 in tried) == (curve[0.3] <= curve[1.0])


def test_the_walk_skips_the_slow_side_on_the_measured_curves_that_prefer_a_stronger_penalty():
    fits = {name: _walk(curve)[1] for name, curve in CURVES.items()}
    assert {name for name, tried in fits.items() if 3.0 not in tried} == {"mr_polarity", "tnews", "tnews5k"}
    # no more fits than the walk that tried both of the start's neighbours first (29 on these curves),
    # but where 0.3 won, the third is C 0.1 (tnews: 4 s), not C 3 (16 s)
    assert sum(map(len, fits.values())) == 26


@pytest.mark.parametrize("peak", range(len(HINGE_C)))
@pytest.mark.parametrize("slopes", [(1.0, 1.0), (0.1, 3.0), (3.0, 0.1)])
def test_on_any_unimodal_curve_the_walk_keeps_the_grids_best_from_any_start(peak, slopes):
    rising, falling = slopes  # per step of the grid, before and after the peak
    curve = {c: -(rising if i < peak else falling) * abs(i - peak) for i, c in enumerate(HINGE_C)}
    for start in HINGE_C:
        assert _walk(curve, start)[0] == HINGE_C[peak]


def test_the_walk_goes_on_only_towards_the_best_and_stops_at_the_grids_ends():
    falling = {c: -c for c in HINGE_C}  # the strongest penalty is best: walk down to the grid's end
    assert _walk(falling) == (0.1, [1.0, 0.3, 0.1])
    rising = {c: c for c in HINGE_C}
    assert _walk(rising) == (10.0, [1.0, 0.3, 3.0, 10.0])
    peak = {c: -abs(c - 1.0) for c in HINGE_C}  # the start is best: its two neighbours only
    assert _walk(peak) == (1.0, [1.0, 0.3, 3.0])
    # a start at the grid's edge has one neighbour, then walks
    assert _walk(rising, start=0.1) == (10.0, [0.1, 0.3, 1.0, 3.0, 10.0])
    assert _walk(falling, start=0.1) == (0.1, [0.1, 0.3])


def test_the_next_fit_is_timed_in_proportion_to_c_upwards_and_as_the_slowest_downwards():
    # tnews' triples (train.log, 4a95f90): C 1 15 s, C 0.3 8 s; C 3 then took 34 s
    made = {1.0: 15.0, 0.3: 8.0}
    assert next_fit_seconds(made, 3.0) == pytest.approx(45.0) and next_fit_seconds(made, 3.0) > 34.0
    assert next_fit_seconds(made, 0.1) == 15.0  # a stronger penalty: no slower than the slowest yet
    assert next_fit_seconds({0.3: 4.0, 0.1: 6.0}, 1.0) == pytest.approx(6.0 * 1.0 / 0.3)
    # L-BFGS's path (C 1, 10, 100, ...) starts each fit from the last: twice the slowest, whatever the C
    assert next_fit_seconds({1.0: 2.0, 10.0: 3.0}, 100.0, liblinear=False) == 6.0
