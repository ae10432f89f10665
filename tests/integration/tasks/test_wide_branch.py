"""The bag-of-tokens branch (`model.wide`, issue 27): its logits are a linear bag of the text's
tokens, it starts at zero (the model starts as the encoder alone), trains at train.wide_lr, and
travels through the ONNX export to the torch-free runtime unchanged."""

import numpy as np
import pytest
import torch
from kits import tasks_tiny as T
from tfm_cls.export.exporter import export_run
from tfm_cls.export.verify import verify

from tfm_cls import runs as R
from tfm_cls.config import ClassifierConfig, TrainConfig, load_config
from tfm_cls.model import TransformerClassifier
from tfm_cls.optim import param_groups
from tfm_cls.predict import texts_logits
from tfm_cls.runtime.classifier import Classifier
from tfm_cls.runtime.heads import sigmoid
from tfm_cls.train import train


def _model(wide=True):
    return TransformerClassifier(vocab_size=30, num_classes=3, d_model=16, nhead=2, num_layers=1,
                                 dim_feedforward=32, max_len=16, wide=wide)


def test_wide_logits_are_an_l2_normalised_bag_of_the_tokens():
    torch.manual_seed(0)
    model = _model().eval()
    with torch.no_grad():
        model.wide.weight.normal_()
        model.wide.weight[0] = 0.0  # padding
    ids = torch.tensor([[5, 7, 7, 2, 0, 0], [3, 4, 5, 6, 8, 9]])
    mask = (ids != 0).long()
    table = model.wide.weight.detach().numpy()
    expected = np.stack([table[[5, 7, 7, 2]].sum(0) / 2.0, table[[3, 4, 5, 6, 8, 9]].sum(0) / np.sqrt(6)])
    assert model.wide_logits(ids, mask).detach().numpy() == pytest.approx(expected, rel=1e-5)
    # the branch adds to the encoder's logits; padding changes nothing
    with torch.no_grad():
        deep = model.head(model.features(ids, mask))
        assert torch.allclose(model(ids, mask), deep + model.wide_logits(ids, mask), atol=1e-6)
        padded = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], 1)
        assert torch.allclose(model(padded, (padded != 0).long()), model(ids, mask), atol=1e-5)


def test_with_encoder_length_the_encoder_reads_the_first_tokens_and_the_branch_all():
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=30, num_classes=3, d_model=16, nhead=2, num_layers=1,
                                  dim_feedforward=32, max_len=16, wide=True, encoder_length=4).eval()
    with torch.no_grad():
        model.wide.weight.normal_()
    a = torch.tensor([[5, 7, 8, 2, 9, 9, 3]])
    b = torch.tensor([[5, 7, 8, 2, 4, 11, 12]])  # differs after the 4th token only
    with torch.no_grad():
        assert torch.equal(model.features(a), model.features(b))
        assert torch.allclose(model(a) - model.wide_logits(a), model(b) - model.wide_logits(b), atol=1e-6)
        assert not torch.allclose(model(a), model(b))
    with pytest.raises(ValueError, match="encoder_length=4 needs wide=True"):
        TransformerClassifier(vocab_size=30, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                              max_len=16, encoder_length=4)


def test_the_branch_starts_at_zero_and_only_when_asked():
    assert _model().wide_logits(torch.tensor([[4, 5]])).abs().max() == 0
    assert _model(wide=False).wide is None and "wide" not in _model(wide=False).config
    assert _model().config["wide"] is True
    groups = param_groups(_model(), TrainConfig(lr=1e-4, head_lr=1e-3, wide_lr=5e-2))
    lr_of = {name: g["base_lr"] for g in groups for name in g["names"]}
    assert lr_of["wide.weight"] == 5e-2 and lr_of["head.weight"] == 1e-3 and lr_of["token_embedding.embedding.weight"] == 1e-4


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory, ml_data):
    run = tmp_path_factory.mktemp("wide") / "run"
    cfg = load_config(ClassifierConfig, None, T.overrides(ml_data, run, *T.MULTI_LABEL, "model.wide=true",
                                                           "model.encoder_length=8", "train.wide_lr=0.05"))
    return run, train(cfg)


def test_a_wide_run_trains_the_branch_and_exports_it(wide_run, tmp_path):
    run, metrics = wide_run
    loaded = R.load_run(run)
    assert loaded.model.config["wide"] is True and loaded.model.config["encoder_length"] == 8
    assert loaded.model.wide.weight.abs().max() > 0
    assert metrics["test"]["micro_f1"] > 0.8  # the tiny topics are given away by their words
    path = export_run(run)
    report = verify(loaded.model, path)
    assert report.ok and report.worst_diff < 1e-4
    texts = ["cat dog soup", "rice tea the of " * 5]  # the second is longer than the encoder's 8 tokens
    runtime, _, _ = Classifier(path).classify(texts)  # onnxruntime, sigmoid scores [2, 3]
    torch_logits, _, _ = texts_logits(loaded, texts)
    assert runtime == pytest.approx(sigmoid(torch_logits), abs=1e-5)
