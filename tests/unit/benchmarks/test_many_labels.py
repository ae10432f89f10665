"""benchmarks/many_labels.py: the paired bootstrap (is a micro-F1 gap larger than the test set
resolves?) and the long-tailed set's Zipf weights. benchmarks/report.py's calibrated-ECE floor is
tfm_cls.classify.calibration.calibrated_ece_noise (tests/unit/classify/test_calibration.py)."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks import many_labels as bench_many_labels
from tfm_cls.classify.metrics import multi_label_metrics


def test_the_paired_bootstrap_gives_the_micro_f1_gap_and_an_interval_that_shrinks_with_more_documents():
    rng = np.random.default_rng(0)

    def systems(n):
        targets = rng.random((n, 5)) < 0.3
        good = np.where(rng.random((n, 5)) < 0.9, targets, ~targets)  # 10 % of the cells wrong
        poor = np.where(rng.random((n, 5)) < 0.8, targets, ~targets)  # 20 % wrong
        return targets, good, poor

    targets, good, poor = systems(400)
    gap = bench_many_labels.paired_bootstrap(targets, good, poor)
    names = [str(i) for i in range(5)]
    exact = (multi_label_metrics(targets.astype(int), good.astype(int), names)["micro_f1"]
             - multi_label_metrics(targets.astype(int), poor.astype(int), names)["micro_f1"])
    assert gap["difference"] == pytest.approx(exact, abs=1e-9)
    assert gap["low"] < gap["difference"] < gap["high"] and gap["low"] > 0  # a real gap, resolved
    same = bench_many_labels.paired_bootstrap(targets, good, good)
    assert same["difference"] == same["low"] == same["high"] == 0.0
    wide = bench_many_labels.paired_bootstrap(*systems(100))
    narrow = bench_many_labels.paired_bootstrap(*systems(4000))
    assert narrow["high"] - narrow["low"] < 0.6 * (wide["high"] - wide["low"])


def test_the_long_tailed_documents_draw_one_to_three_distinct_labels_by_a_zipf_law():
    weights = bench_many_labels.zipf_weights(4)
    assert weights.sum() == pytest.approx(1.0) and np.allclose(weights / weights[0], [1, 1 / 2, 1 / 3, 1 / 4])
    pools = {label: [f"{label} text {i}" for i in range(3)] for label in ("a", "b", "c", "d")}
    rows = bench_many_labels.make_documents(pools, ["a", "b", "c", "d"], weights, 200, seed=1)
    assert rows == bench_many_labels.make_documents(pools, ["a", "b", "c", "d"], weights, 200, seed=1)  # seeded
    assert all(1 <= len(r["labels"]) <= 3 and len(set(r["labels"])) == len(r["labels"]) for r in rows)
    counts = np.bincount([i for r in rows for i in r["labels"]], minlength=4)
    assert counts[0] > counts[3]  # the first rank is drawn most
    assert all(f"{'abcd'[i]} text" in r["text"] for r in rows for i in r["labels"])  # a section per label
