"""Tokenizer: special-token ids, [CLS]/[SEP] template, truncation, save/load round trip."""

import pytest

from tfm_cls.config import TokenizerConfig
from tfm_cls.data.tokenizer import PAD_ID, SPECIAL_TOKENS, load_tokenizer, max_length_of, train_tokenizer

TEXTS = [f"the quick brown fox number {i} jumps over the lazy dog near river {i % 7}" for i in range(80)]


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_special_tokens_template_and_truncation(kind, tmp_path):
    tok = train_tokenizer(TEXTS, TokenizerConfig(kind=kind, vocab_size=400, max_length=6, min_frequency=1))
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    enc = tok.encode("the quick brown fox jumps over the lazy dog")
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    assert len(enc.ids) == 6 and enc.overflowing  # truncated, and it says so
    short = tok.encode("fox")
    assert short.tokens[0] == "[CLS]" and short.tokens[-1] == "[SEP]" and not short.overflowing
    # Saved file keeps the template, truncation and [PAD]=0 padding.
    tok.save(str(tmp_path / "tokenizer.json"))
    loaded = load_tokenizer(tmp_path / "tokenizer.json")
    assert max_length_of(loaded) == 6
    a, b = loaded.encode_batch(["fox", "the quick brown fox jumps"])
    single = loaded.encode("fox").ids
    assert len(a.ids) == len(b.ids) == 6
    assert a.ids == single + [PAD_ID] * (6 - len(single))
    assert a.attention_mask == [1] * len(single) + [0] * (6 - len(single))
    assert b.tokens[-1] == "[SEP]"


def test_lowercase_and_vocab_size():
    tok = train_tokenizer(TEXTS, TokenizerConfig(vocab_size=120, lowercase=True, min_frequency=1))
    assert tok.get_vocab_size() <= 120
    assert tok.encode("THE Quick").ids == tok.encode("the quick").ids
    cased = train_tokenizer(TEXTS, TokenizerConfig(vocab_size=120, lowercase=False, min_frequency=1))
    assert cased.encode("THE").ids != cased.encode("the").ids


def test_chinese_splits_per_character():
    tok = train_tokenizer(["上课时学生手机响个不停"] * 5, TokenizerConfig(vocab_size=100, min_frequency=1))
    assert tok.encode("学生手机").tokens == ["[CLS]", "学", "生", "手", "机", "[SEP]"]


def test_load_missing_or_bad_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_tokenizer(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        load_tokenizer(tmp_path / "bad.json")


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_training_is_deterministic(kind):
    # Few distinct words and a tiny vocabulary: many merges tie on count. The plain WordPiece
    # trainer gives a different vocabulary on nearly every call here (tokenizers#1794).
    cfg = TokenizerConfig(kind=kind, vocab_size=120 if kind == "wordpiece" else 300, min_frequency=1)
    assert len({train_tokenizer(TEXTS * 3, cfg).to_str() for _ in range(6)}) == 1


def test_continuation_tokens_are_not_special():
    tok = train_tokenizer(TEXTS + ["abc#"], TokenizerConfig(vocab_size=200, min_frequency=1))
    assert tok.token_to_id("##o") is not None  # a regular vocabulary entry ...
    enc = tok.encode("##o fox")
    assert enc.tokens[:4] == ["[CLS]", "#", "#", "o"]  # ... that raw text cannot produce as such
    assert tok.decode(tok.encode("brown fox").ids) == "brown fox"  # specials skipped, pieces merged


def test_marker_ids_are_what_the_template_adds_to_every_text_padding_aside():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    from tfm_cls.data.tokenizer import marker_ids

    tok = train_tokenizer(TEXTS, TokenizerConfig(vocab_size=400, max_length=6, min_frequency=1))
    assert marker_ids(tok) == [tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")] == [2, 3]
    assert set(marker_ids(tok)) <= set(tok.encode("fox").ids)  # padded to 6: [PAD] is not a marker
    # a RoBERTa-style template (<s> A </s></s> B </s>), its own ids, padded with <pad> = 1
    roberta = Tokenizer(models.WordLevel({"<s>": 0, "<pad>": 1, "</s>": 2, "fox": 3, "<unk>": 4}, unk_token="<unk>"))
    roberta.pre_tokenizer = pre_tokenizers.Whitespace()
    roberta.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    roberta.enable_padding(pad_id=1, pad_token="<pad>", length=8)
    assert marker_ids(roberta) == [0, 2]
    # no template: nothing to skip
    bare = Tokenizer(models.WordLevel({"fox": 0, "<unk>": 1}, unk_token="<unk>"))
    assert marker_ids(bare) == []
