"""The statistics of the benchmark tables: the paired bootstrap of bench_many_labels (is a
micro-F1 gap larger than the test set resolves?). bench_report's calibrated-ECE floor is
tfm_cls.classify.calibration.calibrated_ece_noise (tests/unit/classify/test_calibration.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_many_labels  # noqa: E402

from tfm_cls.classify.metrics import multi_label_metrics  # noqa: E402


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
