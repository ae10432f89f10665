"""Training each task type end to end on tiny data: what reaches the model, what the run writes,
resume; single-label runs are unchanged (tests/integration/behaviour)."""

import json

import numpy as np
import pytest
import torch
from kits import tasks_tiny as T
from safetensors.torch import load_file

from tfm_cls import runs as R
from tfm_cls.classify.predict import run_head, texts_logits
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.model import TransformerClassifier
from tfm_cls.train import train


def test_multi_label_run_learns_and_writes_thresholds_and_per_label_figure(ml_run):
    run, metrics = ml_run
    test = metrics["test"]
    assert metrics["task"] == "multi_label" and test["micro_f1"] > 0.85 and test["macro_f1"] > 0.8
    assert set(test["per_label"]) == set(T.TOPICS) and sum(v["support"] for v in test["per_label"].values()) == 45 + 22
    thresholds = json.loads((run / R.THRESHOLDS_FILE).read_text())
    assert list(thresholds) == T.TOPICS and all(0 < t < 1 for t in thresholds.values())
    assert metrics["validation"]["thresholds"] == pytest.approx(thresholds)
    for name in (R.PER_LABEL_F1_FILE, R.REPORT_FILE, R.CURVES_FILE):
        assert (run / name).stat().st_size > 0
    assert "micro avg" in (run / R.REPORT_FILE).read_text()
    history = json.loads((run / R.HISTORY_FILE).read_text())["eval"]
    assert {"micro_f1", "macro_f1", "subset_accuracy", "loss"} <= set(history[0])
    best = max(history, key=lambda r: r["micro_f1"])  # train.best_metric=micro_f1 selected the weights
    assert metrics["best_step"] == best["step"]
    assert json.loads((run / R.MODEL_CONFIG_FILE).read_text())["type_vocab_size"] == 0  # single texts: no segments


def test_regression_pair_run_writes_scatter_and_its_metrics(reg_run):
    run, metrics = reg_run
    assert metrics["task"] == "regression" and metrics["labels"] == ["score"]
    assert {"pearson", "spearman", "mse", "loss"} <= set(metrics["test"])
    assert (run / R.SCATTER_FILE).stat().st_size > 0 and not (run / R.THRESHOLDS_FILE).exists()
    config = json.loads((run / R.MODEL_CONFIG_FILE).read_text())
    assert config["num_classes"] == 1 and config["type_vocab_size"] == 2  # a pair task gets a segment embedding


def test_token_types_reach_the_model_in_training_and_prediction(pair_data, tmp_path, monkeypatch):
    seen = []
    forward = TransformerClassifier.forward

    def spy(self, input_ids, attention_mask=None, token_type_ids=None):
        seen.append(None if token_type_ids is None else token_type_ids.clone())
        return forward(self, input_ids, attention_mask, token_type_ids)

    monkeypatch.setattr(TransformerClassifier, "forward", spy)
    run = tmp_path / "run"
    train(load_config(ClassifierConfig, None, T.overrides(pair_data, run, *T.PAIRS, "train.max_steps=2")))
    assert seen and all(t is not None for t in seen)  # every training and evaluation forward got them
    assert all(set(t.unique().tolist()) <= {0, 1} for t in seen) and any((t == 1).any() for t in seen)
    loaded = R.load_run(run)
    seen.clear()
    logits = texts_logits(loaded, ["cat dog"], ["soup rice"])[0]
    assert seen[0].tolist() == [[0, 0, 0, 0, 1, 1, 1]]  # [CLS] cat dog [SEP] soup rice [SEP]
    # The second segment matters: the same tokens with other types give other outputs.
    tok = loaded.tokenizer.encode("cat dog", "soup rice")
    ids = torch.tensor([tok.ids])
    with torch.no_grad():
        same = forward(loaded.model, ids, torch.ones_like(ids), torch.zeros_like(ids))
    assert not torch.allclose(same, torch.from_numpy(logits))


def test_predictions_are_in_input_order_and_match_the_run(ml_run, pair_data):
    run, _ = ml_run
    loaded = R.load_run(run)
    texts = ["golf tennis", "cat", "bread with some soup and a tiger", "chess"]
    logits = texts_logits(loaded, texts)[0]
    for i, text in enumerate(texts):  # one at a time: no batching, no sorting
        assert np.allclose(texts_logits(loaded, [text])[0], logits[i], atol=1e-5)
    head = run_head(loaded)
    scores = head.scores(logits)
    records = [head.fields(s, c, loaded.labels) for s, c in zip(scores, head.decide(scores))]
    assert records[0]["labels"] == ["sports"] and records[1]["labels"] == ["animals"]
    assert set(records[2]["labels"]) == {"food", "animals"}
    assert records[2]["scores"] == sorted(records[2]["scores"], reverse=True)


def test_multi_label_resume_matches_an_uninterrupted_run(ml_data, tmp_path, monkeypatch):
    from tfm_cls.classify.heads import MultiLabelHead

    extra = [*T.MULTI_LABEL, "multi_label.pos_weight=balanced", "train.epochs=3", "train.checkpoint_every=7",
             "train.eval_every=10"]
    reference = train(load_config(ClassifierConfig, None, T.overrides(ml_data, tmp_path / "ref", *extra)))
    calls = {"n": 0}
    loss = MultiLabelHead.loss

    def interrupted(self, logits, targets):
        calls["n"] += 1
        if calls["n"] == 20:  # mid-epoch 2, after the checkpoint of step 14
            raise KeyboardInterrupt
        return loss(self, logits, targets)

    monkeypatch.setattr(MultiLabelHead, "loss", interrupted)
    cfg = load_config(ClassifierConfig, None, T.overrides(ml_data, tmp_path / "cut", *extra))
    with pytest.raises(KeyboardInterrupt):
        train(cfg)
    monkeypatch.setattr(MultiLabelHead, "loss", loss)
    resumed = train(cfg, resume=True)
    assert resumed["test"]["micro_f1"] == reference["test"]["micro_f1"]
    assert resumed["validation"]["thresholds"] == reference["validation"]["thresholds"]
    a, b = load_file(tmp_path / "cut" / R.WEIGHTS_FILE), load_file(tmp_path / "ref" / R.WEIGHTS_FILE)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_cli_predict_pairs_writes_one_row_per_input_line(reg_run, tmp_path):
    from tfm_cls.cli import main

    run, _ = reg_run
    rows = [{"first": "cat dog", "second": "dog cat"}, {"first": "golf", "second": "bread"},
            {"first": "soup", "second": "soup rice"}]
    T.write_jsonl(tmp_path / "in.jsonl", rows)
    assert main(["predict", "--run", str(run), "--input", str(tmp_path / "in.jsonl"), "--text-field", "first",
                 "--output", str(tmp_path / "out.jsonl")]) == 0
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    expected = texts_logits(R.load_run(run), [r["first"] for r in rows], [r["second"] for r in rows])[0][:, 0]
    assert [o["value"] for o in out] == pytest.approx(expected.tolist(), abs=1e-6)
    T.write_jsonl(tmp_path / "bad.jsonl", [rows[0], {"first": "golf"}])
    assert main(["predict", "--run", str(run), "--input", str(tmp_path / "bad.jsonl"), "--text-field", "first"]) == 2


def test_cli_eval_reports_the_tasks_metrics(ml_run, reg_run, tmp_path):
    from tfm_cls.cli import main

    run, metrics = ml_run
    out = tmp_path / "ml.json"
    assert main(["eval", "--run", str(run), "--output", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["micro_f1"] == pytest.approx(metrics["test"]["micro_f1"])  # the run's thresholds, its test split
    assert got["thresholds"] == pytest.approx(json.loads((run / R.THRESHOLDS_FILE).read_text()))
    run, metrics = reg_run
    data = tmp_path / "eval.jsonl"
    T.write_jsonl(data, [{"first": "cat", "second": "dog", "score": 5.0}, {"first": "golf", "second": "soup", "score": 1.0},
                         {"first": "rice", "second": "bread", "score": 4.0}])
    assert main(["eval", "--run", str(run), "--data", str(data), "--output", str(out)]) == 0
    got = json.loads(out.read_text())
    values = texts_logits(R.load_run(run), ["cat", "golf", "rice"], ["dog", "soup", "bread"])[0][:, 0]
    assert got["examples"] == 3 and got["mse"] == pytest.approx(float(np.mean((values - [5.0, 1.0, 4.0]) ** 2)), abs=1e-5)
