"""benchmarks/recipe.py and benchmarks/harness/samples.py: the few-label sampler (K per class,
seeded, the multi-label cap of 2K, the test split kept whole), the TF-IDF baselines without a
validation split (cross-validated), the table (means over seeds, the targets' >= columns) and the
result cache (a cached row reused, --fresh recomputing). Synthetic folders in tmp_path: no shared
data, no training."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from benchmarks import recipe as bench_recipe
from benchmarks.harness import baselines
from benchmarks.harness.samples import columns_of, few_label_rows, read_splits, write_sample

WORDS = {0: "goal match team score", 1: "stock market price trade", 2: "code software chip cloud"}


def _write(folder: Path, split: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _topic_rows(n_per_class: int, start: int = 0) -> list[dict]:
    return [{"text": f"{WORDS[c]} {WORDS[c].split()[i % 4]} item {start + i}", "label": c}
            for i in range(n_per_class) for c in WORDS]


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    """A single-label folder: 3 classes x 20 training texts, 30 test texts, labels.json."""
    folder = tmp_path / "data" / "toy"
    _write(folder, "train", _topic_rows(20))
    _write(folder, "test", _topic_rows(10, start=100))
    (folder / "labels.json").write_text(json.dumps(["sport", "business", "tech"]))
    return folder


def test_a_sample_holds_k_examples_of_each_class_seeded_with_the_test_split_whole_and_no_validation(toy, tmp_path):
    a = write_sample(toy, tmp_path / "samples" / "toy-4-0", shots=4, seed=0)
    train = [json.loads(line) for line in (a / "train.jsonl").read_text().splitlines()]
    assert Counter(r["label"] for r in train) == {0: 4, 1: 4, 2: 4}
    assert (a / "test.jsonl").read_bytes() == (toy / "test.jsonl").read_bytes()
    assert (a / "labels.json").read_text() == (toy / "labels.json").read_text()
    assert not (a / "validation.jsonl").exists()
    assert json.loads((a / "sample.json").read_text())["per_label"] == {"0": 4, "1": 4, "2": 4}
    # seeded: the same seed draws the same rows, another seed others
    rows = [json.loads(line) for line in (toy / "train.jsonl").read_text().splitlines()]
    assert few_label_rows(rows, 4, seed=0) == train
    assert few_label_rows(rows, 4, seed=1) != train
    # drawn once: a second call reuses the folder; another spec in it is refused
    stamp = (a / "train.jsonl").stat().st_mtime_ns
    assert write_sample(toy, a, shots=4, seed=0) == a and (a / "train.jsonl").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="another sample"):
        write_sample(toy, a, shots=8, seed=0)


def test_a_class_with_fewer_than_k_examples_gives_all_it_has():
    rows = [{"text": f"t{i}", "label": 0} for i in range(10)] + [{"text": "rare", "label": 1}, {"text": "rare2", "label": 1}]
    taken = few_label_rows(rows, 4, seed=3)
    assert Counter(r["label"] for r in taken) == {0: 4, 1: 2}


def test_a_multi_label_sample_takes_a_text_while_one_of_its_labels_lacks_k_and_never_passes_2k():
    # label 0 is on most texts and labels 1-4 only beside it (uncapped, 0 would reach 3 + 4 x 3 = 15); 5 alone
    rows = ([{"text": f"a{i}", "labels": [0]} for i in range(20)]
            + [{"text": f"b{label}-{i}", "labels": [0, label]} for label in (1, 2, 3, 4) for i in range(10)]
            + [{"text": f"c{i}", "labels": [5]} for i in range(10)] + [{"text": "none", "labels": []}])
    k = 3
    for seed in range(5):
        taken = few_label_rows(rows, k, seed)
        counts = Counter(label for r in taken for label in r["labels"])
        assert counts[0] == 2 * k  # the cap binds: labels 1-4 cannot all reach k through label 0's texts
        assert sum(counts[label] for label in (1, 2, 3, 4)) < 4 * k
        assert counts[5] == k and all(r["labels"] for r in taken)
        seen: Counter = Counter()  # replay: each text was taken while one of its labels still lacked k
        for r in taken:
            assert any(seen[label] < k for label in r["labels"])
            seen.update(r["labels"])
    assert columns_of(rows).task == "multi_label"


def test_read_splits_reads_pairs_and_multi_label_folders(tmp_path):
    pairs = tmp_path / "pairs"
    _write(pairs, "train", [{"sentence_a": "a man runs", "sentence_b": "a person runs", "label": 0, "relatedness": 4.5},
                            {"sentence_a": "a dog", "sentence_b": "no cat", "label": 2, "relatedness": 1.2}])
    _write(pairs, "test", [{"sentence_a": "x", "sentence_b": "y", "label": 1, "relatedness": 3.0}])
    splits, columns, num_labels = read_splits(pairs)
    assert (columns.text, columns.pair, columns.label, columns.task) == ("sentence_a", "sentence_b", "label", "single_label")
    assert splits["train"].pairs == ["a person runs", "no cat"] and splits["test"].targets.tolist() == [1]
    assert num_labels == 3 and "validation" not in splits
    multi = tmp_path / "multi"
    _write(multi, "train", [{"text": "a", "labels": [0, 2]}, {"text": "b", "labels": [1]}])
    _write(multi, "test", [{"text": "c", "labels": [2]}])
    (multi / "labels.json").write_text(json.dumps(["x", "y", "z"]))
    splits, columns, num_labels = read_splits(multi)
    assert columns.task == "multi_label" and num_labels == 3
    assert splits["train"].targets.tolist() == [[1, 0, 1], [0, 1, 0]] and splits["test"].targets.tolist() == [[0, 0, 1]]


def test_tfidf_without_validation_is_cross_validated_on_a_small_sample_and_picked_on_validation_otherwise(toy, tmp_path):
    sample = write_sample(toy, tmp_path / "s", shots=8, seed=0)
    splits, columns, _ = read_splits(sample)
    row = baselines.tfidf_row(splits, columns, "accuracy")
    assert set(row["baselines"]) == {"tfidf-word-lr", "tfidf-char-svm"}
    for name, b in row["baselines"].items():
        assert b["selected_by"] == "5-fold cross-validation on train"
        assert b["C"] in baselines.SYSTEMS[name].grid
        assert b["accuracy"] == 1.0  # the topics are separable by their words
    assert row["metric"] == 1.0 and row["best"] in row["baselines"]
    with_validation = dict(splits, validation=splits["test"])
    picked = baselines.tfidf_baseline("tfidf-word-lr", with_validation)
    assert picked["selected_by"] == "validation" and picked["validation_metric"] == 1.0


def test_multi_label_tfidf_cross_validates_its_thresholds_too(tmp_path):
    folder = tmp_path / "multi"
    rows = [{"text": f"{WORDS[a]} {WORDS[b]} n{i}", "labels": sorted({a, b})} for i in range(12) for a in WORDS for b in WORDS]
    _write(folder, "train", rows)
    _write(folder, "test", rows[:18])
    splits, columns, _ = read_splits(folder)
    row = baselines.tfidf_row(splits, columns, "micro_f1")
    assert set(row["baselines"]) == {"tfidf-ovr-lr", "tfidf-ovr-svm"}  # + one-vs-rest SVM: the table's metric
    assert all(b["selected_by"].startswith("5-fold") for b in row["baselines"].values())
    assert row["metric"] > 0.9


def _row(system: str, seed: int | None, value: float, **extra) -> dict:
    return {"set": "toy", "sample": "full" if seed is None else f"k8-s{seed}", "shots": None if seed is None else 8,
            "seed": seed, "system": system, "metric_name": "accuracy", "metric": value, "cpu_minutes": 1.0, **extra}


def _tfidf(seed: int | None, lr: float, svm: float) -> dict:
    return _row("tfidf", seed, max(lr, svm), baselines={
        "tfidf-word-lr": {"accuracy": lr, "cpu_minutes": 0.1}, "tfidf-char-svm": {"accuracy": svm, "cpu_minutes": 0.2}})


def test_the_table_takes_means_over_seeds_and_computes_the_targets_columns():
    rows = [
        _row("recipe", 0, 0.80, best_step=10, start_validation=None, kept_validation=None),
        _row("recipe", 1, 0.70, best_step=12, start_validation=None, kept_validation=None),
        _row("recipe", 2, 0.90, best_step=11, start_validation=None, kept_validation=None),
        # word-lr's mean (0.75) beats char-svm's (0.7), though char-svm wins seed 1
        _tfidf(0, 0.75, 0.60), _tfidf(1, 0.65, 0.80), _tfidf(2, 0.85, 0.70),
        _row("setfit", 0, 0.85), _row("setfit", 1, 0.80), {**_row("setfit", 2, 0.0), "error": "RuntimeError: boom"},
        _row("recipe", None, 0.91, best_step=0, start_validation=0.90, kept_validation=0.90,
             baseline={"model": "tfidf-word-lr", "test": 0.89}),
        _tfidf(None, 0.92, 0.88),
        {**_row("setfit", None, 0.0), "skipped": "too many texts"},
    ]
    few, full = bench_recipe.summarise(rows)
    assert few["sample"] == "8/class" and full["sample"] == "full"
    assert few["recipe"]["mean"] == pytest.approx(0.80) and few["recipe"]["values"] == {0: 0.8, 1: 0.7, 2: 0.9}
    assert few["tfidf"]["name"] == "tfidf-word-lr" and few["tfidf"]["mean"] == pytest.approx(0.75)
    assert few["tfidf"]["cpu_minutes"] == pytest.approx(0.1)
    assert few["recipe_ge_tfidf"] is True
    # SetFit failed on seed 2: compared on seeds 0 and 1 (recipe 0.75 < SetFit 0.825)
    assert few["setfit"]["mean"] == pytest.approx(0.825) and few["setfit"]["state"] == "error"
    assert few["recipe_ge_setfit"] is False
    assert few["recipe_ge_start"] is None  # no validation: nothing evaluated at step 0
    assert few["best_steps"] == {0: 10, 1: 12, 2: 11}
    assert full["recipe_ge_tfidf"] is False and full["recipe_ge_setfit"] is None and full["recipe_ge_start"] is True
    assert full["recipe_baseline"] == pytest.approx(0.89)
    table = bench_recipe.format_table([few, full])
    assert "| toy | 8/class | accuracy | 80.0 (80.0 / 70.0 / 90.0) | 75.0 word-lr (75.0 / 65.0 / 85.0) |" in table
    assert "| yes | **no** | n/a (no step-0 evaluation) | 10 / 12 / 11 |" in table
    assert "| toy | full | accuracy | 91.0 | 92.0 word-lr | – | n/a | **no** | – | yes | 0 | 89.0 |" in table
    below = bench_recipe.summarise([_row("recipe", None, 0.8, start_validation=0.9, kept_validation=0.85)])[0]
    assert below["recipe_ge_start"] is False and below["recipe_below_start"] == {None: (0.85, 0.9)}


def test_a_cached_row_is_reused_and_fresh_recomputes_it(tmp_path):
    cache = bench_recipe.RowCache(tmp_path / "rows")
    sample = bench_recipe.Sample("toy", tmp_path, 8, 1)
    calls = []

    def compute():
        calls.append(1)
        return {"metric_name": "accuracy", "metric": 0.5 + len(calls) / 10}

    row, cached = bench_recipe.measured(cache, "tfidf", sample, {"folds": 5}, compute)
    assert not cached and row["metric"] == 0.6 and row["sample"] == "k8-s1" and len(calls) == 1
    assert cache.path("tfidf", "toy", "k8-s1").is_file()
    row, cached = bench_recipe.measured(cache, "tfidf", sample, {"folds": 5}, compute)
    assert cached and row["metric"] == 0.6 and len(calls) == 1
    row, cached = bench_recipe.measured(cache, "tfidf", sample, {"folds": 5}, compute, fresh=True)
    assert not cached and row["metric"] == 0.7 and len(calls) == 2
    row, cached = bench_recipe.measured(cache, "tfidf", sample, {"folds": 3}, compute)  # other settings
    assert not cached and len(calls) == 3

    def fail():
        raise RuntimeError("tfm-cls train exited 2")

    row, _ = bench_recipe.measured(cache, "recipe", sample, {}, fail)
    assert row["error"] == "RuntimeError: tfm-cls train exited 2"
    assert not cache.path("recipe", "toy", "k8-s1").exists()  # a failure is retried next time


def test_the_benchmark_runs_end_to_end_on_a_folder_and_resumes_from_its_cache(toy, tmp_path, caplog, capsys):
    out = tmp_path / "out"
    argv = ["--data-root", str(toy.parent), "--sets", "toy", "--few-sets", "toy", "--shots", "4", "--seeds", "0", "1",
            "--systems", "tfidf", "--out", str(out)]
    assert bench_recipe.main(["--list", *argv]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] + [line.split()[-1]] for line in listed] == [
        ["toy", "full", "tfidf", "run"], ["toy", "k4-s0", "tfidf", "run"], ["toy", "k4-s1", "tfidf", "run"]]
    assert bench_recipe.main(argv) == 0
    table = capsys.readouterr().out
    assert "| toy | full | accuracy | – | 100.0" in table and "| toy | 4/class | accuracy |" in table
    result = json.loads(next(out.glob("recipe-*.json")).read_text())
    assert [(r["sample"], r["system"]) for r in result["rows"]] == [("full", "tfidf"), ("k4-s0", "tfidf"), ("k4-s1", "tfidf")]
    assert (out / "recipe-samples" / "toy-4-1" / "train.jsonl").is_file()
    assert len(list((out / "recipe-rows").glob("*.json"))) == 3
    caplog.clear()
    with caplog.at_level("INFO", logger="benchmarks.recipe"):
        assert bench_recipe.main(argv) == 0
    assert sum("(cached)" in m for m in caplog.messages) == 3
    assert np.isclose(result["table"][0]["tfidf"]["mean"], 1.0)
