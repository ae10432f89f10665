"""The one JSON Lines reader and appender (tfm_cls/runtime/jsonl.py): lines end at "\n" only, so
texts holding the characters `str.splitlines()` also breaks at stay one row, read back and after
appends; bad lines and invalid UTF-8 are one error naming the line."""

import json

import pytest

from tfm_cls.errors import DataError, InferenceError
from tfm_cls.runtime.jsonl import append_jsonl, dumps, read_jsonl

# Every character str.splitlines() breaks at besides "\n" and "\r": vertical tab, form feed, the file /
# group / record separators, NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR.
BREAKERS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def test_raw_separators_inside_strings_stay_one_row(tmp_path):
    raw = ["\x85", "\u2028", "\u2029"]  # json.dumps leaves these raw inside strings (ensure_ascii=False)
    texts = [f"before{c}after" for c in raw] + [f"escaped{c}" for c in BREAKERS]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    assert len(path.read_text(encoding="utf-8").splitlines()) == len(texts) + 2 * len(raw)  # the old readers
    rows = list(read_jsonl(path))
    assert [n for n, _ in rows] == list(range(1, len(texts) + 1))
    assert [r["text"] for _, r in rows] == texts


def test_raw_c0_separators_do_not_end_a_line(tmp_path):
    path = tmp_path / "rows.jsonl"  # \x1c-\x1e raw between values: not JSON, but still all of line 1
    path.write_bytes(b'{"a": 1}\x1c\x1d\x1e{"b": 2}\n{"c": 3}\n')
    with pytest.raises(InferenceError, match="rows.jsonl, line 1: not valid JSON"):
        list(read_jsonl(path))
    path.write_bytes(b'{"a": 1}\x1c\n{"c": 3}\x1e\n')  # trailing separators are whitespace to nobody: also bad
    with pytest.raises(InferenceError, match="line 1: not valid JSON"):
        list(read_jsonl(path))


def test_crlf_blank_lines_bom_and_a_last_line_without_newline(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\r\n  \n{"a": "x\\r\\ny"}\r\n{"a": 3}')
    assert list(read_jsonl(path)) == [(1, {"a": 1}), (4, {"a": "x\r\ny"}), (5, {"a": 3})]


def test_a_lone_carriage_return_between_values_is_not_a_line_end(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": 1}\r {"b": 2}\n')  # text mode would split here; JSON Lines does not
    with pytest.raises(InferenceError, match="rows.jsonl, line 1: not valid JSON"):
        list(read_jsonl(path))


def test_bad_json_non_objects_and_invalid_utf8_name_the_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": \n')
    with pytest.raises(DataError, match=r"rows.jsonl, line 2: not valid JSON"):
        list(read_jsonl(path, error=DataError))
    path.write_bytes(b'{"a": 1}\n[1, 2]\n')
    assert [v for _, v in read_jsonl(path)] == [{"a": 1}, [1, 2]]
    with pytest.raises(DataError, match="line 2: expected a JSON object, got list"):
        list(read_jsonl(path, error=DataError, objects=True))
    path.write_bytes(b'{"a": 1}\n{"a": "caf\xe9"}\n')
    with pytest.raises(DataError, match="line 2: invalid UTF-8"):
        list(read_jsonl(path, error=DataError))
    assert list(read_jsonl(path, invalid_utf8="replace"))[1][1] == {"a": "caf\ufffd"}


def test_dumps_escapes_the_unicode_line_separators_and_round_trips(tmp_path):
    row = {"text": "a\u2028b\u2029c\x85d\x1ce — é 😀"}
    line = dumps(row)
    assert "\n" not in line and len(line.splitlines()) == 1  # even a splitlines reader reads it whole
    assert "é 😀" in line and json.loads(line) == row


def test_append_keeps_every_row_and_mends_a_missing_last_newline(tmp_path):
    path = tmp_path / "train.jsonl"
    assert append_jsonl(path, [{"text": "one\u2028two", "label": "a"}]) == 1
    path.write_bytes(path.read_bytes() + b'{"text": "raw\xe2\x80\xa8sep\xc2\x85", "label": "b"}')  # no newline
    assert append_jsonl(path, [{"text": f"t{c}", "label": "c"} for c in BREAKERS]) == len(BREAKERS)
    assert append_jsonl(path, []) == 0
    rows = [r for _, r in read_jsonl(path)]
    assert [r["text"] for r in rows] == ["one\u2028two", "raw\u2028sep\x85", *(f"t{c}" for c in BREAKERS)]
    assert not list(tmp_path.glob(".train.jsonl.*"))  # no temporary file left


def test_the_predictions_writer_escapes_the_separators_so_every_row_is_one_line():
    """`tfm-cls infer`'s JSONL rows (tfm_cls.runtime.writers): an id holding U+2028 / U+2029 / U+0085 is
    written escaped, so a line splitter that breaks on them (Python's str.splitlines) still reads one row a
    record, and the id comes back as it was."""
    import io

    import numpy as np

    from tfm_cls.runtime.readers import Record
    from tfm_cls.runtime.writers import Writer

    out = io.StringIO()
    writer = Writer(out, "jsonl", ["a", "b"])
    ids = ["x\u2028y", "p\u2029q", "m\u0085n"]
    for i, record_id in enumerate(ids):
        writer.write(Record(record_id, "text", i + 1), np.array([0.25, 0.75]), False)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and [json.loads(line)["id"] for line in lines] == ids
    assert all(json.loads(line)["label"] == "b" for line in lines)
