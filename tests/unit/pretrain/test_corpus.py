"""The pretraining corpus: extra-text readers and the overlap guard (whole texts and pieces)."""

import json

import pytest

from tfm_cls.pretrain.corpus import (
    CorpusError,
    assemble_corpus,
    find_overlap,
    normalize_text,
    overlap_tokens,
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


def test_overlap_tokens_join_treebank_contractions_and_split_cjk_characters():
    assert overlap_tokens("it does n't -lrb- quite -rrb- work") == overlap_tokens("It doesn't (quite) work!")
    assert overlap_tokens("it 's") == ["its"] and overlap_tokens("smog-fighting") == ["smog", "fighting"]
    assert overlap_tokens("上课时，学生abc") == ["上", "课", "时", "学", "生", "abc"]


def test_find_overlap_catches_pieces_and_shared_runs_of_evaluation_texts():
    test = [
        "the film is a charming , funny and thoroughly unexpected tale of two brothers in rome",
        "Who invented the telephone?",  # a short test text (4 words)
    ]
    extra = [
        "a charming, funny and thoroughly unexpected",  # 6-word piece of a test sentence (SST-2 style)
        "Critics say: a charming funny and thoroughly unexpected tale of two brothers, sadly",  # shares 9 words
        "funny and thoroughly",  # a 3-word piece: too short to carry the sentence
        "quiz: who invented the telephone? bell did",  # holds a whole short test text
        "a charming , funny and entirely unexpected film",  # no run of 4 words inside the test text
        "the telephone",
    ]
    assert find_overlap(extra, test) == [0, 1, 3]
    # The thresholds are the rule: demand 7-word pieces and the 6-word piece is left.
    assert find_overlap(extra, test, ngram=9, min_piece=7) == [1]
    with pytest.raises(ValueError, match="min_piece"):
        find_overlap(extra, test, ngram=4, min_piece=5)


def test_find_overlap_on_real_rotten_tomatoes_phrases_and_unrelated_text():
    # SST-2 train phrases against an MR test sentence (the pair the issue warns about): the
    # phrases the PTB tokeniser cut from it are caught, unrelated news text is not.
    mr_test = ["the movie's biggest problem is that it doesn't know whether it's a comedy or a thriller ."]
    sst2_phrases = [
        "the movie 's biggest problem",
        "does n't know whether it 's a comedy or a thriller",
        "is that it does n't know",
        "biggest problem",
    ]
    news = ["Oil prices climbed on Tuesday as traders worried about supply in the Gulf."]
    assert find_overlap(sst2_phrases, mr_test) == [0, 1, 2]
    assert find_overlap(news, mr_test) == []


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
    with pytest.raises(CorpusError, match="broken.jsonl, line 1: not valid JSON"):
        read_text_file(broken)
    csv = tmp_path / "c.csv"
    csv.write_text("text\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="expected a .txt or .jsonl"):
        read_text_file(csv)
