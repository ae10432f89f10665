"""benchmarks/selection.py over finished runs (`--runs`, no training): every candidate exported and timed
by the runtime, the classical peers fitted on the same folder, the targets judged from those figures;
a run of one model is scored against the classical models too; the table shows what shipped and its score."""
from __future__ import annotations

import json

import pytest
from kits.tiny_topics import tiny_config, write_topic_data

from benchmarks import selection
from tfm_cls.train import train

WIDE = ["wide.enabled=true", "wide.weighting=tfidf", "wide.warm_start=true", "wide.ngrams=2", "wide.buckets=512",
        "train.eval_at_start=true", "train.epochs=1", "train.device=cpu"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("selection")
    data = write_topic_data(folder / "data")
    train(tiny_config(data, folder / "wide", *WIDE))
    train(tiny_config(data, folder / "one", "train.epochs=1"))
    return data, folder


def test_a_finished_run_is_measured_against_its_candidates_and_the_classical_models(runs, tmp_path, capsys):
    data, folder = runs
    assert selection.main(["--runs", str(folder / "wide"), str(folder / "one"), "--data", str(data), str(data),
                           "--rounds", "1", "--out", str(tmp_path / "out")]) == 0
    saved = json.loads(next((tmp_path / "out").glob("selection-*.json")).read_text())
    wide, one = saved["rows"]
    metrics = json.loads((folder / "wide" / "metrics.json").read_text())
    metric = metrics["best_metric"]
    front = {c["name"]: c for c in wide["front"]}
    assert set(front) == {"wide_and_deep", "bag_of_terms"}
    for name, candidate in front.items():  # each exported and timed by the runtime
        assert candidate["onnx_texts_per_second"] > 0 and candidate["onnx_mb"] > 0
        assert (folder / "wide" / ("model.onnx" if candidate["chosen"] else f"candidate-{name}.onnx")).is_file()
    assert wide["shipped"] == metrics["candidates"]["chosen"]
    assert wide["shipped_test"] == front[wide["shipped"]]["test"][metric]
    # the best classical: the benchmark's own TF-IDF models, the run's baseline and the in-graph bag
    peers = [b[metric] for b in wide["classical"]["baselines"].values()]
    assert len(peers) >= 2
    assert wide["best_classical_test"] == max([*peers, front["bag_of_terms"]["test"][metric],
                                               *([wide["sklearn_baseline"]["test"]] if wide["sklearn_baseline"]["test"]
                                                 is not None else [])])
    targets = wide["targets"]
    assert targets[">= best classical (test)"] == (wide["shipped_test"] >= wide["best_classical_test"] - 1e-12)
    # the classical model its own validation picks, scored on test (test not looked at to pick it)
    baselines = wide["classical"]["baselines"]
    picked = wide["classical"]["chosen_on_validation"]
    assert baselines[picked]["validation"] == max(b["validation"] for b in baselines.values())
    assert wide["classical"]["chosen_on_validation_test"] == baselines[picked][metric]
    assert targets[">= classical chosen on validation (test)"] == (
        wide["shipped_test"] >= baselines[picked][metric] - 1e-12)
    assert targets["wall <= 1.05 x budget"] is None  # not timed here: a finished run
    # one model: nothing chosen, its test score still judged against the classical models
    assert one["shipped"] == "the only model" and "front" not in one
    assert one["shipped_test"] == json.loads((folder / "one" / "metrics.json").read_text())["test"][metric]
    assert one["targets"][">= best classical (test)"] == (one["shipped_test"] >= one["best_classical_test"] - 1e-12)
    printed = capsys.readouterr().out
    assert f"| data | the only model: {100 * one['shipped_test']:.1f} |" in printed
    assert f"| data | {wide['shipped']}: {100 * wide['shipped_test']:.1f} |" in printed


def test_runs_and_data_must_pair_up(runs, capsys):
    data, folder = runs
    with pytest.raises(SystemExit):
        selection.main(["--runs", str(folder / "wide"), "--data", str(data), str(data)])
    assert "--runs: one run directory per --data folder" in capsys.readouterr().err


def test_extra_overrides_reach_the_training_command_line(tmp_path, monkeypatch):
    import subprocess
    from types import SimpleNamespace

    from tfm_cls.cli.entry import build_parser

    seen = []
    monkeypatch.setattr(subprocess, "run", lambda command, **_: seen.append(command) or SimpleNamespace(returncode=0))
    selection.train_run(tmp_path / "data", tmp_path / "run", 5, 1, ["wide.count_special_tokens=true"])
    parsed = build_parser().parse_args(seen[0][3:])  # after `python -m tfm_cls.cli`
    assert "wide.count_special_tokens=true" in parsed.overrides and parsed.overwrite


def test_a_candidate_the_run_left_unscored_is_scored_on_test_here(runs, tmp_path, capsys):
    import shutil

    data, folder = runs
    run = tmp_path / "run"
    shutil.copytree(folder / "wide", run)
    metrics = json.loads((run / "metrics.json").read_text())
    metric = metrics["best_metric"]
    other = next(c for c in metrics["candidates"]["front"] if not c["chosen"])
    scored_by_the_run = other["test"][metric]
    other["test"] = None  # as a run whose wall clock did not afford scoring it
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert selection.main(["--runs", str(run), "--data", str(data), "--rounds", "1", "--out", str(tmp_path / "out")]) == 0
    row, = json.loads(next((tmp_path / "out").glob("selection-*.json")).read_text())["rows"]
    front = {c["name"]: c for c in row["front"]}
    assert front[other["name"]]["test"][metric] == pytest.approx(scored_by_the_run, abs=1e-9)
    assert front[other["name"]]["test_scored_by"] == "benchmark"
    assert "test_scored_by" not in front[row["shipped"]]
    assert "+ scored on test by this benchmark" in capsys.readouterr().out


def test_the_classical_checks_carry_a_paired_lead_on_the_same_test_texts(runs, tmp_path):
    import numpy as np

    from benchmarks.harness.samples import read_splits
    from tfm_cls.runtime.session import Classifier

    data, folder = runs
    run = tmp_path / "run"
    train(tiny_config(data, run, *WIDE, "train.best_metric=accuracy"))
    assert selection.main(["--runs", str(run), "--data", str(data), "--rounds", "1", "--out", str(tmp_path / "out")]) == 0
    row, = json.loads(next((tmp_path / "out").glob("selection-*.json")).read_text())["rows"]
    best, chosen = row["paired_test"]["best classical"], row["paired_test"]["classical chosen on validation"]
    baselines = row["classical"]["baselines"]
    assert best["system"] == max(baselines, key=lambda n: baselines[n]["accuracy"])
    assert chosen["system"] == row["classical"]["chosen_on_validation"]
    # the shipped model's right / wrong, by the runtime, in the folder's label names: its accuracy is the run's
    test = read_splits(data)[0]["test"]
    scores, _, _ = Classifier(str(run / "model.onnx")).classify(test.texts)
    run_labels, names = (json.loads((p / "labels.json").read_text()) for p in (run, data))
    shipped = np.mean([run_labels[i] == names[t] for i, t in zip(np.asarray(scores).argmax(1), test.targets)])
    assert shipped == pytest.approx(row["shipped_test"], abs=1e-9) and best["texts"] == len(test.texts)
    for lead in (best, chosen):
        assert lead["lead"] == pytest.approx(shipped - baselines[lead["system"]]["accuracy"], abs=1e-9)
    assert "test_predicted" not in json.dumps(row)  # the classical predictions are not saved


def test_the_paired_lead_is_the_mean_difference_per_text_with_its_standard_error(monkeypatch, tmp_path):
    import numpy as np

    from benchmarks.harness.samples import Split

    targets = np.array([0, 1, 1, 0])
    from types import SimpleNamespace

    monkeypatch.setattr(selection, "shipped_right", lambda run, data, test: np.array([True, True, False, True]))
    splits = {"test": Split(["a", "b", "c", "d"], targets)}
    single, pairs = SimpleNamespace(pair=None), SimpleNamespace(pair="text_pair")
    peers = {"baselines": {"lr": {"accuracy": 0.25}, "svm": {"accuracy": 0.5}}, "chosen_on_validation": "lr"}
    predicted = {"lr": np.array([0, 0, 0, 1]), "svm": np.array([0, 1, 0, 1])}  # right: 1000 and 1100
    paired = selection.paired_against_classical(tmp_path, tmp_path, splits, single, peers, predicted, "accuracy")
    # against svm (the best on test): differences 0 0 0 1; against lr: 0 1 0 1
    assert paired["best classical"] == {"system": "svm", "lead": 0.25, "se": pytest.approx(0.25), "texts": 4}
    lead = paired["classical chosen on validation"]
    assert lead["system"] == "lr" and lead["lead"] == 0.5 and lead["se"] == pytest.approx(np.std([0, 1, 0, 1], ddof=1) / 2)
    assert selection.paired_against_classical(tmp_path, tmp_path, splits, single, peers, predicted, "micro_f1") is None
    # sentence pairs: the runtime would read the first texts alone, so no paired lead
    assert selection.paired_against_classical(tmp_path, tmp_path, splits, pairs, peers, predicted, "accuracy") is None


def test_a_run_that_scored_a_sample_of_test_is_compared_on_the_whole_split(runs, tmp_path, capsys):
    """Where the run's budget scored a sample of the test texts (metrics.json data.test_examples below the
    folder's; data.max_eval_samples), every candidate is scored here on all of them, so they meet the classical
    models on the same texts, and the table says so."""
    import numpy as np

    from benchmarks.harness.samples import read_splits
    from tfm_cls.runtime.session import Classifier

    data, _ = runs
    run = tmp_path / "run"
    train(tiny_config(data, run, *WIDE, "train.best_metric=accuracy"))
    metrics = json.loads((run / "metrics.json").read_text())
    test = read_splits(data)[0]["test"]
    metrics["data"]["test_examples"] = 10  # as a run that scored 10 of them
    metrics["test"]["accuracy"] = 0.0  # its sample's score, not the whole split's
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert selection.main(["--runs", str(run), "--data", str(data), "--rounds", "1", "--out", str(tmp_path / "out")]) == 0
    row, = json.loads(next((tmp_path / "out").glob("selection-*.json")).read_text())["rows"]
    scores, _, _ = Classifier(str(run / "model.onnx")).classify(test.texts)
    run_labels, names = (json.loads((p / "labels.json").read_text()) for p in (run, data))
    whole = np.mean([run_labels[i] == names[t] for i, t in zip(np.asarray(scores).argmax(1), test.targets)])
    assert row["run_test_sample"] == {"scored": 10, "of": len(test.texts)}
    assert row["shipped_test"] == pytest.approx(whole, abs=1e-9) and whole > 0
    # every candidate on the whole split, by the benchmark (`tfm-cls eval --data`): none keeps the sample's score
    assert all(c["test_scored_by"] == "benchmark" for c in row["front"])
    assert f"the run's test: 10 of {len(test.texts)} texts" in capsys.readouterr().out
