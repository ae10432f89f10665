"""The pool reader: duplicates, empty lines and labelled texts out; a sample beyond max_texts."""

import pytest

from tfm_cls.errors import InputError, TfmClsError
from tfm_cls.suggest.pool import collect, read_pool, text_key


def test_duplicates_empty_and_labelled_texts_are_dropped():
    lines = enumerate(["A cat.", "a  CAT.", "", "a dog", "a bird"], 1)
    pool = collect(lines, labelled={text_key("A BIRD")})
    assert pool.texts == ["A cat.", "a dog"] and pool.lines == [1, 4]
    assert (pool.duplicates, pool.empty, pool.labelled, pool.read) == (1, 1, 1, 5)


def test_an_empty_pool_and_a_pool_of_labelled_texts_are_input_errors():
    with pytest.raises(InputError, match="empty"):
        collect(enumerate(["", " "], 1))
    with pytest.raises(InputError, match="labelled already"):
        collect(enumerate(["x", "x"], 1), labelled={text_key("x")})


def test_beyond_max_texts_a_uniform_sample_is_kept():
    pool = collect(((i, f"text {i}") for i in range(1, 1001)), max_texts=50, seed=1)
    assert len(pool.texts) == 50 and pool.sampled and len(set(pool.texts)) == 50
    assert max(pool.lines) > 500  # not just the first 50


def test_files_of_each_format(tmp_path):
    (tmp_path / "p.txt").write_text("one\ntwo\n")
    (tmp_path / "p.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    (tmp_path / "p.csv").write_text("text\none\ntwo\n")
    for name in ("p.txt", "p.jsonl", "p.csv"):
        assert read_pool(str(tmp_path / name)).texts == ["one", "two"]
    with pytest.raises(TfmClsError, match="not found"):
        read_pool(str(tmp_path / "missing.txt"))
