"""Each token's character n-grams (tfm_cls.data.char_grams): what the bag's character view reads by id."""

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from tokenizers import Tokenizer, models, pre_tokenizers

from tfm_cls.config import TokenizerConfig
from tfm_cls.data.char_grams import char_gram_table, piece_grams, piece_text
from tfm_cls.data.tokenizer import marker_ids, train_tokenizer

TEXTS = ["the walking dead walked", "walkers walk the walk", "talking heads talk", "a dead talker"] * 5


@pytest.mark.parametrize("token, prefix, text", [
    ("walk", "##", " walk"), ("##ing", "##", "ing"),  # WordPiece: a piece without ## starts a word
    ("Ġwalk", None, " walk"), ("ing", None, "ing"),  # byte-level BPE: Ġ is the space before a word
    ("▁walk", None, " walk"),  # SentencePiece's marker
])
def test_a_tokens_text_has_a_space_where_it_starts_a_word(token, prefix, text):
    assert piece_text(token, prefix) == text


@pytest.mark.parametrize("word", ["walking", "a", "ox", "unbelievable"])
def test_a_whole_words_grams_are_char_wb_grams_but_those_of_its_closing_space(word):
    char_wb = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5)).build_analyzer()(word)
    grams = piece_grams(" " + word)
    assert len(grams) == len(set(grams))  # each gram once
    assert set(grams) == {g for g in char_wb if not g.endswith(" ")} | ({" " + word} if len(word) < 2 else set())
    assert [len(g) for g in grams] == sorted(len(g) for g in grams)  # the shortest first
    assert piece_grams("x") == ["x"] and piece_grams("") == []


def test_the_table_holds_each_tokens_grams_once_each_gram_one_row_and_none_for_the_markers():
    tok = train_tokenizer(TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=16))
    table, rows = char_gram_table(tok)
    vocab = tok.get_vocab()
    assert table.shape == (tok.get_vocab_size(), 40) and table.dtype == np.int32
    names: dict[int, str] = {}  # row -> gram, filled from the tokens: a row never names two grams
    for token, i in vocab.items():
        if token.startswith("[") and token.endswith("]"):  # [PAD] [UNK] [CLS] [SEP] [MASK]: no grams
            assert (table[i] == -1).all(), token
            continue
        expected = piece_grams(piece_text(token, "##"))
        held = [int(r) for r in table[i] if r >= 0]
        assert len(held) == len(expected) and (table[i, len(held):] == -1).all()
        for row, gram in zip(held, expected):
            assert names.setdefault(row, gram) == gram
    assert sorted(names) == list(range(rows))  # rows numbered densely, every one used
    # a gram two tokens share is one row: "walk" (" walk") and "##alk"-like pieces both hold "al"
    holders = [t for t in vocab if "al" in piece_grams(piece_text(t, "##")) and not t.startswith("[")]
    assert len(holders) >= 2 and len({int(table[vocab[t]][list(piece_grams(piece_text(t, "##"))).index("al")])
                                      for t in holders}) == 1
    # the same tokenizer, the same table; fewer slots keep each token's shortest grams
    again, rows_again = char_gram_table(tok)
    assert rows_again == rows and np.array_equal(again, table)
    short, short_rows = char_gram_table(tok, slots=3)
    shortest = {t: piece_grams(piece_text(t, "##"))[:3] for t in vocab if not t.startswith("[")}
    assert short.shape[1] == 3 and short_rows == len({g for grams in shortest.values() for g in grams})
    assert all((short[vocab[t]] >= 0).sum() == len(grams) for t, grams in shortest.items())
    skipped, _ = char_gram_table(tok, skip_ids=[vocab["walk"]], vocab_size=tok.get_vocab_size() + 5)
    assert (skipped[vocab["walk"]] == -1).all() and skipped.shape[0] == tok.get_vocab_size() + 5
    assert (skipped[-5:] == -1).all() and set(marker_ids(tok)) <= {i for i in range(len(table)) if (table[i] < 0).all()}


def test_a_byte_level_bpe_tokenizers_word_marker_is_read_as_a_space():
    tok = Tokenizer(models.BPE(vocab={"Ġwalk": 0, "ing": 1, "<s>": 2}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.add_special_tokens(["<s>"])  # a special token: no grams
    table, rows = char_gram_table(tok)
    gram_of = {}
    for token in ("Ġwalk", "ing"):
        for row, gram in zip(table[tok.token_to_id(token)], piece_grams(piece_text(token, None))):
            gram_of[int(row)] = gram
    assert rows == len(set(piece_grams(" walk")) | set(piece_grams("ing"))) == len(gram_of)
    assert " w" in gram_of.values() and "Ġw" not in gram_of.values()
