"""The pretraining corpus: extra-text readers and the normalised-hash overlap guard."""

import json

import pytest

from tfm_cls.pretrain_data import (
    CorpusError,
    assemble_corpus,
    find_overlap,
    normalize_text,
    read_text_file,
)


def test_normalisation_matches_tokenisation_and_case_variants_only():
    # SST-2 (tokenised, lowercased) and Rotten Tomatoes spell the same sentence differently.
    assert normalize_text("it 's a charming , funny film .") == normalize_text("It's a charming, funny film.")
    assert normalize_text("Ｆｕｌｌ－ｗｉｄｔｈ") == normalize_text("full-width")  # NFKC
    assert normalize_text("上课时，学生") == "上课时学生"
    assert normalize_text("a good film") != normalize_text("a bad film")


def test_find_overlap_returns_indices_of_matching_texts():
    test = ["It's a charming, funny film.", "The plot is thin"]
    extra = ["another text", "it 's a charming , funny film .", "...", "the plot is thin", "the plot is thin!!"]
    assert find_overlap(extra, test) == [1, 3, 4]  # "..." normalises to nothing: never a match


def test_assemble_corpus_drops_or_refuses_overlapping_extra_text():
    train = ["a b c", "d e f"]
    extra = ["fresh text", "TEST sentence one", "more text"]
    evaluation = ["test sentence one", "test sentence two"]
    corpus, report = assemble_corpus(train, extra, evaluation, on_overlap="drop")
    assert corpus == ["a b c", "d e f", "fresh text", "more text"]
    assert report["extra_dropped_overlap"] == 1 and report["corpus_texts"] == 4
    with pytest.raises(CorpusError, match="1 extra text"):
        assemble_corpus(train, extra, evaluation, on_overlap="error")
    # Without extra text the train split is used as is.
    assert assemble_corpus(train, [], evaluation)[0] == train


def test_read_text_files(tmp_path):
    txt = tmp_path / "a.txt"
    txt.write_text("first line\n\n  second line  \n", encoding="utf-8")
    assert read_text_file(txt) == ["first line", "second line"]
    jl = tmp_path / "b.jsonl"
    jl.write_text(json.dumps({"body": "x y"}) + "\n\n" + json.dumps({"body": "z"}) + "\n", encoding="utf-8")
    assert read_text_file(jl, text_field="body") == ["x y", "z"]


def test_read_text_file_errors_name_the_file_line_and_field(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        read_text_file(tmp_path / "missing.txt")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"body": "no text"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad.jsonl:2: expected an object with field 'text'"):
        read_text_file(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": \n', encoding="utf-8")
    with pytest.raises(CorpusError, match="broken.jsonl:1: not a JSON object"):
        read_text_file(broken)
    csv = tmp_path / "c.csv"
    csv.write_text("text\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="expected a .txt or .jsonl"):
        read_text_file(csv)
