"""A run that made several deployables ships one (tfm_cls.bag.candidates): the front in metrics.json
and the card, the chosen model as the run's model, the others in RUN/candidates/, each exported,
verified and run by the torch-free runtime; `tfm-cls export --candidate` exports another."""

import json
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
import torch
from kits.tiny_topics import TINY, write_topic_data
from safetensors.torch import load_file

from tfm_cls import cli
from tfm_cls import runs as R
from tfm_cls.bag.candidates import SPEED_NOISE, candidate_models
from tfm_cls.bag.second import train_out_of_fold
from tfm_cls.bag.warm_start import OFFSETS_FILE, branch_bias
from tfm_cls.classify.predict import texts_logits
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.model import BagOfTermsClassifier, TransformerClassifier
from tfm_cls.runtime.heads import softmax
from tfm_cls.runtime.session import Classifier
from tfm_cls.train import train

WIDE = ["wide.enabled=true", "wide.weighting=tfidf", "wide.warm_start=true", "wide.ngrams=2", "wide.buckets=512",
        "train.eval_at_start=true", "train.epochs=2", "train.device=cpu"]
TEXTS = ["the cat and the dog", "soup with rice and bread", "tennis golf", "", "zzz unknown " * 40]


@pytest.fixture(scope="module")
def chosen_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("candidates")
    data = write_topic_data(folder / "data")
    run = folder / "run"
    metrics = train(load_config(ClassifierConfig, None, [*TINY, f"data.path={data}", f"run_dir={run}", *WIDE]))
    return run, metrics


def test_the_run_scores_its_candidates_and_ships_the_one_the_rule_picks(chosen_run):
    run, metrics = chosen_run
    front = {row["name"]: row for row in metrics["candidates"]["front"]}
    metric = metrics["best_metric"]
    assert set(front) == {"wide_and_deep", "bag_of_terms"}
    for row in front.values():
        assert set(row["validation"]) == {metric} and set(row["test"]) == {metric}
        assert row["texts_per_second"] > 0 and row["size_mb"] > 0
    # the rule, checked against the front itself: the best on validation holds, then the fastest that holds
    # (the smallest of those whose speed is within the timing noise of the fastest)
    best = max(front.values(), key=lambda r: r["validation"][metric])
    assert best["holds_best"]
    holding = [r for r in front.values() if r["holds_best"]]
    fastest = max(r["texts_per_second"] for r in holding)
    alike = [r for r in holding if r["texts_per_second"] >= (1 - SPEED_NOISE) * fastest]
    chosen = min(alike, key=lambda r: r["size_mb"])
    assert metrics["candidates"]["chosen"] == chosen["name"] and chosen["chosen"]
    assert sum(r["chosen"] for r in front.values()) == 1
    # the encoder's head is the warm start's zeros only where the loop kept step 0: then the two are one model
    assert ("same_logits_as" in front["wide_and_deep"]) == (metrics["best_step"] == 0)
    assert "same_logits_as" not in front["bag_of_terms"]
    # the bag has no encoder: smaller and faster than the model that carries one
    assert front["bag_of_terms"]["size_mb"] < front["wide_and_deep"]["size_mb"]
    # the chosen model is the run's model; the other lies in RUN/candidates/NAME with its config
    other = next(name for name in front if name != chosen["name"])
    loaded = R.load_run(run)
    expected = BagOfTermsClassifier if chosen["name"] == "bag_of_terms" else TransformerClassifier
    assert isinstance(loaded.model, expected)
    assert (run / R.CANDIDATES_DIR / other / R.WEIGHTS_FILE).is_file()
    assert json.loads((run / R.MODEL_CONFIG_FILE).read_text())["num_classes"] == 3
    # the run's scores are the chosen model's
    assert metrics["validation"][metric] == pytest.approx(chosen["validation"][metric])
    assert metrics["test"][metric] == pytest.approx(chosen["test"][metric])
    card = (run / R.CARD_FILE).read_text()
    assert "## What the run chose" in card and f"`{chosen['name']}`" in card


def test_the_chosen_and_the_other_candidate_export_verify_and_run_without_torch(chosen_run, tmp_path, capsys):
    run, metrics = chosen_run
    chosen = metrics["candidates"]["chosen"]
    other = next(r["name"] for r in metrics["candidates"]["front"] if not r["chosen"])
    assert cli.main(["export", "--run", str(run)]) == 0
    other_path = run / "other.onnx"  # beside the run: exported from one of its candidates, so not stale
    assert cli.main(["export", "--run", str(run), "--candidate", other, "--output", str(other_path)]) == 0
    for name, path in ((chosen, run / "model.onnx"), (other, other_path)):
        loaded = R.load_run(run, candidate=name)
        scores, _, _ = Classifier(path).classify(TEXTS)
        torch_logits, _, _ = texts_logits(loaded, TEXTS)
        assert np.asarray(scores) == pytest.approx(softmax(torch_logits / loaded.temperature), abs=1e-5)
    sizes = {name: path.stat().st_size for name, path in ((chosen, run / "model.onnx"), (other, other_path))}
    assert sizes["bag_of_terms"] < sizes["wide_and_deep"]
    # a shipped bag on the int8 grid (tfm_cls.bag.shrink) exports its table as int8 rows; a candidate as fitted
    tables = next(r for r in metrics["candidates"]["front"] if r["chosen"]).get("bag_tables")
    int8 = {name: any(t.data_type == onnx.TensorProto.INT8 for t in onnx.load(str(path)).graph.initializer)
            for name, path in ((chosen, run / "model.onnx"), (other, other_path))}
    assert int8 == {chosen: bool(tables and tables["int8"]), other: False}
    assert (tables is not None) == (chosen == "bag_of_terms")
    # a candidate the run did not make: one error naming the ones it did, exit 2, nothing written
    capsys.readouterr()
    assert cli.main(["export", "--run", str(run), "--candidate", "nope", "--output", str(tmp_path / "x.onnx")]) == 2
    err = capsys.readouterr().err
    assert "no candidate 'nope'" in err and other in err and not (tmp_path / "x.onnx").exists()


def test_eval_scores_another_candidate_as_the_run_scored_it_and_keeps_the_card_the_shipped_models(chosen_run, tmp_path,
                                                                                                  capsys):
    run, metrics = chosen_run
    metric = metrics["best_metric"]
    front = {row["name"]: row for row in metrics["candidates"]["front"]}
    other = next(name for name, row in front.items() if not row["chosen"])
    evaluations = run / "evaluations.json"
    before = evaluations.read_text() if evaluations.is_file() else None
    out = tmp_path / "other.json"
    assert cli.main(["eval", "--run", str(run), "--candidate", other, "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    # the candidate's own test score, as the run's choice measured it (not the shipped model's)
    assert result["candidate"] == other
    assert result[metric] == pytest.approx(front[other]["test"][metric], abs=1e-9)
    assert (evaluations.read_text() if evaluations.is_file() else None) == before  # the card's table: shipped only
    shipped = tmp_path / "shipped.json"
    assert cli.main(["eval", "--run", str(run), "--output", str(shipped)]) == 0
    assert "candidate" not in json.loads(shipped.read_text())
    assert json.loads(shipped.read_text())[metric] == pytest.approx(metrics["test"][metric], abs=1e-9)
    # the report is the shipped model's page: asked with a candidate, one error, exit 2
    capsys.readouterr()
    assert cli.main(["eval", "--run", str(run), "--candidate", other, "--report"]) == 2
    assert "--report shows the model the run chose" in capsys.readouterr().err
    assert cli.main(["eval", "--run", str(run), "--candidate", "nope", "--output", str(tmp_path / "x.json")]) == 2
    assert "no candidate 'nope'" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


def test_the_bag_candidate_is_the_warm_start_as_fitted_not_the_trained_heads_bias(chosen_run):
    run, metrics = chosen_run
    # the warm start keeps the bias it fitted with the branch (RUN/wide_offsets.safetensors)
    fitted = branch_bias(run)
    assert fitted is not None and fitted.shape == (3,)
    bag = R.load_run(run, candidate="bag_of_terms").model
    assert torch.equal(bag.bias.detach(), fitted)
    # the encoder's training moves the head's bias (here: by hand); the bag candidate keeps the fitted one
    deep = R.load_run(run, candidate="wide_and_deep")
    with torch.no_grad():
        deep.model.head.bias.add_(1.0)
    tokens = SimpleNamespace(input_ids=[[5, 6, 7]], lengths=np.array([3]))
    task = SimpleNamespace(model=deep.model, cfg=deep.config, run_dir=run, splits={"train": tokens})
    models = candidate_models(task)
    assert torch.equal(models["bag_of_terms"].bias.detach(), fitted)
    assert torch.equal(models["bag_of_terms"].wide.weight, deep.model.wide.weight)  # the branch as fitted


def test_a_spent_budget_still_writes_a_run_from_the_warm_start_and_says_what_it_cut(tmp_path, caplog):
    import time

    data = write_topic_data(tmp_path / "data")
    run = tmp_path / "run"
    cfg = load_config(ClassifierConfig, None, [*TINY, f"data.path={data}", f"run_dir={run}", *WIDE,
                                               "train.wall_minutes=1", "wide.second_bag_ngrams=3"])
    metrics = train(cfg, started=time.monotonic() - 3600)  # a 1-minute budget spent an hour ago
    # the warm start makes its first fit and stops there; the step-0 evaluation (the bag: the head is
    # zero) finds no time for a first step; the run is written all the same, and says what it cut
    assert metrics["steps"] == 0 and metrics["stopped"].startswith("wall-clock budget")
    shrunk = metrics["wall_clock"]["shrunk"]
    # the grid fitted its first C only: stopped by the spent budget, or ended by a perfect validation score
    assert any(s.startswith("the warm start's C grid stopped") for s in shrunk) or \
        "the best it can be: no other C is fitted" in caplog.text
    assert any(s.startswith("no out-of-fold logits") for s in shrunk)
    assert "no bag_of_terms_3 candidate (the warm start's share of the budget is spent)" in shrunk
    assert not (run / R.CANDIDATES_DIR / "bag_of_terms_3").exists()
    # the kept weights are the start's, where the encoder adds nothing: the two score alike, the bag ships
    front = {row["name"]: row for row in metrics["candidates"]["front"]}
    assert front["bag_of_terms"]["validation"] == front["wide_and_deep"]["validation"]
    assert metrics["candidates"]["chosen"] == "bag_of_terms"
    # the two compute the same logits: the encoder is not read over test to repeat the bag's score
    assert front["wide_and_deep"]["same_logits_as"] == "bag_of_terms" and "same_logits_as" not in front["bag_of_terms"]
    metric = metrics["best_metric"]
    assert front["wide_and_deep"]["test"] == front["bag_of_terms"]["test"] == {metric: metrics["test"][metric]}
    assert "wide_and_deep (the logits of bag_of_terms)" in (run / R.CARD_FILE).read_text()
    assert isinstance(R.load_run(run).model, BagOfTermsClassifier)
    assert set(metrics["test"]) >= {metrics["best_metric"]}
    # no time left: the bag ships as fitted, float32, and the front says why
    assert front["bag_of_terms"]["bag_tables"]["tried"] == [] and not front["bag_of_terms"]["bag_tables"]["int8"]
    assert "wide_int8" not in R.load_run(run).model.config


def test_a_second_bag_is_fitted_as_a_candidate_of_its_own_and_exports_as_any_other(tmp_path):
    data = write_topic_data(tmp_path / "data")
    run = tmp_path / "run"
    cfg = load_config(ClassifierConfig, None, [*TINY, f"data.path={data}", f"run_dir={run}", *WIDE,
                                               "wide.second_bag_ngrams=3", "wide.second_bag_buckets=1024"])
    metrics = train(cfg)
    front = {row["name"]: row for row in metrics["candidates"]["front"]}
    assert set(front) == {"wide_and_deep", "bag_of_terms", "bag_of_terms_3"}
    loaded = R.load_run(run, candidate="bag_of_terms_3")
    bag = loaded.model
    assert isinstance(bag, BagOfTermsClassifier) and (bag.wide.ngrams, bag.wide.buckets) == (3, 1024)
    assert bag.wide.weight.abs().sum() > 0 and (bag.wide.idf > 0).any()  # fitted, its own IDF table
    # the triples' rows hold weights of their own: not the word bag's 512 rows in a bigger table
    assert bag.wide.weight[bag.wide.vocab_size + 512:].abs().sum() > 0
    metric = metrics["best_metric"]
    # scored and timed as the others; a candidate not shipped lies in RUN/candidates/ as the others do
    assert front["bag_of_terms_3"]["texts_per_second"] > 0 and set(front["bag_of_terms_3"]["test"]) == {metric}
    assert front["bag_of_terms_3"]["size_mb"] > front["bag_of_terms"]["size_mb"]  # 1,024 hashed rows, not 512
    # both bags kept their out-of-fold training logits, and the choice compared the two on them too
    train_texts = [json.loads(line)["text"] for line in (data / "train.jsonl").read_text().splitlines()]
    shape = (len(train_texts), 3)
    first, second = (train_out_of_fold(run, name, shape) for name in ("bag_of_terms", "bag_of_terms_3"))
    assert first is not None and second is not None
    assert f"two bags also on {len(train_texts)} training texts' out-of-fold logits" in metrics["candidates"]["rule"]
    # the first bag's are the warm start's: its offsets (out of fold minus in sample) plus the bag's own logits
    word_bag = R.load_run(run, candidate=None if metrics["candidates"]["chosen"] == "bag_of_terms" else "bag_of_terms")
    if word_bag.model.config.get("wide_int8"):  # shipped on the int8 grid (tfm_cls.bag.shrink): the bag as fitted
        deep = R.load_run(run, candidate="wide_and_deep").model
        word_bag.model = BagOfTermsClassifier.from_wide_and_deep(deep, 16, branch_bias(run))
    in_sample, _, _ = texts_logits(word_bag, train_texts)
    offsets = load_file(str(run / OFFSETS_FILE))["offsets"].numpy()
    assert first == pytest.approx(offsets + in_sample, abs=1e-4)
    assert np.abs(offsets).max() > 1e-3  # fitted without each text: not the bag's own logits
    triples_in_sample, _, _ = texts_logits(loaded, train_texts)
    assert np.abs(second - triples_in_sample).max() > 1e-3
    # exported, it is what the runtime runs: the same scores as the PyTorch model on texts of any length
    path = tmp_path / "bag3.onnx"
    assert cli.main(["export", "--run", str(run), "--candidate", "bag_of_terms_3", "--output", str(path)]) == 0
    scores, _, _ = Classifier(path).classify(TEXTS)
    torch_logits, _, _ = texts_logits(loaded, TEXTS)
    assert np.asarray(scores) == pytest.approx(softmax(torch_logits / loaded.temperature), abs=1e-5)
