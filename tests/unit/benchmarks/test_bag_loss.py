"""benchmarks/bag_loss.py: both losses fitted on one TF-IDF matrix, each C picked on validation (a held-out
tenth of train where there is none), the table's sign and count; sets it cannot compare are skipped."""
from __future__ import annotations

import json

from kits.tiny_topics import write_dataset

from benchmarks import bag_loss
from benchmarks.harness.samples import MIN_HOLDOUT
from tfm_cls.bag.fit import HINGE_C, WARM_START_C

WORDS = {0: "goal match team score", 1: "stock market price trade", 2: "code software chip cloud"}


def _rows(n_per_class: int, start: int = 0) -> list[dict]:
    return [{"text": f"{WORDS[c].split()[i % 4]} {WORDS[c].split()[(i + 1) % 4]} item {start + i}", "label": c}
            for i in range(n_per_class) for c in WORDS]


def test_both_losses_are_scored_on_the_same_features_and_a_pair_set_is_skipped(tmp_path, capsys):
    # no validation split: a tenth of 600 is under MIN_HOLDOUT, which is held out
    topics = write_dataset(tmp_path / "topics", {"train": _rows(200), "test": _rows(20, 1000)})
    pair_rows = lambda n: [{"sentence_a": "a b", "sentence_b": "c d", "label": i % 2} for i in range(n)]  # noqa: E731
    pairs = write_dataset(tmp_path / "pairs", {"train": pair_rows(20), "test": pair_rows(4)})
    row = bag_loss.measure(topics)
    assert row["validation"] == MIN_HOLDOUT and row["train"] == 600 - MIN_HOLDOUT
    assert row["logistic"]["C"] in WARM_START_C and row["squared_hinge"]["C"] in HINGE_C
    assert row["logistic"]["test"] == 1.0 and row["squared_hinge"]["test"] == 1.0  # the words give the class away
    assert row["test_difference"] == 0.0
    assert bag_loss.measure(pairs) is None
    assert bag_loss.main(["--data", str(topics), str(pairs), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "pairs: not a single-label set of single texts; skipped" in printed
    assert "hinge ahead on 0 of 1 sets; mean difference +0.00 points" in printed
    saved = json.loads(next((tmp_path / "out").glob("bag-loss-*.json")).read_text())
    assert [r["set"] for r in saved["rows"]] == ["topics"]
