"""Loss weights in real runs (issue 27): train.class_weight reaches the training loss, metrics.json
and the model card, and distillation's gold term; bad weights are one error line, exit 2, before
anything is written (a finished run directory is left exactly as it was)."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from kits import distill_tiny as DT
from kits import tasks_tiny as T
from kits.tiny_topics import CLASSES, tiny_overrides, write_topic_data
from sklearn.utils.class_weight import compute_class_weight

from tfm_cls import runs as R
from tfm_cls.classify.heads import Head
from tfm_cls.cli import main
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.train import train


@pytest.fixture(scope="module")
def topic_data(tmp_path_factory):
    return write_topic_data(tmp_path_factory.mktemp("topics"), (60, 30, 30))


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_weighted_run_trains_with_its_weights_and_records_them(topic_data, tmp_path, monkeypatch):
    seen = []
    loss = Head.loss

    def spy(self, logits, targets):
        seen.append(self.class_weight)
        return loss(self, logits, targets)

    monkeypatch.setattr(Head, "loss", spy)
    run = tmp_path / "run"
    metrics = train(load_config(ClassifierConfig, None, tiny_overrides(topic_data, run, "train.class_weight=balanced")))
    labels = [json.loads(line)["label"] for line in (topic_data / "train.jsonl").read_text().splitlines()]
    expected = compute_class_weight("balanced", classes=np.arange(3), y=labels)
    assert seen and all(torch.allclose(w, torch.tensor(expected, dtype=torch.float32)) for w in seen)
    record = metrics["loss_weights"]
    assert record["key"] == "train.class_weight"
    assert list(record["weights"]) == CLASSES and list(record["weights"].values()) == pytest.approx(expected)
    card = (run / R.CARD_FILE).read_text()
    assert "Loss weights (`train.class_weight: balanced`): animals" in card
    assert json.loads((run / R.METRICS_FILE).read_text())["loss_weights"] == record


def test_bad_weights_fail_before_anything_is_written(topic_data, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *tiny_overrides(topic_data, run, "train.epochs=1")]) == 0
    before = _snapshot(run)
    capsys.readouterr()
    cases = [
        ("train.class_weight={sport: 2}", "train.class_weight: unknown label(s) ['sport']; the data's labels are "
                                          "['animals', 'food', 'sports']"),
        ("train.class_weight={sports: 0}", "train.class_weight.sports: expected a positive finite weight, got 0"),
        ("train.class_weight={sports: -1}", "train.class_weight.sports: expected a positive finite weight, got -1"),
    ]
    for override, message in cases:
        assert main(["train", *tiny_overrides(topic_data, run, "train.epochs=1", override), "--overwrite"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert _snapshot(run) == before  # not even train.log
    ml = T.multi_label_data(tmp_path / "ml")
    assert main(["train", *T.overrides(ml, run, *T.MULTI_LABEL, "train.label_smoothing=0",
                                        "multi_label.pos_weight={weather: 2}"), "--overwrite"]) == 2
    assert "multi_label.pos_weight: unknown label(s) ['weather']" in capsys.readouterr().err
    assert _snapshot(run) == before


def test_distillation_weights_the_gold_term(tmp_path, monkeypatch, capsys):
    from tfm_cls.distill import distill

    data = DT.write_data(tmp_path / "data")
    teacher = DT.train_teacher(data, tmp_path / "teacher")
    seen = []
    gold = Head.gold_loss

    def spy(self, student, targets):
        out = gold(self, student, targets)
        plain = F.cross_entropy(student.float(), targets.clamp(min=0), reduction="none")
        seen.append((self.class_weight, out, plain * self.class_weight[targets.clamp(min=0)]))
        return out

    monkeypatch.setattr(Head, "gold_loss", spy)
    metrics = distill(DT.distill_config(data, teacher, tmp_path / "student", "train.class_weight={food: 4}",
                                        "loss.gold_weight=0.5"))
    assert seen and all(w.tolist() == [1.0, 4.0, 1.0] for w, _, _ in seen)
    assert all(torch.allclose(out, expected) for _, out, expected in seen)  # w[gold] * cross-entropy, per example
    assert metrics["loss_weights"]["weights"] == {"animals": 1.0, "food": 4.0, "sports": 1.0}
    capsys.readouterr()
    before = _snapshot(tmp_path / "student")
    cfg_args = ["distill", *DT.TINY_STUDENT, f"data.path={data}", f"teacher.path={teacher}",
                f"run_dir={tmp_path / 'student'}", "train.class_weight={fod: 4}", "--overwrite"]
    assert main(cfg_args) == 2
    assert "train.class_weight: unknown label(s) ['fod']" in capsys.readouterr().err
    assert _snapshot(tmp_path / "student") == before
