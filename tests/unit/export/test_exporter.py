"""Classifier export: spec conformance via the one verifier, named dynamic axes, metadata, a single
file, the format marker, probabilities (the verifier on good and broken models: test_verify.py)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from kits.export_testkit import LABELS, MAX_LENGTH, tiny_classifier
from tfm_cls.export import infer, spec
from tfm_cls.export.exporter import export_classifier
from tfm_cls.export.verify import verify
from tokenizers import Tokenizer

import tfm_cls
from tfm_cls.errors import InferenceError
from tfm_cls.model import TransformerClassifier
from tfm_cls.runtime.session import Classifier


@pytest.mark.parametrize(
    ("pooling", "norm_first", "fuse"),
    [
        ("cls", False, False),
        ("max", True, True),  # also the onnxruntime-fused graph
        pytest.param("mean", False, False, marks=pytest.mark.slow),
        pytest.param("cls", True, False, marks=pytest.mark.slow),
        pytest.param("max", False, False, marks=pytest.mark.slow),
        pytest.param("mean", True, True, marks=pytest.mark.slow),
    ],
)
def test_export_and_verify_each_pooling_and_norm(pooling, norm_first, fuse, tmp_path):
    # (mean, pre-norm, unfused) is the shared `classifier_onnx` fixture, verified below.
    model = tiny_classifier(pooling, norm_first, seed=1)
    path = export_classifier(model, tmp_path / "model.onnx", tokenizer=None, labels=LABELS, fuse=fuse)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ("MultiHeadAttention" in ops) == fuse
    report = verify(model, path)
    assert report.ok
    names = [c.name for c in report.checks]
    assert names[:3] == ["metadata", "names", "dynamic axes"]
    assert "values (CPU)" in names and "output shapes (CPU)" in names


def test_graph_has_named_dynamic_axes(classifier_onnx):
    graph = onnx.load(str(classifier_onnx)).graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph.input}
    assert dims == {"input_ids": ["batch", "sequence"], "attention_mask": ["batch", "sequence"]}
    out = {v.name: v.type.tensor_type.shape.dim for v in graph.output}
    assert set(out) == {"logits", "probabilities"}
    assert out["logits"][0].dim_param and out["logits"][1].dim_value == len(LABELS)


def test_single_self_contained_file(classifier_onnx):
    assert [p.name for p in classifier_onnx.parent.iterdir()] == ["model.onnx"]
    model = onnx.load(str(classifier_onnx), load_external_data=False)
    assert model.graph.initializer
    assert not any(init.data_location == onnx.TensorProto.EXTERNAL for init in model.graph.initializer)


def test_metadata_is_enough_to_deploy(classifier, classifier_onnx, tokenizer):
    meta = {p.key: p.value for p in onnx.load(str(classifier_onnx)).metadata_props}
    assert meta[spec.FORMAT_KEY] == spec.FORMAT_VERSION
    assert meta[spec.TASK_KEY] == "text-classification"
    assert json.loads(meta["tfm_cls.labels"]) == LABELS
    assert int(meta["tfm_cls.max_length"]) == MAX_LENGTH
    assert json.loads(meta["tfm_cls.model_config"]) == classifier.config
    assert meta["tfm_cls.version"] == tfm_cls.__version__
    assert meta["torch.version"] == torch.__version__
    opset = {o.domain: o.version for o in onnx.load(str(classifier_onnx)).opset_import}[""]
    assert int(meta["onnx.opset"]) == opset
    restored = Tokenizer.from_str(meta["tfm_cls.tokenizer"])
    text = "the music is lovely but the plot drags"
    assert restored.encode(text).ids == tokenizer.encode(text).ids


def _with_format_marker(src, dst, marker: str | None):
    """A copy of the export whose format marker is `marker` (None: no marker at all)."""
    model = onnx.load(str(src))
    meta = {p.key: p.value for p in model.metadata_props if p.key != spec.FORMAT_KEY}
    onnx.helper.set_model_props(model, meta if marker is None else {**meta, spec.FORMAT_KEY: marker})
    onnx.save(model, str(dst))
    return dst


def test_inference_accepts_the_exported_format_marker_and_no_other(classifier_onnx, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the music is lovely\n")
    assert Classifier(str(classifier_onnx)).labels == LABELS
    assert infer.main(["--model", str(classifier_onnx), "--input", str(src), "--output", str(tmp_path / "out.jsonl"),
                       "--no-progress"]) == 0
    capsys.readouterr()
    for name, marker in (("older.onnx", "tfm_cls-onnx/0"), ("unmarked.onnx", None)):
        copy = _with_format_marker(classifier_onnx, tmp_path / name, marker)
        with pytest.raises(InferenceError) as refused:
            Classifier(str(copy))
        assert repr(spec.FORMAT_KEY) in str(refused.value)
        assert infer.main(["--model", str(copy), "--input", str(src), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and len(err.splitlines()) == 1, err
        assert f"{copy} is not a tfm_cls model" in err and repr(spec.FORMAT_KEY) in err
        assert repr(marker or "no such key") in err  # what it found instead


def test_probabilities_are_softmax_of_logits(classifier_onnx):
    session = ort.InferenceSession(str(classifier_onnx), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(5, 90, (3, 11)), "attention_mask": np.ones((3, 11), dtype=np.int64)}
    logits, probs = session.run(["logits", "probabilities"], feeds)
    expected = torch.from_numpy(logits).softmax(-1).numpy()
    np.testing.assert_allclose(probs, expected, atol=1e-6)


@pytest.mark.slow
def test_export_and_verify_bert_style_classifier(tmp_path):
    """The options that let BERT-family checkpoints map onto our classifier (MiniLM fine-tuning)."""
    torch.manual_seed(2)
    model = TransformerClassifier(
        vocab_size=90, num_classes=2, d_model=16, nhead=4, num_layers=2, dim_feedforward=32, dropout=0.0,
        max_len=40, pooling="cls", norm_first=False, scale_embedding=False, position_embedding="learned",
        type_vocab_size=2, embedding_layer_norm=True, pooler=True,
    ).eval()
    path = export_classifier(model, tmp_path / "bert.onnx", tokenizer=None, labels=["neg", "pos"])
    assert verify(model, path).ok
