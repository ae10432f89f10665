"""Few labelled texts longer than the model's window are read whole (the recipe's `inference.chunk` in the
few-label regime): the head is fitted on each training text's mean window vector, which is exactly what
the exported model's averaged window logits compute (tfm_cls.classify.sentence_head.example_vectors)."""

import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from kits.tiny_topics import CLASSES, FILLER, WORDS, tiny_config, write_dataset
from tfm_cls.export.exporter import export_run

from tfm_cls import runs as R
from tfm_cls.classify.predict import run_policy
from tfm_cls.classify.sentence_head import logistic_head
from tfm_cls.data.tokenizer import text_encoder
from tfm_cls.runtime.heads import softmax
from tfm_cls.runtime.session import Classifier
from tfm_cls.train import train


def _long_texts(n: int, seed: int) -> list[dict]:
    """Texts of 30-40 filler words with the topic words at the end: past the first 14-token window."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = CLASSES[i % len(CLASSES)]
        words = [rng.choice(FILLER) for _ in range(rng.randint(30, 40))] + rng.choices(WORDS[label], k=3)
        rows.append({"text": " ".join(words), "label": label})
    return rows


@torch.no_grad()
def _window_vectors(loaded, texts: list[str]) -> list[np.ndarray]:
    """Per text, its windows' unit vectors [windows, D] as the run's own policy cuts it."""
    enc = text_encoder(loaded.tokenizer, run_policy(loaded)).encode(texts)
    rows, start, out = enc.ids, 0, []
    for count in enc.windows:
        out.append(np.stack([F.normalize(loaded.model.features(torch.tensor([ids]), torch.ones(1, len(ids),
                                                                                                dtype=torch.long)),
                                         dim=-1)[0].numpy() for ids in rows[start:start + count]]))
        start += count
    return out


def test_long_few_label_texts_are_read_whole_by_the_head_and_by_the_export(tmp_path):
    train_rows, test_rows = _long_texts(12, 0), _long_texts(9, 1)
    data = write_dataset(tmp_path / "data", {"train": train_rows, "test": test_rows})
    run = tmp_path / "run"
    cfg = tiny_config(data, run, "data.validation_fraction=0", "model.normalize=true", "contrastive.iterations=1",
                      "train.best_metric=accuracy", "inference.chunk=true")
    metrics = train(cfg)
    assert metrics["candidates"]["chosen"] == "encoder"
    loaded = R.load_run(run)
    texts = [r["text"] for r in train_rows]
    targets = np.array([CLASSES.index(r["label"]) for r in train_rows])
    per_text = _window_vectors(loaded, texts)
    means = np.stack([v.mean(axis=0) for v in per_text])
    assert min(len(v) for v in per_text) >= 3  # every training text is several windows long
    # the head is the logistic regression of the mean window vectors (not of the first windows')
    weight, bias = logistic_head(means, targets, len(CLASSES), cfg.contrastive.head_c, cfg.seed)
    head = loaded.model.head
    # within lbfgs' own tolerance (tol 1e-4 on the gradient): the run's vectors came in batches, these one by one,
    # a float32 rounding apart, and scikit-learn 1.9's solver stops 2e-4 apart on them; the first windows' head
    # (below) is 1e-2 away
    assert head.weight.detach().numpy() == pytest.approx(weight, abs=1e-3)
    assert head.bias.detach().numpy() == pytest.approx(bias, abs=1e-3)
    first = np.stack([v[0] for v in per_text])
    first_weight, _ = logistic_head(first, targets, len(CLASSES), cfg.contrastive.head_c, cfg.seed)
    assert np.abs(first_weight - weight).max() > 1e-2  # the first windows alone would have given another head
    # the exported model averages its windows' logits: the head on the mean vector, calibrated
    scores, _, counts = Classifier(str(export_run(run))).classify([r["text"] for r in test_rows])
    test_vectors = _window_vectors(loaded, [r["text"] for r in test_rows])
    test_means = np.stack([v.mean(axis=0) for v in test_vectors])
    assert list(counts) == [len(v) for v in test_vectors] and min(counts) >= 3
    expected = softmax((test_means @ weight.T + bias) / loaded.temperature)
    assert np.asarray(scores) == pytest.approx(expected, abs=1e-3)


def test_where_the_end_does_not_fit_the_test_texts_are_a_sample_and_the_head_reads_first_windows(tmp_path,
                                                                                                  monkeypatch):
    """A spent budget and a model probed at 2 s a text: the end's share holds none of the 30 test texts, so
    it scores the floor, END_MIN_EXAMPLES of them (tfm_cls.train.end_sample); the head has no time for every window of the training texts
    either, and is the frozen encoder's on their first windows (the cross-validation's vectors, no step
    trained), each said in metrics.json; the cap is in the run's config, so a resume draws the same texts."""
    import time

    import yaml

    from tfm_cls.train import recipe
    from tfm_cls.training import budget

    train_rows, test_rows = _long_texts(12, 0), _long_texts(30, 1)
    data = write_dataset(tmp_path / "data", {"train": train_rows, "test": test_rows})
    run = tmp_path / "run"
    cfg = tiny_config(data, run, "data.validation_fraction=0", "model.normalize=true", "contrastive.iterations=1",
                      "train.best_metric=accuracy", "inference.chunk=true", "train.wall_minutes=1")
    monkeypatch.setattr(budget, "END_MIN_EXAMPLES", 4)
    monkeypatch.setattr(recipe, "_seconds_per_text", lambda *args: 2.0)
    metrics = train(cfg, started=time.monotonic() - 3600)
    shrunk = metrics["wall_clock"]["shrunk"]
    assert any(s.startswith("validation and test scored on a seeded sample of at most 4 examples each (of 30)")
               for s in shrunk)
    assert any(s.startswith("the head read each training text's first window") for s in shrunk)
    saved = yaml.safe_load((run / R.CONFIG_FILE).read_text())
    assert saved["data"]["max_eval_samples"] == 4
    report = (run / R.REPORT_FILE).read_text()
    assert report.split()[-1] == "4"  # the report's support: the 4 texts scored
    assert metrics["steps"] == 0
    loaded = R.load_run(run)
    per_text = _window_vectors(loaded, [r["text"] for r in train_rows])
    targets = np.array([CLASSES.index(r["label"]) for r in train_rows])
    first = np.stack([v[0] for v in per_text])
    weight, bias = logistic_head(first, targets, len(CLASSES), cfg.contrastive.head_c, cfg.seed)
    assert loaded.model.head.weight.detach().numpy() == pytest.approx(weight, abs=1e-3)
