"""The model card RUN/README.md: Hugging Face front matter and tables whose numbers are metrics.json's;
refreshed by `tfm-cls eval` and `tfm-cls export`; written atomically through tfm_cls.io."""

import json
import re
import shutil

from tfm_cls.classify.card import guess_language, parse_front_matter, render_card
from tfm_cls.cli import main


def _row(text: str, title: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {title} |"))
    return [cell.strip() for cell in line.strip("|").split("|")][1:]


def test_card_numbers_equal_metrics_json(tiny_run):
    run_dir, _ = tiny_run
    metrics = json.loads((run_dir / "metrics.json").read_text())
    card = (run_dir / "README.md").read_text()
    meta = parse_front_matter(card)
    assert meta["pipeline_tag"] == "text-classification" and meta["language"] == ["en"]
    assert meta["datasets"] == ["api_data0"] and set(meta["metrics"]) == {"accuracy", "f1"}
    results = {r["dataset"]["split"]: {m["type"]: m["value"] for m in r["metrics"]}
               for r in meta["model-index"][0]["results"]}
    for split in ("validation", "test"):  # unrounded in the front matter
        assert results[split] == {"accuracy": metrics[split]["accuracy"], "f1": metrics[split]["macro_f1"],
                                  "loss": metrics[split]["loss"]}
    for key, title in (("accuracy", "Accuracy"), ("macro_f1", "Macro-F1"), ("loss", "Loss")):
        assert _row(card, title) == [f"{metrics['validation'][key]:.4f}", f"{metrics['test'][key]:.4f}"]
    data = metrics["data"]
    for split in ("train", "validation", "test"):
        assert _row(card, split)[0] == str(data[f"{split}_examples"])
    for i, label in enumerate(metrics["labels"]):
        assert f"| {i} | {label} |" in card
    assert "![confusion matrix](confusion_matrix.png)" in card
    assert "longer than 16 tokens" in card and f"{json.loads((run_dir / 'model_config.json').read_text())['vocab_size']} wordpiece" in card
    assert "No TF-IDF baseline was computed by this run" in card  # none is made up
    assert f"{metrics['num_parameters']:,} parameters" in card


def test_baseline_column_only_where_the_run_computed_one(tiny_run, tmp_path):
    run_dir, _ = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    metrics = json.loads((copy / "metrics.json").read_text())
    # as tfm_cls.classify.finish writes it (train.baseline)
    metrics["baseline"] = {"model": "tfidf-word-lr", "C": 4.0, "train_examples": 60,
                           "test": {"accuracy": 0.8125, "macro_f1": 0.8, "loss": None}}
    (copy / "metrics.json").write_text(json.dumps(metrics))
    card = render_card(copy)
    assert "tfidf-word-lr (test)" in card and _row(card, "Accuracy")[-1] == "0.8125"
    assert "No TF-IDF baseline" not in card
    # one the clock cut to a sample says so: its score is not the classical model's
    metrics["baseline"]["shrunk"] = "baseline fitted on 60 of 2000 training texts"
    metrics["data"]["train_examples"] = 2000
    (copy / "metrics.json").write_text(json.dumps(metrics))
    assert "tfidf-word-lr on 60 of 2,000 training texts (test)" in render_card(copy)


def test_eval_and_export_refresh_the_card(tiny_run, tmp_path, tiny_data, capsys):
    run_dir, _ = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "README.md").unlink()
    assert main(["eval", "--run", str(copy), "--data", str(tiny_data), "--split", "validation",
                 "--output", str(tmp_path / "eval.json")]) == 0
    evaluated = json.loads((tmp_path / "eval.json").read_text())
    card = (copy / "README.md").read_text()
    assert f"eval: {tiny_data}" in card
    assert _row(card, "Accuracy")[-1] == f"{evaluated['accuracy']:.4f}"
    assert "tfm-cls export --run" in card
    assert main(["export", "--run", str(copy), "--providers", "CPUExecutionProvider"]) == 0
    card = (copy / "README.md").read_text()
    assert re.search(r"`model.onnx` is here \(\d+\.\d MB\)", card) and "tfm-cls export --run" not in card
    assert not list(copy.glob(".README.md.*"))  # the atomic writer's temporary files are gone


def test_language_guess():
    assert guess_language(["the", "##s", "cat"]) == "en"
    assert guess_language(["新", "闻", "体育", "a"]) == "zh"
