"""tfm_cls.bag.matrix: the split's bags built over whole arrays equal the branch's own forward (the
graph that is exported), for every kind of bag; document frequencies; blocks."""

import numpy as np
import pytest
import torch

import tfm_cls.bag.matrix as M
from tfm_cls.data.ragged import RaggedIds
from tfm_cls.data.tokenized import TokenizedSplit, collate
from tfm_cls.model.wide import WideBranch

VOCAB = 30


def _rows(seed: int, count: int = 40) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    # lengths 0 to 12, ids with repeats; id 1 and 2 stand for markers the bag may skip
    return [rng.integers(1, VOCAB, size=rng.integers(0, 13)).tolist() for _ in range(count)]


def _branch(weighting: str, ngrams: int, chars: bool, skip: tuple[int, ...]) -> WideBranch:
    gen = torch.Generator().manual_seed(3)
    branch = WideBranch(VOCAB, 4, pad_token_id=0, weighting=weighting, ngrams=ngrams, buckets=97, skip_ids=skip,
                        char_rows=23 if chars else 0, char_slots=5 if chars else 0)
    if chars:  # each token's gram rows, some slots empty
        table = torch.randint(-1, 23, (VOCAB, 5), generator=gen)
        branch.set_char_grams(table)
    if weighting == "tfidf":
        idf = torch.rand(branch.rows, generator=gen) + 0.5
        idf[::7] = 0.0  # terms outside the vocabulary add nothing
        branch.set_idf(idf)
    with torch.no_grad():
        branch.weight.normal_(generator=gen)
    return branch


@pytest.mark.parametrize("weighting", ["count", "tfidf"])
@pytest.mark.parametrize("ngrams", [1, 2, 3])
@pytest.mark.parametrize("chars", [False, True])
def test_bag_rows_times_weights_is_the_branchs_forward(weighting, ngrams, chars):
    rows = _rows(ngrams * 10 + chars)
    branch = _branch(weighting, ngrams, chars, skip=(1, 2))
    split = TokenizedSplit(input_ids=rows, labels=np.zeros(len(rows), np.int64),
                           lengths=np.array([len(r) for r in rows]), num_truncated=0, num_empty=0)
    batch = collate(split, list(range(len(rows))), 0)
    with torch.no_grad():
        expected = branch(batch["input_ids"], batch["attention_mask"]).numpy()  # [N, C]
    bags = M.bag_rows(branch, RaggedIds.from_lists(rows))
    assert bags.shape == (len(rows), branch.rows) and bags.dtype == np.float32
    assert bags @ branch.weight.detach().numpy() == pytest.approx(expected, abs=1e-5)
    # an empty row is an empty bag, not NaN
    assert np.isfinite(bags.data).all() and all(bags[i].nnz == 0 for i, r in enumerate(rows) if not r)


def test_blocks_change_nothing(monkeypatch):
    rows = _rows(7, count=200)
    branch = _branch("tfidf", 3, True, skip=(1,))
    whole = M.bag_rows(branch, rows)
    monkeypatch.setattr(M, "BLOCK_TOKENS", 17)  # many blocks, rows never split across two
    assert len(M._blocks(RaggedIds.from_lists(rows).offsets, 17)) > 10
    assert abs(M.bag_rows(branch, rows) - whole).max() == 0
    assert np.array_equal(M.document_frequencies(branch, rows), np.diff(whole.tocsc().indptr))


def test_document_frequencies_count_rows_not_occurrences():
    branch = WideBranch(10, 2, pad_token_id=0, weighting="tfidf", ngrams=2, buckets=5)
    df = M.document_frequencies(branch, [[3, 3, 3], [3, 4], []])
    assert df[3] == 2 and df[4] == 1 and df[:10].sum() == 3
    pair_33 = (3 * M.PAIR_HASH + 3) % 5 + 10
    assert df[pair_33] == 1  # (3, 3) twice in one row: one row
    assert df[10:].sum() == 2  # (3, 3) in row 0, (3, 4) in row 1
