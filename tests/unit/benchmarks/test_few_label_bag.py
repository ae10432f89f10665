"""benchmarks/few_label_bag.py: the few-label bag as the run fits it, against the benchmark's TF-IDF
models over several K-shot samples; its leads, their summary across samples; a pair set is skipped."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from kits.tiny_topics import make_texts, write_dataset
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from benchmarks import few_label_bag
from benchmarks.harness.samples import read_splits
from benchmarks.harness.tokens import run_tokenizer
from tfm_cls.bag.few_labels import BAG_C


def _noisy(n: int, seed: int) -> list[dict]:
    """Topic texts, a third of their labels replaced at random: no model is right on every text."""
    rng = random.Random(seed)
    return [{**r, "label": rng.randrange(3) if rng.random() < 0.33 else r["label"]} for r in make_texts(n, seed)]


def test_the_bag_is_scikit_learns_logistic_regression_over_the_runs_tokens_and_the_leads_add_up(tmp_path, capsys):
    source = write_dataset(tmp_path / "topics", {"train": _noisy(300, 0), "test": _noisy(400, 1)})
    pairs = write_dataset(tmp_path / "pairs", {"train": [{"sentence_a": "a b", "sentence_b": "c d", "label": i % 2}
                                                         for i in range(40)],
                                               "test": [{"sentence_a": "a", "sentence_b": "b", "label": 0}] * 4})
    assert few_label_bag.main(["--data", str(source), str(pairs), "--shots", "6", "--seeds", "3",
                               "--samples", str(tmp_path / "samples"), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "pairs: not a single-label set of single texts; skipped" in printed
    saved = json.loads(next((tmp_path / "out").glob("few-label-bag-*.json")).read_text())
    rows = saved["rows"]
    assert [r["sample"] for r in rows] == ["topics-6-s0", "topics-6-s1", "topics-6-s2"]
    assert all(r["train"] == 18 and r["test"] == 400 for r in rows)

    # the reference: scikit-learn's L2 logistic regression, C = BAG_C, on sublinear TF-IDF of the run's tokens
    # (markers left out) and their pairs: the bag's features and loss, so its decisions on test
    sample = tmp_path / "samples" / "topics-6-s1"
    splits, _, _ = read_splits(sample)
    tokenizer = run_tokenizer(sample, splits["train"].texts)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=False, token_pattern=None,
                                 tokenizer=lambda t: tokenizer.encode(t).tokens[1:-1])
    reference = LogisticRegression(C=BAG_C, max_iter=5000, tol=1e-8).fit(
        vectorizer.fit_transform(splits["train"].texts), splits["train"].targets)
    expected = float(np.mean(reference.predict(vectorizer.transform(splits["test"].texts)) == splits["test"].targets))
    assert abs(rows[1]["bag"] - expected) <= 1 / 400 and 0.3 < expected < 1.0

    for r in rows:  # the lead is the bag's accuracy less the best TF-IDF model's, on the same test texts
        assert abs(r["lead"]["lead"] - (r["bag"] - r["best_test"])) < 1e-9 and r["lead"]["texts"] == 400
        assert abs(r["lead_picked"]["lead"] - (r["bag"] - r["picked_test"])) < 1e-9
        assert r["best"] in {"tfidf-word-lr", "tfidf-char-svm"} and r["prefer_bag"] is False
    leads = [r["lead"]["lead"] for r in rows]
    overall = saved["summary"]["all"]["lead"]
    assert abs(overall["mean"] - np.mean(leads)) < 1e-12 and overall["samples"] == 3
    assert abs(overall["se"] - np.std(leads, ddof=1) / np.sqrt(3)) < 1e-12
    assert overall["below"] == sum(lead < 0 for lead in leads)
    assert "| topics at 6 | 3 |" in printed

    # the samples are drawn once: a second run reads the same ones
    written = (sample / "train.jsonl").read_text()
    assert few_label_bag.main(["--data", str(source), "--shots", "6", "--seeds", "2", "--samples",
                               str(tmp_path / "samples"), "--out", str(tmp_path / "out2")]) == 0
    assert (sample / "train.jsonl").read_text() == written


def test_a_folder_without_its_splits_is_one_usage_error_before_any_sample_is_drawn(tmp_path, capsys):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "train.jsonl").write_text('{"text": "a", "label": 0}\n')
    with pytest.raises(SystemExit) as stopped:
        few_label_bag.main(["--data", str(tmp_path / "half"), "--samples", str(tmp_path / "samples")])
    assert stopped.value.code == 2
    assert f"--data {tmp_path / 'half'}: no test.jsonl" in capsys.readouterr().err
    assert not (tmp_path / "samples").exists()
