"""The one verifier (export/verify.py): its stages and cases on a good export, and that it fails
loudly on broken models (tampered weights, another model, NaN on padded rows, a missing provider)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from kits.export_testkit import tiny_classifier
from onnx import numpy_helper
from tfm_cls.export import spec
from tfm_cls.export.exporter import export_classifier
from tfm_cls.export.verify import VerificationError, verify
from torch import nn


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
