"""Few labelled texts: the classical model against the encoder by cross-validation on the labelled texts
(tfm_cls.bag.few_labels). Where the words give the class away and the encoder knows nothing
(a random one), the bag of terms ships, with no fine-tuning, as one verified .onnx run by the runtime."""

import numpy as np
import pytest
from kits.tiny_topics import CLASSES, TINY, make_texts, write_dataset
from tfm_cls.export.exporter import export_run
from tfm_cls.export.verify import verify

from tfm_cls import runs as R
from tfm_cls.classify.predict import texts_logits
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.model import BagOfTermsClassifier
from tfm_cls.runtime.heads import softmax
from tfm_cls.runtime.session import Classifier
from tfm_cls.train import train


def _few_label_config(tmp_path, tests: int, *overrides: str) -> ClassifierConfig:
    """A few-label run's config: 18 labelled topic texts (6 a class, named labels), `tests` test texts,
    no validation, the contrastive regime's keys, and `overrides`."""
    names = lambda rows: [{"text": r["text"], "label": CLASSES[r["label"]]} for r in rows]  # noqa: E731
    data = write_dataset(tmp_path / "data", {"train": names(make_texts(18, 0)), "test": names(make_texts(tests, 5))})
    return load_config(ClassifierConfig, None, [*TINY, f"data.path={data}", f"run_dir={tmp_path / 'run'}",
                                                "data.validation_fraction=0", "model.normalize=true",
                                                "train.best_metric=accuracy", *overrides])


def test_the_bag_wins_the_cross_validation_where_the_words_tell_and_ships_without_fine_tuning(tmp_path):
    run = tmp_path / "run"
    metrics = train(_few_label_config(tmp_path, 30, "contrastive.iterations=2", "contrastive.prefer_bag=true"))
    front = {row["name"]: row for row in metrics["candidates"]["front"]}
    assert metrics["candidates"]["chosen"] == "bag_of_terms" and front["bag_of_terms"]["chosen"]
    # the planner's key for a script the encoder cannot read: the bag ships unless beaten, ship_bag unset
    assert "ships unless the frozen encoder beats it" in metrics["candidates"]["rule"]
    # a random encoder's frozen vectors say little; the topic words say it all
    assert front["bag_of_terms"]["validation"]["accuracy"] > front["encoder"]["validation"]["accuracy"] + \
        front["bag_of_terms"]["tolerance"]
    assert {"blend 0.25", "blend 0.5", "blend 0.75"} <= set(front)
    assert metrics["steps"] == 0 and "cross-validation" in metrics["stopped"]  # no contrastive stage was paid for
    assert metrics["test"]["accuracy"] > 0.9
    loaded = R.load_run(run)
    assert isinstance(loaded.model, BagOfTermsClassifier)
    # it counts the texts' words, not the tokenizer's [CLS] / [SEP] (wide.count_special_tokens: false)
    markers = sorted(loaded.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]"))
    assert loaded.model.config["wide_skip_ids"] == markers and loaded.model.wide.idf[markers].max() == 0
    path = export_run(run)
    assert verify(loaded.model, path).ok
    texts = ["a dog and a cat", "rice soup", "chess golf tennis", ""]
    scores, _, _ = Classifier(str(path)).classify(texts)
    torch_logits, _, _ = texts_logits(loaded, texts)
    assert np.asarray(scores) == pytest.approx(softmax(torch_logits / loaded.temperature), abs=1e-5)


def test_by_default_the_cross_validation_is_reported_and_the_encoder_is_fine_tuned(tmp_path):
    metrics = train(_few_label_config(tmp_path, 12, "contrastive.iterations=1"))
    front = {row["name"]: row for row in metrics["candidates"]["front"]}
    assert metrics["candidates"]["chosen"] == "encoder" and "ship_bag is on (off)" in metrics["candidates"]["rule"]
    assert front["bag_of_terms"]["validation"]["accuracy"] > front["encoder"]["validation"]["accuracy"]
    assert metrics["steps"] > 0  # the contrastive stage ran
    assert not isinstance(R.load_run(tmp_path / "run").model, BagOfTermsClassifier)


def test_a_spent_budget_ends_the_fine_tuning_before_a_step_and_still_ships_a_fitted_head(tmp_path):
    import time

    run = tmp_path / "run"
    cfg = _few_label_config(tmp_path, 12, "contrastive.iterations=1", "train.wall_minutes=1")
    metrics = train(cfg, started=time.monotonic() - 3600)  # a 1-minute budget spent an hour ago
    # the end of the run (scoring the test texts, timed on them before the pairs) needs what is left: no step
    assert metrics["steps"] == 0 and metrics["stopped"].startswith("wall-clock budget")
    assert metrics["candidates"]["chosen"] == "encoder" and set(metrics["test"]) >= {"accuracy"}
    # the cross-validation's bag fits had no time either: each stopped after its first L-BFGS chunk, and said so
    assert any(s.startswith("the few-label cross-validation's bag fits stopped") for s in metrics["wall_clock"]["shrunk"])
    model = R.load_run(run).model  # the frozen encoder with its head fitted on the labelled texts' vectors
    assert not isinstance(model, BagOfTermsClassifier) and model.head.weight.abs().sum() > 0
