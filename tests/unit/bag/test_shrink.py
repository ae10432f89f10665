"""tfm_cls.bag.shrink: the bag on an int8 grid with only the terms it needs, kept where validation holds;
the exporter writes such a bag's table as int8 rows with the same logits."""

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper
from tfm_cls.export.exporter import export_classifier
from tfm_cls.export.quantize import quantize_embeddings
from tfm_cls.export.verify import verify
from tokenizers import Tokenizer, models, pre_tokenizers

from tfm_cls.bag import shrink
from tfm_cls.bag.matrix import document_frequencies
from tfm_cls.model import BagOfTermsClassifier

VOCAB, CLASSES, CUES = 3000, 3, 30


def _data(rows: int, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    """Texts of 12 ids: 2 cues of their label (ids 3 + label * CUES ...) among noise ids (CLASSES * CUES + 3 ...)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, rows)
    ids = rng.integers(3 + CLASSES * CUES, VOCAB, (rows, 12))
    ids[:, :2] = 3 + labels[:, None] * CUES + rng.integers(0, CUES, (rows, 2))
    return torch.from_numpy(ids), labels


def _bag() -> BagOfTermsClassifier:
    """A tfidf bag of single tokens 'fitted' to the cues: large weights on them, small noise on the rest."""
    ids, _ = _data(400, 0)
    bag = BagOfTermsClassifier(VOCAB, CLASSES, 0, 16, "tfidf", 1, wide_skip_ids=[1, 2])
    df = document_frequencies(bag.wide, ids.tolist())
    bag.wide.set_idf(torch.from_numpy(np.where(df > 0, np.log(401 / (1 + df)) + 1.0, 0.0)))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        weight = torch.randn(bag.wide.rows, CLASSES, generator=gen) * 0.05
        for label in range(CLASSES):
            weight[3 + label * CUES: 3 + (label + 1) * CUES, label] += 3.0
        bag.wide.weight.copy_(weight * torch.from_numpy(df > 0)[:, None])
    return bag.eval()


def _accuracy(ids: torch.Tensor, labels: np.ndarray):
    def score(model) -> float:
        with torch.no_grad():
            return float((model(ids).argmax(1).numpy() == labels).mean())
    return score


def _within_gate(score, before: float):
    return lambda model: (value := score(model), value >= before - shrink.INT8_GATE)


def test_the_int8_grid_is_the_quantizers_own_and_rounds_each_row_to_half_its_step():
    weight = torch.randn(50, 7, generator=torch.Generator().manual_seed(3)) * torch.rand(50, 1) * 10
    weight[4] = 0.0
    snapped = shrink.on_int8_grid(weight)
    step = weight.abs().amax(dim=1, keepdim=True) / 127
    assert ((snapped - weight).abs() <= step / 2 + 1e-6).all() and torch.equal(snapped[4], weight[4])
    assert all(len(torch.unique(row)) <= 255 for row in snapped)
    # export/quantize's per-row int8 of the snapped table gives back the same floats (the verifier's check)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Gather", ["table", "ids"], ["out"], axis=0)], "g",
        [onnx.helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [None])],
        [onnx.helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, [None, 7])],
        [numpy_helper.from_array(snapped.numpy(), "table")])
    proto = onnx.helper.make_model(graph)
    assert quantize_embeddings(proto) == ["table"]
    tables = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    again = tables["table_int8"].astype(np.float32) * tables["table_row_scale"]
    assert again == pytest.approx(snapped.numpy(), rel=1e-6, abs=1e-7)


def test_pruned_keeps_the_terms_of_the_largest_weights_and_drops_the_rest_from_the_bag():
    bag = _bag()
    held = int((bag.wide.idf > 0).sum())
    small = shrink.pruned(bag, CLASSES * CUES)
    assert small.config["wide_int8"] and "wide_int8" not in bag.config  # the original untouched
    kept = (small.wide.idf > 0).nonzero().flatten().tolist()
    assert kept == [i for i in range(3, 3 + CLASSES * CUES) if bag.wide.idf[i] > 0]  # the cues, every one
    assert not small.wide.weight[small.wide.idf == 0].any() and held > len(kept)
    assert torch.equal(small.wide.weight, shrink.on_int8_grid(small.wide.weight))


def test_smallest_holding_halves_the_terms_while_validation_holds_and_no_further():
    bag = _bag()
    ids, labels = _data(600, 1)
    score = _accuracy(ids, labels)
    small, report = shrink.smallest_holding(bag, _within_gate(score, score(bag)), score(bag))
    assert report.int8 and score(small) >= score(bag) - shrink.INT8_GATE
    held = int((bag.wide.idf > 0).sum())
    assert report.terms_before == held and shrink.MIN_TERMS <= report.terms_kept < held
    # it stopped at the first size that lost (or at MIN_TERMS): every size it kept held, the next tried did not
    assert [t["terms"] for t in report.tried][: len(report.tried)] == [
        float(held // 2 ** k) if k else float(held) for k in range(len(report.tried))]
    if report.terms_kept // 2 >= shrink.MIN_TERMS:
        assert report.tried[-1]["validation"] < report.validation_before - shrink.INT8_GATE
    assert int((small.wide.idf > 0).sum()) == report.terms_kept


def test_a_bag_that_loses_on_the_int8_grid_stays_as_fitted():
    bag = _bag()
    calls = []

    def judge(model) -> tuple[float, bool]:  # any copy loses: nothing may ship smaller
        calls.append(model)
        return 0.0, False

    small, report = shrink.smallest_holding(bag, judge, 1.0)
    assert small is bag and not report.int8 and len(calls) == 1 and "stay float32" in report.line()
    small, report = shrink.smallest_holding(bag, judge, 1.0, affords=lambda seconds: False)
    assert small is bag and not report.tried and "no time" in report.line()


def _table_bytes(path) -> int:
    return sum(numpy_helper.to_array(t).nbytes for t in onnx.load(str(path)).graph.initializer)


def test_an_int8_bag_exports_int8_rows_with_the_same_logits(tmp_path):
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)} | {"[UNK]": VOCAB - 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    bag = _bag()
    labels = ["a", "b", "c"]
    full = export_classifier(bag, tmp_path / "full.onnx", tokenizer=tok, labels=labels)
    small = shrink.pruned(bag)
    path = export_classifier(small, tmp_path / "int8.onnx", tokenizer=tok, labels=labels)
    tables = [t for t in onnx.load(str(path)).graph.initializer if t.data_type == onnx.TensorProto.INT8]
    assert len(tables) == 1 and tables[0].dims[1] == CLASSES
    # (C + 4) bytes a row for C x 4: 7 of 12 at 3 classes (the row map and the IDF table as they were)
    weights = (int((bag.wide.idf > 0).sum()) + 1) * CLASSES
    assert _table_bytes(full) - _table_bytes(path) == pytest.approx(weights * 4 - weights - weights // CLASSES * 4)
    verify(small, path)  # raises where onnxruntime's logits differ from the torch model's


def test_each_try_is_afforded_on_the_last_trys_measured_seconds_the_first_on_the_estimate():
    import time

    bag = _bag()
    asked = []

    def judge(model) -> tuple[float, bool]:  # every size holds; a try takes ~50 ms
        time.sleep(0.05)
        return 1.0, True

    def affords(seconds: float) -> bool:
        asked.append(seconds)
        return len(asked) < 3  # two tries, then no time

    small, report = shrink.smallest_holding(bag, judge, 1.0, affords=affords, estimate=7.0)
    assert len(report.tried) == 2 and asked[0] == 7.0
    assert all(0.05 <= s < 5.0 for s in asked[1:])  # then what a try was measured to take
    assert report.int8 and report.terms_kept == int((bag.wide.idf > 0).sum()) // 2
