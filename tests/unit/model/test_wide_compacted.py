"""WideBranch.compacted / BagOfTermsClassifier.compacted: a copy for inference whose tables hold only the
rows the training texts reach, with the same logits for any input (terms never seen included)."""

import numpy as np
import pytest
import torch

from tfm_cls.bag.matrix import document_frequencies
from tfm_cls.model import BagOfTermsClassifier
from tfm_cls.model.wide import WideBranch

VOCAB = 40


def _fitted(weighting: str, ngrams: int, chars: bool) -> tuple[WideBranch, list[list[int]]]:
    """A branch whose IDF comes from 'training rows' over ids 3..19 only: most rows of its table unseen."""
    gen = torch.Generator().manual_seed(1)
    rng = np.random.default_rng(0)
    train = [rng.integers(3, 20, size=rng.integers(1, 9)).tolist() for _ in range(30)]
    branch = WideBranch(VOCAB, 3, 0, weighting, ngrams, 101, skip_ids=(1, 2), char_rows=50 if chars else 0,
                        char_slots=6 if chars else 0)
    if chars:
        branch.set_char_grams(torch.randint(-1, 50, (VOCAB, 6), generator=gen))
    df = document_frequencies(branch, train)
    if weighting == "tfidf":
        branch.set_idf(torch.from_numpy(np.where(df > 0, np.log(31 / (1 + df)) + 1.0, 0.0)))
    with torch.no_grad():  # a fit gives weights only where the training texts hold a term
        branch.weight.copy_(torch.randn(branch.rows, 3, generator=gen) * torch.from_numpy(df > 0)[:, None])
    return branch, train


@pytest.mark.parametrize("weighting", ["count", "tfidf"])
@pytest.mark.parametrize("ngrams", [1, 3])
@pytest.mark.parametrize("chars", [False, True])
def test_the_compacted_branch_gives_the_same_logits_on_any_text(weighting, ngrams, chars):
    branch, _ = _fitted(weighting, ngrams, chars)
    small = branch.compacted()
    assert small.weight.shape[0] < branch.weight.shape[0] and small.rows <= branch.rows
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(0, VOCAB, (6, 11), generator=gen)  # ids the training texts never held, markers too
    mask = (torch.arange(11) < torch.tensor([11, 7, 1, 0, 4, 9])[:, None]).long()
    with torch.no_grad():
        assert small(ids, mask) == pytest.approx(branch(ids, mask), abs=1e-6)
    if chars and weighting == "tfidf":
        # the grams a training text holds, numbered again, stored as int16 (GRAM_OFFSET)
        assert small.char_rows == int((branch.idf[branch.char_start:] > 0).sum()) < branch.char_rows
        assert small.char_grams.dtype == torch.int16 and small.char_slots <= branch.char_slots
        decoded = small.char_grams.long() + small.gram_offset
        assert int(decoded.min()) >= -1 and int(decoded.max()) < small.char_rows


def test_the_bag_compacted_keeps_its_bias_and_leaves_the_original_untouched():
    branch, _ = _fitted("tfidf", 2, True)
    bag = BagOfTermsClassifier(VOCAB, 3, 0, 16, "tfidf", 2, 101, wide_skip_ids=[1, 2], wide_char_rows=50,
                               wide_char_slots=6)
    bag.wide.load_state_dict(branch.state_dict())
    with torch.no_grad():
        bag.bias.copy_(torch.tensor([0.5, -1.0, 2.0]))
    small = bag.compacted()
    ids = torch.randint(0, VOCAB, (3, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert small(ids) == pytest.approx(bag(ids), abs=1e-6)
    assert bag.wide.row_of is None and bag.wide.weight.shape[0] == bag.wide.rows  # the run's model as it was
    assert small.config["wide_char_slots"] == small.wide.char_slots
    assert sum(t.numel() * t.element_size() for t in small.state_dict().values()) < \
        sum(t.numel() * t.element_size() for t in bag.state_dict().values())


def test_a_character_view_of_more_grams_than_int16_holds_keeps_an_int32_table():
    vocab, slots, grams = 2000, 40, 70_000
    branch = WideBranch(vocab, 2, 0, "tfidf", 1, char_rows=grams, char_slots=slots)
    table = torch.randperm(vocab * slots, generator=torch.Generator().manual_seed(0)).view(vocab, slots) % grams
    branch.set_char_grams(table)
    branch.set_idf(torch.ones(branch.rows))
    with torch.no_grad():
        branch.weight.copy_(torch.randn(branch.rows, 2, generator=torch.Generator().manual_seed(1)))
    small = branch.compacted()
    assert small.char_grams.dtype == torch.int32 and small.gram_offset == 0 and small.char_rows == grams
    ids = torch.randint(1, vocab, (3, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert small(ids) == pytest.approx(branch(ids), abs=1e-5)
