"""A calibrated run against the same run uncalibrated: the same weights and predicted labels,
other probabilities; what calibration.json, metrics.json and the card record; the bad configs."""

from __future__ import annotations

import numpy as np
import pytest
from kits.tiny_topics import tiny_overrides

from tfm_cls.classify.calibration import SHIFT_Z, accuracy_shift, nll
from tfm_cls.classify.predict import classify_texts, texts_logits
from tfm_cls.cli import main
from tfm_cls.io import file_sha256, read_json
from tfm_cls.runs import load_run


def _test_texts(data):
    rows = [__import__("json").loads(line) for line in (data / "test.jsonl").read_text().splitlines()]
    return [r["text"] for r in rows], np.array([r["label"] for r in rows])


def test_calibration_changes_the_scores_not_the_weights_nor_the_labels(runs, noisy):
    cal, raw = runs["calibrated"], runs["raw"]
    assert file_sha256(cal / "model.safetensors") == file_sha256(raw / "model.safetensors")
    saved = read_json(cal / "calibration.json")
    assert not (raw / "calibration.json").exists()
    t = saved["temperature"]
    assert 0.05 < t < 20 and abs(t - 1) > 0.05
    cal_run, raw_run = load_run(cal), load_run(raw)
    assert cal_run.temperature == t and raw_run.temperature == 1.0
    texts, labels = _test_texts(noisy)
    p_cal, _, _ = classify_texts(cal_run, texts)
    p_raw, _, _ = classify_texts(raw_run, texts)
    assert (p_cal.argmax(1) == p_raw.argmax(1)).all()
    assert np.abs(p_cal - p_raw).max() > 1e-3
    logits, _, _ = texts_logits(raw_run, texts)
    np.testing.assert_allclose(p_cal, np.exp(logits / t) / np.exp(logits / t).sum(1, keepdims=True), atol=1e-6)
    m_cal, m_raw = read_json(cal / "metrics.json"), read_json(raw / "metrics.json")
    assert m_cal["test"]["accuracy"] == m_raw["test"]["accuracy"]
    assert m_cal["test"]["macro_f1"] == m_raw["test"]["macro_f1"]
    # the test loss is the NLL of the calibrated scores; the fitted T lowers the validation NLL
    assert m_cal["test"]["loss"] == pytest.approx(nll(logits, labels, t), rel=1e-4)
    v = m_cal["calibration"]["validation"]
    assert v["nll_after"] < v["nll_before"]
    assert m_cal["calibration"]["test"]["ece_before"] >= 0 and "calibration" not in m_raw
    card = (cal / "README.md").read_text()
    assert "## Calibration" in card and f"{t:.4f}" in card and "## Calibration" not in (raw / "README.md").read_text()
    # how far apart validation (where T was fitted) and test accuracy are, in standard errors
    shift = m_cal["calibration"]["test"]["accuracy_shift"]
    v_acc, v_n, t_acc, t_n = (m_cal[s][k] for s in ("validation", "test") for k in ("accuracy", "examples"))
    assert shift == pytest.approx(accuracy_shift(v_acc, v_n, t_acc, t_n))
    assert ("standard errors apart" in card) == (abs(shift) >= SHIFT_Z)


def test_the_card_says_when_validation_does_not_represent_test(runs, tmp_path):
    import shutil

    from tfm_cls.classify.card import write_card
    from tfm_cls.io import write_json

    run = tmp_path / "run"
    shutil.copytree(runs["calibrated"], run)
    metrics = read_json(run / "metrics.json")
    metrics["calibration"]["test"]["accuracy_shift"] = 3.4  # as the sst2 student of docs/report.md
    write_json(run / "metrics.json", metrics)
    write_card(run)
    assert "**Validation and test accuracy are 3.4 standard errors apart**" in (run / "README.md").read_text()


def test_predict_rows_keep_their_labels(runs, noisy, tmp_path):
    texts, _ = _test_texts(noisy)
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    out = {}
    for name, run in runs.items():
        assert main(["predict", "--run", str(run), "--input", str(tmp_path / "in.txt"),
                     "--output", str(tmp_path / f"{name}.jsonl")]) == 0
        out[name] = [__import__("json").loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
    assert [r["label"] for r in out["calibrated"]] == [r["label"] for r in out["raw"]]
    assert [r["score"] for r in out["calibrated"]] != [r["score"] for r in out["raw"]]


def test_explicit_temperature_on_a_multi_label_run_is_one_error_line(tmp_path, capsys, noisy):
    code = main(["train", *tiny_overrides(noisy, tmp_path / "run", "data.task=multi_label", "train.best_metric=micro_f1",
                                          "train.calibration=temperature")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "train.calibration=temperature applies to single_label only" in err[0]
    assert not (tmp_path / "run").exists()


def test_an_unreadable_calibration_file_is_one_error(runs, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(runs["calibrated"], run)
    (run / "calibration.json").write_text('{"temperature": -1}')
    assert main(["predict", "--run", str(run), "--input", "-"]) == 2
    assert "calibration.json: expected" in capsys.readouterr().err
