"""tfm_cls/batch/inputs.py without Ray: which files an input names, and their records as
`tfm-cls infer` reads them."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")

from tfm_cls.batch.inputs import count_file, list_inputs, read_file  # noqa: E402
from tfm_cls.errors import InferenceError  # noqa: E402
from tfm_cls.runtime.readers import Stats, read_records  # noqa: E402


def _files(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    for name in ("d/a.jsonl", "d/sub/b.csv", "d/c.parquet", "d/_SUCCESS", "d/.hidden.jsonl", "d/notes.md"):
        (tmp_path / name).write_text("")
    return tmp_path / "d"


def test_a_folder_a_glob_and_a_file(tmp_path):
    folder = _files(tmp_path)
    assert [(f.name, f.fmt) for f in list_inputs(str(folder))] == [
        ("a.jsonl", "jsonl"), ("c.parquet", "parquet"), ("sub/b.csv", "csv")]
    assert [f.name for f in list_inputs(str(folder / "*.jsonl"))] == ["a.jsonl"]  # hidden files match no '*'
    assert [f.name for f in list_inputs(str(folder / "**" / "*.csv"))] == ["sub/b.csv"]
    assert [f.name for f in list_inputs(str(folder / "a.jsonl"))] == ["a.jsonl"]
    with pytest.raises(InferenceError, match="no input files in"):
        list_inputs(str(folder / "*.tsv"))
    with pytest.raises(InferenceError, match="input not found"):
        list_inputs(str(tmp_path / "nope"))
    with pytest.raises(InferenceError, match="cannot tell the format of .*notes.md"):
        list_inputs(str(folder / "notes.*"))


def test_jsonl_records_are_infer_records(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [{"text": "a", "id": 7}, {"text": None}, {"text": "b"}])
                    + "\n", encoding="utf-8")
    (file,) = list_inputs(str(path))
    rows = [r for t in read_file(file, "text", None, rows=2) for r in t.to_pylist()]
    with path.open("rb") as f:
        records = list(read_records(f, "in.jsonl", "jsonl", "text", "error", Stats()))
    assert [(r["id"], r["line"], r["text"]) for r in rows] == [(r.id, r.line, r.text) for r in records]
    assert len(rows) == 4 and {r["path"] for r in rows} == {"in.jsonl"}
    assert count_file(file, "text", None) == {"path": "in.jsonl", "rows": 4, "line_sum": 10}


def test_parquet_rows_ids_nulls_and_types(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["x", None, "y"], "id": [10, 11, 12]}), tmp_path / "a.parquet")
    (file,) = list_inputs(str(tmp_path / "a.parquet"))
    rows = next(read_file(file, "text", None)).to_pylist()
    assert rows == [{"id": "10", "path": "a.parquet", "line": 1, "text": "x"},
                    {"id": "11", "path": "a.parquet", "line": 2, "text": None},
                    {"id": "12", "path": "a.parquet", "line": 3, "text": "y"}]
    with pytest.raises(InferenceError, match=r"a.parquet: no column \['body'\]"):
        next(read_file(file, "body", None))
    with pytest.raises(InferenceError, match="a.parquet: column 'id' holds int64, expected strings"):
        next(read_file(file, "id", None))
