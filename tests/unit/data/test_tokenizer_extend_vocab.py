"""tokenizer.extend_vocab: the characters a pretrained WordPiece vocabulary reads only as [UNK]
(`unknown_characters`), added to it (`extend_vocabulary`), and the classifier's embedding grown to
match (`pretrained.with_vocabulary`), which reads a new token exactly as it read [UNK] until trained."""

import pytest
import torch

from tfm_cls.config import TokenizerConfig
from tfm_cls.data.tokenizer import UNK, extend_vocabulary, train_tokenizer, unknown_characters
from tfm_cls.errors import ConfigError
from tfm_cls.init_from import with_vocabulary
from tfm_cls.model import TransformerClassifier

ENGLISH = [f"the quick brown fox number {i} jumps over the lazy dog near river {i % 7}" for i in range(80)]


@pytest.fixture(scope="module")
def english_wordpiece():
    return train_tokenizer(ENGLISH, TokenizerConfig(vocab_size=300, min_frequency=1, max_length=32))


def test_unknown_characters_are_the_unk_spans_normalised_counted_and_ranked(english_wordpiece):
    texts = ["猫 猫 狗 the fox", "猫 Жук", "quick 鱼 Жук", "brown"]
    # 猫 x3; 狗, 鱼 once (kept by default, dropped at min_count 2); Жук twice, lowercased by the normaliser.
    assert unknown_characters(english_wordpiece, texts) == ["猫", "ж", "к", "у", "狗", "鱼"]
    assert unknown_characters(english_wordpiece, texts, min_count=2) == ["猫", "ж", "к", "у"]
    assert unknown_characters(english_wordpiece, ENGLISH) == []  # it reads its own texts


def test_extended_vocabulary_reads_the_characters_and_keeps_every_old_id(english_wordpiece):
    old = english_wordpiece.get_vocab()
    extended = extend_vocabulary(english_wordpiece, ["猫", "ж", "к", "у"])
    vocab = extended.get_vocab()
    assert {k: vocab[k] for k in old} == old
    new = sorted(set(vocab) - set(old), key=vocab.get)
    assert new == ["猫", "##猫", "ж", "##ж", "к", "##к", "у", "##у"]
    assert [vocab[t] for t in new] == list(range(len(old), len(old) + 8))
    assert extended.get_vocab_size() == len(old) + 8
    enc = extended.encode("猫 the жук", add_special_tokens=False)
    assert enc.tokens == ["猫", "the", "ж", "##у", "##к"]
    assert english_wordpiece.encode("猫 the жук", add_special_tokens=False).tokens == [UNK, "the", UNK]
    # Saved and loaded, as a run directory keeps it.
    from tokenizers import Tokenizer

    assert Tokenizer.from_str(extended.to_str()).encode("猫").ids == extended.encode("猫").ids


def test_a_byte_level_vocabulary_cannot_be_extended():
    bpe = train_tokenizer(ENGLISH, TokenizerConfig(kind="bpe", vocab_size=300, min_frequency=1, max_length=32))
    with pytest.raises(ConfigError, match="extend_vocab needs a WordPiece vocabulary, this tokenizer is BPE"):
        extend_vocabulary(bpe, ["猫"])
    with pytest.raises(ConfigError, match="extend_vocab needs a WordPiece vocabulary, this tokenizer is BPE"):
        unknown_characters(bpe, ["猫 猫"])


@pytest.mark.parametrize("wide", [False, True])
def test_grown_model_reads_a_new_token_as_it_read_unk(wide):
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=50, num_classes=3, d_model=16, nhead=2, num_layers=1,
                                  dim_feedforward=32, max_len=16, wide=wide).eval()
    if wide:
        torch.nn.init.normal_(model.wide.weight)
    unk = 1
    grown = with_vocabulary(model, 54, copy_id=unk).eval()
    assert grown.config["vocab_size"] == 54 and grown.token_embedding.embedding.weight.shape[0] == 54
    table = grown.token_embedding.embedding.weight
    assert torch.equal(table[:50], model.token_embedding.embedding.weight)
    assert torch.equal(table[50:], model.token_embedding.embedding.weight[unk].expand(4, -1))
    old_ids = torch.tensor([[2, 7, unk, 9, 3]])
    new_ids = torch.tensor([[2, 7, 52, 9, 3]])
    if wide:  # the branch is new (fitted after), zero, of the grown size
        assert grown.wide.weight.shape[0] == 54 and not grown.wide.weight.any()
        model.wide.weight.data.zero_()
    with torch.no_grad():
        assert torch.allclose(grown(old_ids), model(old_ids), atol=1e-6)
        assert torch.allclose(grown(new_ids), model(old_ids), atol=1e-6)
    assert with_vocabulary(model, 50, copy_id=unk) is model
