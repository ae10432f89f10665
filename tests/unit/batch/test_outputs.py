"""tfm_cls/batch/outputs.py without Ray: parts written atomically, the exactly-once check, the
output folder's rules."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")

from tfm_cls.batch import outputs  # noqa: E402
from tfm_cls.errors import InferenceError  # noqa: E402


def _table(path: str, lines: list[int]):
    return pa.table({"id": [str(i) for i in lines], "path": [path] * len(lines), "line": lines,
                     "text": ["t"] * len(lines), "label": ["a"] * len(lines)})


def test_a_block_is_one_part_with_its_counts(tmp_path):
    report = outputs.write_block(_table("a.jsonl", [1, 2, 5]), str(tmp_path), "parquet", ("text",)).to_pylist()[0]
    (part,) = tmp_path.glob("part-*.parquet")
    assert report["file"] == part.name and report["rows"] == 3
    assert json.loads(report["counts"]) == {"a.jsonl": [3, 8]}
    import pyarrow.parquet as pq

    assert pq.read_table(part).column_names == ["id", "path", "line", "label"]  # text dropped
    assert [p.name for p in tmp_path.iterdir()] == [part.name]  # no temporary file left


def test_an_empty_block_writes_no_part(tmp_path):
    report = outputs.write_block(_table("a.jsonl", []), str(tmp_path), "jsonl").to_pylist()[0]
    assert report["file"] == "" and report["rows"] == 0 and list(tmp_path.iterdir()) == []


def _report(counts: dict) -> dict:
    return {"file": "p", "rows": sum(c[0] for c in counts.values()), "counts": json.dumps(counts)}


def test_the_exactly_once_check_sees_missing_doubled_and_swapped_rows():
    expected = [{"path": "a", "rows": 4, "line_sum": 10}, {"path": "b", "rows": 2, "line_sum": 3}]
    assert outputs.check_complete(expected, [_report({"a": [3, 6], "b": [2, 3]}), _report({"a": [1, 4]})]) == []
    missing = outputs.check_complete(expected, [_report({"a": [3, 6], "b": [2, 3]})])
    assert missing == ["a: 4 rows read, 3 written"]
    # line 4 missing, line 3 twice: the count agrees, the sum of line numbers does not
    swapped = outputs.check_complete(expected, [_report({"a": [4, 9], "b": [2, 3]})])
    assert swapped == ["a: 4 rows read, 4 written (some rows twice, others missing)"]
    stray = outputs.check_complete(expected, [_report({"a": [4, 10], "b": [2, 3], "c": [1, 1]})])
    assert stray == ["c: 1 rows written from no input file"]


def test_the_output_folder_refuses_other_files_and_replaces_its_own(tmp_path):
    out = tmp_path / "out"
    assert outputs.prepare_folder(str(out), overwrite=False) is True
    outputs.write_block(_table("a", [1]), str(out), "jsonl")
    outputs.write_manifest(str(out), {"rows": 1})
    with pytest.raises(InferenceError, match="is not empty; pass --overwrite"):
        outputs.prepare_folder(str(out), overwrite=False)
    assert outputs.prepare_folder(str(out), overwrite=True) is False and list(out.iterdir()) == []
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InferenceError, match="holds files that are not a tfm-cls batch output"):
        outputs.prepare_folder(str(out), overwrite=True)
    assert (out / "notes.txt").read_text() == "mine"
