"""OnnxClassifier (tfm_cls/runtime/ray_predictor.py) called directly, without Ray: every batch
format, the rows `tfm-cls infer` writes, the bad-text policy, an empty batch."""

from __future__ import annotations

import json

import pytest
from kits.export_testkit import TEXTS
from tfm_cls.export import infer

from tfm_cls.errors import InferenceError

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

from tfm_cls.runtime.ray_predictor import OnnxClassifier  # noqa: E402


@pytest.fixture(scope="module")
def predictor(classifier_onnx):
    return OnnxClassifier(str(classifier_onnx), threads=1)


@pytest.fixture(scope="module")
def infer_rows(classifier_onnx, tmp_path_factory):
    """`tfm-cls infer`'s rows of TEXTS[:12] (in process)."""
    folder = tmp_path_factory.mktemp("infer")
    src, dst = folder / "in.jsonl", folder / "out.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS[:12]), encoding="utf-8")
    assert infer.main(["--model", str(classifier_onnx), "--input", str(src), "--output", str(dst), "--no-progress"]) == 0
    return [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("fmt", ["pyarrow", "pandas", "numpy"])
def test_every_batch_format_gives_infer_rows_and_keeps_the_input_columns(predictor, infer_rows, fmt):
    columns = {"id": [str(i + 1) for i in range(12)], "text": TEXTS[:12], "other": list(range(12))}
    batch = {"pyarrow": lambda: pa.table(columns), "pandas": lambda: pd.DataFrame(columns),
             "numpy": lambda: {k: pd.Series(v).to_numpy() for k, v in columns.items()}}[fmt]()
    out = predictor(batch)
    assert isinstance(out, pa.Table)
    assert out.column_names == ["id", "text", "other", "label", "score", "probabilities", "truncated", "empty"]
    assert out.column("other").to_pylist() == list(range(12))
    rows = out.to_pylist()
    for expected, row in zip(infer_rows, rows):
        assert {k: row[k] for k in expected if k != "line"} == {k: v for k, v in expected.items() if k != "line"}


def test_null_and_blank_texts_are_empty_rows_and_a_non_string_names_its_row(predictor):
    batch = pa.table({"id": ["a", "b", "c"], "text": [TEXTS[0], None, "  "]})
    rows = predictor(batch).to_pylist()
    assert [r["empty"] for r in rows] == [False, True, True]
    assert rows[1]["label"] is None and rows[1]["probabilities"] is None and rows[0]["label"] is not None
    with pytest.raises(InferenceError, match=r"row 1 of the batch \(id 'b'\): column 'text' holds int, expected a string"):
        predictor(pd.DataFrame({"id": ["a", "b"], "text": [TEXTS[0], 7]}))


def test_invalid_column_policy_keeps_the_row_with_an_error(classifier_onnx):
    predictor = OnnxClassifier(str(classifier_onnx), invalid="column")
    rows = predictor(pd.DataFrame({"text": [TEXTS[0], 7, None, TEXTS[1]]})).to_pylist()
    assert len(rows) == 4
    assert [r["error"] for r in rows] == [None, "row 1 of the batch: column 'text' holds int, expected a string",
                                          None, None]
    assert [r["empty"] for r in rows] == [False, True, True, False]
    good = OnnxClassifier(str(classifier_onnx))(pa.table({"text": [TEXTS[0], TEXTS[1]]})).to_pylist()
    assert [rows[0]["probabilities"], rows[3]["probabilities"]] == [g["probabilities"] for g in good]


def test_an_empty_batch_gets_the_prediction_columns(predictor):
    out = predictor(pa.table({"text": pa.array([], pa.string())}))
    assert out.num_rows == 0 and out.schema.names == ["text", *predictor.output_schema().names]


def test_a_missing_text_column_is_named(predictor):
    with pytest.raises(InferenceError, match=r"no column \['text'\] \(columns: \['body'\]\)"):
        predictor(pa.table({"body": ["x"]}))
