"""`tfm-cls report` through the command line: what it writes, who refreshes it (eval / export
--report, TextClassifier.report), and bad input: one error line, exit 2, the run unchanged."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from kits.reliability_kit import hashes
from kits.tiny_topics import CLASSES, make_texts, write_dataset

from tfm_cls.cli import main
from tfm_cls.report.collect import collect


def _one_error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_report_on_an_unfinished_run_is_one_error_and_changes_nothing(report_runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(report_runs["single"], run)
    (run / "metrics.json").unlink()  # training stopped before the end
    (run / "report.html").unlink()
    before = hashes(run)
    assert main(["report", "--run", str(run)]) == 2
    assert "is not a finished run (metrics.json missing)" in _one_error(capsys)
    assert hashes(run) == before
    assert main(["report", "--run", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in _one_error(capsys)


def test_data_with_other_label_names_is_one_error_and_changes_nothing(report_runs, tmp_path, capsys):
    run = report_runs["single"]
    rows = [{"text": r["text"], "label": ["red", "green", "blue"][r["label"]]} for r in make_texts(12, 5)]
    other = write_dataset(tmp_path / "other", {"test": rows})
    before = hashes(run)
    assert main(["report", "--run", str(run), "--data", str(other)]) == 2
    line = _one_error(capsys)
    assert "label 'red' is not a class of this run" in line and "test.jsonl" in line
    assert main(["report", "--run", str(run), "--split", "nosuch"]) == 2
    assert "no 'nosuch' split" in _one_error(capsys)
    assert hashes(run) == before


def test_report_on_other_data_names_it_and_keeps_the_run_training_split(report_runs, tmp_path):
    run = report_runs["single"]
    rows = [{"text": r["text"], "label": CLASSES[r["label"]]} for r in make_texts(24, 9)]
    data = write_dataset(tmp_path / "fresh", {"test": rows})
    content = collect(run, str(data))
    assert content["examples"] == 24 and str(data) in content["source"]
    assert content["label_errors"]["of"] == 60  # the run's own training split
    assert sum(sum(row) for row in content["confusion"]) == 24


def test_the_calibration_section_says_when_validation_does_not_represent_the_texts(report_runs, tmp_path):
    from tfm_cls.report.page import render

    run = report_runs["single"]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["calibration"]["temperature"] != 1.0 and metrics["validation"]["accuracy"] >= 0.8
    own = collect(run)
    assert abs(own["calibration"]["fitted_on"]["shift"]) < 3  # test is drawn like validation
    assert own["calibration"]["noise"]["median"] > 0
    assert 'id="calibration-noise"' in render(own) and 'id="calibration-shift"' not in render(own)
    # Texts whose labels are all moved to the next class: the model, right on validation, is wrong here.
    rows = [{"text": r["text"], "label": CLASSES[(r["label"] + 1) % len(CLASSES)]} for r in make_texts(40, 11)]
    shifted = collect(run, str(write_dataset(tmp_path / "shifted", {"test": rows})))
    fitted = shifted["calibration"]["fitted_on"]
    assert fitted["accuracy"] == metrics["validation"]["accuracy"] and fitted["examples"] == metrics["validation"]["examples"]
    assert fitted["shift"] <= -3
    page = render(shifted)
    assert 'id="calibration-shift"' in page and "standard errors apart" in page
    assert "beyond that noise: the scores are miscalibrated here" in page


def test_the_report_holds_the_runs_own_metrics_and_a_real_baseline(report_runs, report_data):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    run = report_runs["single"]
    content = collect(run)
    metrics = json.loads((run / "metrics.json").read_text())
    assert content["metrics"]["accuracy"] == metrics["test"]["accuracy"]  # the same split, the same model
    assert content["metrics"]["loss"] == pytest.approx(metrics["test"]["loss"], rel=1e-4)
    # the baseline: the same pipeline fitted here gives the same test accuracy
    train, test = ([json.loads(x) for x in (report_data["topics"] / f"{s}.jsonl").open()] for s in ("train", "test"))
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    clf = LogisticRegression(C=4.0, max_iter=1000).fit(vec.fit_transform([r["text"] for r in train]),
                                                       [r["label"] for r in train])
    acc = float(np.mean(clf.predict(vec.transform([r["text"] for r in test])) == [r["label"] for r in test]))
    assert content["baseline"]["metrics"]["accuracy"] == acc
    assert content["baseline"]["train_examples"] == 60 and content["baseline"]["seconds"] < 30
    # calibration: the ECE the page shows is that of the run's temperature on this split
    assert content["temperature"] == json.loads((run / "calibration.json").read_text())["temperature"]
    assert content["calibration"]["ece_after"] == pytest.approx(metrics["calibration"]["test"]["ece_after"], abs=1e-6)


def test_eval_and_export_refresh_the_report_with_the_flag(report_runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(report_runs["pair"], run)
    (run / "report.html").unlink()
    assert main(["eval", "--run", str(run), "--output", str(tmp_path / "m.json")]) == 0
    assert not (run / "report.html").exists()  # without --report eval stays quick
    assert main(["eval", "--run", str(run), "--output", str(tmp_path / "m.json"), "--report"]) == 0
    first = (run / "report.html").stat().st_mtime_ns
    assert main(["export", "--run", str(run), "--no-verify", "--report"]) == 0
    page = (run / "report.html").read_text()
    assert (run / "report.html").stat().st_mtime_ns > first and "model.onnx" in page
    assert "report.html" in (run / "README.md").read_text()  # the card links it


def test_textclassifier_report_writes_the_page_on_the_texts_given(tmp_path):
    from kits.api_tiny import make_texts as api_texts
    from kits.api_tiny import tiny_kwargs

    from tfm_cls import api

    texts, labels = api_texts(60, 0)
    clf = api.TextClassifier("trec", run_dir=tmp_path / "run", **tiny_kwargs()).fit(texts, labels)
    test_texts, test_labels = api_texts(24, 3)
    path = clf.report(test_texts, test_labels, train=(texts, labels))
    page = path.read_text()
    assert path == tmp_path / "run" / "report.html"
    assert "texts given" in page and 'id="baseline"' in page and "TF-IDF" in page
    from tfm_cls.report.page import SECTIONS

    assert page.count("<section") == len(SECTIONS)
    assert "60 training examples" in page  # the baseline and the label errors saw the training texts


def test_a_hand_edited_model_config_is_one_error_naming_the_file(report_runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(report_runs["wide"], run)
    config = json.loads((run / "model_config.json").read_text())
    (run / "model_config.json").write_text(json.dumps({**config, "wide_skip_ids": [10**6]}))
    assert main(["export", "--run", str(run), "--output", str(tmp_path / "model.onnx")]) == 2
    line = _one_error(capsys)
    assert "model_config.json: TransformerClassifier: wide_skip_ids must be a list of token ids" in line
    (run / "model_config.json").write_text(json.dumps({**config, "d_modle": 8}))  # a misspelt key
    assert main(["export", "--run", str(run), "--output", str(tmp_path / "model.onnx")]) == 2
    assert "model_config.json" in _one_error(capsys) and not (tmp_path / "model.onnx").exists()
