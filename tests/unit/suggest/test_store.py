"""The labelled folder: read, and appended to atomically under a lock by concurrent writers."""

import json
import threading

import numpy as np
import pytest

from tfm_cls.errors import DataError
from tfm_cls.suggest.store import append_labels, read_folder


def folder_with(tmp_path, rows, labels=("neg", "pos")):
    (tmp_path / "labels.json").write_text(json.dumps({n: f"a {n} review" for n in labels}))
    if rows is not None:
        (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def test_read_names_descriptions_targets_and_keys(tmp_path):
    folder = folder_with(tmp_path, [{"text": "bad", "label": 0}, {"text": "good", "label": "pos"}])
    (tmp_path / "test.jsonl").write_text(json.dumps({"text": "held out", "label": 1}) + "\n")
    got = read_folder(folder)
    assert got.names.names == ["neg", "pos"] and got.names.described
    assert got.texts == ["bad", "good"] and got.targets.tolist() == [0, 1] and got.counts() == [1, 1]
    assert len(got.keys) == 3  # test texts are never suggested either


def test_a_folder_with_names_only_is_a_cold_start(tmp_path):
    got = read_folder(folder_with(tmp_path, None))
    assert got.texts == [] and got.counts() == [0, 0]


def test_unknown_label_and_missing_folder_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="line 1"):
        read_folder(folder_with(tmp_path, [{"text": "x", "label": "meh"}]))
    with pytest.raises(DataError, match="no such folder"):
        read_folder(tmp_path / "nope")


def test_multi_label_rows(tmp_path):
    got = read_folder(folder_with(tmp_path, [{"text": "x", "labels": ["neg", "pos"]}, {"text": "y", "labels": []}]))
    assert got.multi_label and got.targets.tolist() == [[1, 1], [0, 0]] and got.counts() == [1, 1]


def test_append_keeps_the_files_label_form_and_skips_texts_it_holds(tmp_path):
    folder = folder_with(tmp_path, [{"text": "bad", "label": 0}])
    assert append_labels(folder, [{"text": "good", "label": "pos"}, {"text": "BAD", "label": "pos"}], ["neg", "pos"]) == 1
    rows = [json.loads(line) for line in (folder / "train.jsonl").read_text().splitlines()]
    assert rows == [{"text": "bad", "label": 0}, {"text": "good", "label": 1}]
    empty = folder_with(tmp_path / "new", None) if (tmp_path / "new").mkdir() is None else None
    append_labels(empty, [{"text": "fine", "label": "pos"}], ["neg", "pos"])
    assert json.loads((empty / "train.jsonl").read_text()) == {"text": "fine", "label": "pos"}


def test_concurrent_appends_lose_nothing(tmp_path):
    folder = folder_with(tmp_path, [])
    errors = []

    def writer(w):
        try:
            for i in range(15):
                append_labels(folder, [{"text": f"w{w} t{i}", "label": "neg"}], ["neg", "pos"])
        except Exception as err:  # pragma: no cover - shown by the assert
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    got = read_folder(folder)
    assert len(got.texts) == 60 and len(set(got.texts)) == 60 and np.all(got.targets == 0)


def test_texts_with_line_separators_are_appended_and_read_back_whole(tmp_path):
    """Scraped text holds U+2028 / U+0085: once appended, every later read and label still works."""
    folder = folder_with(tmp_path, [])
    (folder / "train.jsonl").write_text(json.dumps({"text": "raw\u2029kept", "label": "neg"}, ensure_ascii=False) + "\r\n",
                                        encoding="utf-8")  # another tool's row: raw separator, Windows line end
    texts = ["one\u2028line", "next\x85line", "seps\x1c\x1d\x1e", "crlf\r\ninside"]
    for text in texts:
        assert append_labels(folder, [{"text": text, "label": "pos"}], ["neg", "pos"]) == 1
    assert append_labels(folder, [{"text": texts[0], "label": "neg"}], ["neg", "pos"]) == 0  # already there
    got = read_folder(folder)
    assert got.texts == ["raw\u2029kept", *texts] and got.targets.tolist() == [0, 1, 1, 1, 1]


def test_a_bad_line_of_the_folder_is_named(tmp_path):
    folder = folder_with(tmp_path, [{"text": "a", "label": "neg"}])
    with open(folder / "train.jsonl", "ab") as f:
        f.write(b'{"text": "caf\xe9", "label": "neg"}\n')
    with pytest.raises(DataError, match="train.jsonl, line 2: invalid UTF-8"):
        read_folder(folder)
    with pytest.raises(DataError, match="line 2: invalid UTF-8"):
        append_labels(folder, [{"text": "new", "label": "pos"}], ["neg", "pos"])
    assert (folder / "train.jsonl").read_bytes().endswith(b"caf\xe9\", \"label\": \"neg\"}\n")  # untouched
