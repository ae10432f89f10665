"""Classifier export: spec conformance via the one verifier, metadata, single file, and that the
verifier fails loudly on broken models."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from kits.export_testkit import LABELS, MAX_LENGTH, tiny_classifier
from onnx import numpy_helper
from tfm_cls.export import infer, spec
from tfm_cls.export.exporter import export_classifier
from tfm_cls.export.verify import VerificationError, verify
from tokenizers import Tokenizer
from torch import nn

import tfm_cls
from tfm_cls.errors import InferenceError
from tfm_cls.model import TransformerClassifier
from tfm_cls.runtime.classifier import Classifier


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


def test_verify_passes_and_reports_every_stage(classifier, classifier_onnx):
    report = verify(classifier, classifier_onnx)
    by_name = {c.name: c for c in report.checks}
    assert all(by_name[n].status == "ok"
               for n in ("metadata", "names", "dynamic axes", "output shapes (CPU)", "values (CPU)"))
    assert 0.0 < report.worst_diff <= 1e-4
    if "CUDAExecutionProvider" not in ort.get_available_providers() or not torch.cuda.is_available():
        assert by_name["CUDA"].status == "skip" and "skipped" in by_name["CUDA"].detail


def test_cases_differ_from_export_shapes_and_cover_edges(classifier, classifier_onnx):
    from tfm_cls.export.exporter import EXPORT_SIZES
    from tfm_cls.export.verify import default_cases

    cases = default_cases(spec.CLASSIFIER, EXPORT_SIZES, max_len=48)
    assert not any(c.batch == EXPORT_SIZES["batch"] and c.sizes["sequence"] == EXPORT_SIZES["sequence"] for c in cases)
    assert {c.batch for c in cases} >= {1, 5}
    assert min(c.sizes["sequence"] for c in cases) == 1
    assert max(c.sizes["sequence"] for c in cases) > EXPORT_SIZES["sequence"]
    lengths = [n for c in cases for n in c.lengths["sequence"]]
    assert 0 in lengths  # a fully padded row
    assert any(0 < n < c.sizes["sequence"] for c in cases for n in c.lengths["sequence"])  # partly padded


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


def _tampered_copy(src, dst, name_part: str, delta: float) -> str:
    model = onnx.load(str(src))
    init = next(i for i in model.graph.initializer if name_part in i.name)
    array = numpy_helper.to_array(init).copy()
    # Random, not constant: a constant shift of the head is cancelled by LayerNorm's zero mean.
    array += delta * np.random.default_rng(0).standard_normal(array.shape).astype(array.dtype)
    init.CopyFrom(numpy_helper.from_array(array, init.name))
    onnx.save(model, str(dst))
    return init.name


def test_verify_fails_on_tampered_weights_naming_worst_diff(classifier, classifier_onnx, tmp_path):
    bad = tmp_path / "tampered.onnx"
    _tampered_copy(classifier_onnx, bad, "head.weight", 0.05)
    with pytest.raises(VerificationError) as excinfo:
        verify(classifier, bad)
    report = excinfo.value.report
    assert not report.ok
    failed = [c for c in report.checks if c.status == "FAIL"]
    assert [c.name for c in failed] == ["values (CPU)"]
    assert "max abs diff" in failed[0].detail and "'logits'" in failed[0].detail
    assert report.worst_diff > 1e-4
    assert f"{report.worst_diff:.3g}" in str(excinfo.value)


def test_verify_fails_against_a_different_model(classifier_onnx, tokenizer):
    other = tiny_classifier(vocab_size=tokenizer.get_vocab_size(), seed=123)
    with pytest.raises(VerificationError, match="max abs diff"):
        verify(other, classifier_onnx)


class _NaNOnEmptyRows(nn.Module):
    """Mean pooling without a guard: a fully padded row divides 0 by 0, in torch and in ONNX."""

    def __init__(self):
        super().__init__()
        self.config = {"vocab_size": 30, "num_classes": 2, "max_len": 16, "pad_token_id": 0}
        self.embedding = nn.Embedding(30, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).float()  # [batch, seq, 1]
        pooled = (self.embedding(input_ids) * mask).sum(1) / mask.sum(1)  # [batch, 8]
        return self.head(pooled)


def test_verify_fails_on_nan_for_fully_padded_row(tmp_path):
    model = _NaNOnEmptyRows().eval()
    path = export_classifier(model, tmp_path / "nan.onnx", tokenizer=None, labels=["a", "b"])
    with pytest.raises(VerificationError, match="NaN") as excinfo:
        verify(model, path)
    assert "fully padded" in str(excinfo.value)


def test_verify_requires_requested_provider(classifier, classifier_onnx):
    if "CUDAExecutionProvider" in ort.get_available_providers() and torch.cuda.is_available():
        pytest.skip("CUDA is available here; the CPU-only refusal cannot be shown")
    with pytest.raises(VerificationError, match="not available"):
        verify(classifier, classifier_onnx, providers=["CUDAExecutionProvider"])


@pytest.mark.skipif(
    "CUDAExecutionProvider" not in ort.get_available_providers() or not torch.cuda.is_available(),
    reason="needs onnxruntime-gpu and a CUDA device",
)
def test_verify_on_cuda(classifier, classifier_onnx):
    report = verify(classifier, classifier_onnx, providers=["CPUExecutionProvider", "CUDAExecutionProvider"])
    assert {c.name: c.status for c in report.checks}["values (CUDA)"] == "ok"


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
