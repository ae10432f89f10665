"""Masking statistics, whole-word/span grouping and packing of the MLM data path (tfm_cls.pretrain.masking)."""

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

from tfm_cls.pretrain.masking import (
    IGNORE_INDEX,
    Document,
    MLMCollator,
    pack_documents,
    select_targets,
    single_documents,
    tokenize_documents,
)

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
VOCAB = 50


def _random_sequences(n: int, seed: int = 0, word_len: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    """[CLS] tokens [SEP] of random lengths 5..60 (so batches have padding); words of `word_len` tokens."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        n_tok = int(rng.integers(5, 60))
        ids = np.concatenate([[CLS], rng.integers(5, VOCAB, n_tok), [SEP]])
        words = np.concatenate([[-1], np.arange(n_tok) // word_len, [-1]])
        out.append((ids, words))
    return out


def _collator(mode: str = "token", mask_prob: float = 0.15) -> MLMCollator:
    return MLMCollator(
        pad_token_id=PAD,
        mask_token_id=MASK,
        random_token_ids=range(5, VOCAB),
        mask_prob=mask_prob,
        mode=mode,
    )


@pytest.mark.parametrize("mask_prob", [0.15, 0.25])
def test_token_masking_statistics(mask_prob):
    examples = _random_sequences(400)
    collator = _collator("token", mask_prob)
    original, word_ids, attention = collator.pad(examples)
    batch = collator(examples, torch.Generator().manual_seed(0))
    labels, inputs = batch["labels"], batch["input_ids"]
    targets = labels != IGNORE_INDEX
    maskable = word_ids >= 0

    assert torch.equal(batch["attention_mask"], attention)
    assert not (targets & ~maskable).any(), "a special token or a pad became a target"
    assert torch.equal(inputs[~targets], original[~targets]), "a non-target token was changed"
    assert torch.equal(labels[targets], original[targets])
    assert (labels[~targets] == IGNORE_INDEX).all()

    n_targets = int(targets.sum())
    rate = n_targets / int(maskable.sum())
    assert abs(rate - mask_prob) < 0.01, rate
    as_mask = (inputs[targets] == MASK).float().mean().item()
    kept = (inputs[targets] == original[targets]).float().mean().item()
    assert abs(as_mask - 0.8) < 0.03, as_mask
    # A random replacement equals the original with probability 1/45, so "kept" is ~0.1 + 0.1/45.
    assert abs(kept - 0.1) < 0.02, kept
    replaced = targets & (inputs != MASK) & (inputs != original)
    assert inputs[replaced].min() >= 5, "a random replacement was a special token"
    # Padding stays padding and [CLS]/[SEP] stay in place.
    assert torch.equal(inputs[~attention], torch.full_like(inputs[~attention], PAD))
    assert (inputs[:, 0] == CLS).all()


def test_masks_are_reproducible_per_generator_seed_and_differ_across_seeds():
    examples = _random_sequences(8)
    collator = _collator()
    a = collator(examples, torch.Generator().manual_seed(5))
    b = collator(examples, torch.Generator().manual_seed(5))
    c = collator(examples, torch.Generator().manual_seed(6))
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
    assert not torch.equal(a["labels"], c["labels"])


@pytest.mark.parametrize("mode", ["token", "whole_word", "span"])
def test_per_sequence_generators_mask_a_sequence_the_same_in_any_batch(mode):
    """One generator per row: a row's masks depend on its own seed only (DDP shards = one big batch)."""
    examples = _random_sequences(6, seed=3, word_len=2)
    collator = _collator(mode, 0.3)

    def gens(seeds):
        return [torch.Generator().manual_seed(s) for s in seeds]

    full = collator(examples, gens(range(6)))
    part = collator(examples[3:5], gens([3, 4]))  # another batch: other rows, other padding width
    for row_full, row_part in ((3, 0), (4, 1)):
        n = len(examples[row_full][0])
        for key in ("input_ids", "labels"):
            assert torch.equal(full[key][row_full, :n], part[key][row_part, :n]), (key, row_full)
    assert (full["labels"] != IGNORE_INDEX).any()
    with pytest.raises(ValueError, match="3 generators for a batch of 6"):
        collator(examples, gens(range(3)))


@pytest.mark.parametrize("mode", ["whole_word", "span"])
def test_whole_words_are_masked_together_at_the_requested_rate(mode):
    examples = _random_sequences(3000, word_len=3)
    collator = _collator(mode, 0.2)
    _, word_ids, _ = collator.pad(examples)
    targets = collator(examples, torch.Generator().manual_seed(1))["labels"] != IGNORE_INDEX
    assert not (targets & (word_ids < 0)).any()
    # Per (row, word): min and max of the target flag over its tokens; they differ iff partly masked.
    n_words = int(word_ids.max()) + 1
    index = word_ids.clamp(min=0)
    flag = targets.long().masked_fill(word_ids < 0, -1)
    most = torch.full((len(examples), n_words), -1).scatter_reduce(1, index, flag, "amax")
    flag_min = targets.long().masked_fill(word_ids < 0, 2)
    least = torch.full((len(examples), n_words), 2).scatter_reduce(1, index, flag_min, "amin")
    present = most >= 0
    mixed = int((present & (most != least)).sum())
    assert mixed == 0, f"{mixed} words were only partly masked"
    # Words at sequence ends may hold fewer than 3 tokens, so compare word-level and token-level rates.
    rate = targets.sum().item() / (word_ids >= 0).sum().item()
    assert abs(rate - 0.2) < 0.02, rate


def test_span_masking_masks_runs_of_words():
    word_ids = torch.arange(400).repeat(64, 1)  # one token per word
    targets = select_targets(word_ids, 0.15, "span", torch.Generator().manual_seed(0))
    token_mode = select_targets(word_ids, 0.15, "token", torch.Generator().manual_seed(0))
    # Runs: count starts of masked stretches; spans (mean ~3.6 words) give far fewer runs than tokens.
    def runs(t):
        return int((t[:, 1:] & ~t[:, :-1]).sum() + t[:, 0].sum())

    assert runs(targets) < 0.5 * runs(token_mode)


def test_pack_documents_keeps_every_token_in_order_in_full_sequences():
    rng = np.random.default_rng(0)
    docs = []
    for _ in range(30):
        n = int(rng.integers(1, 25))
        docs.append(Document(rng.integers(5, VOCAB, n), np.sort(rng.integers(0, 5, n)) - 0))
    docs = [Document(d.ids, np.unique(d.word_ids, return_inverse=True)[1]) for d in docs]
    packed = pack_documents(docs, max_len=16, cls_id=CLS, sep_id=SEP)

    assert all(len(ids) == 16 for ids, _ in packed[:-1]) and 2 <= len(packed[-1][0]) <= 16
    assert all(ids[0] == CLS for ids, _ in packed)
    stream = np.concatenate([ids[1:] for ids, _ in packed])
    expected = np.concatenate([np.concatenate([d.ids, [SEP]]) for d in docs])
    assert np.array_equal(stream, expected)
    for ids, words in packed:
        special = (ids == CLS) | (ids == SEP)
        assert np.array_equal(words < 0, special)
        valid = words[words >= 0]
        assert valid[0] == 0 and np.all(np.diff(valid) >= 0) and np.all(np.diff(valid) <= 1)


def test_single_documents_truncate_and_wrap_in_cls_sep():
    docs = [Document(np.arange(5, 25), np.arange(20)), Document(np.array([7]), np.array([0]))]
    out = single_documents(docs, max_len=8, cls_id=CLS, sep_id=SEP)
    assert out[0][0].tolist() == [CLS, 5, 6, 7, 8, 9, 10, SEP]
    assert out[1][0].tolist() == [CLS, 7, SEP]
    assert out[0][1].tolist() == [-1, 0, 1, 2, 3, 4, 5, -1]


def test_tokenize_documents_groups_word_pieces_into_words():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=40, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    )
    tok.train_from_iterator(["unbelievable stories", "a cat", "the mat"] * 3, trainer)
    # A classification tokenizer pads batches and truncates; MLM documents must be neither.
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    tok.enable_truncation(max_length=3)
    docs = tokenize_documents(tok, ["unbelievable cat", "", "mat a"])
    assert len(docs) == 2, "the empty text is dropped"
    assert tok.padding is not None and tok.truncation is not None, "the caller's tokenizer was changed"
    assert docs[1].ids.tolist() == [tok.token_to_id("mat"), tok.token_to_id("a")], "padded or truncated"
    first = docs[0]
    tok.no_truncation()
    pieces = tok.encode("unbelievable", add_special_tokens=False).ids
    assert len(pieces) > 1, "the test needs a word split into several pieces"
    assert first.word_ids.tolist() == [0] * len(pieces) + [1] * (len(first.ids) - len(pieces))


def test_collator_rejects_bad_settings():
    with pytest.raises(ValueError, match="mask_prob"):
        _collator(mask_prob=0.0)
    with pytest.raises(ValueError, match="masking mode"):
        _collator(mode="sentence")
