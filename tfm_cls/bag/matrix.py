"""A split's bags of terms as one sparse matrix, built over whole arrays: what the wide branch
(tfm_cls.model.wide.WideBranch) computes for a batch, for every row of a split at once.

    bags = bag_rows(branch, split.input_ids)          # scipy CSR [rows, branch.rows] float32
    bags @ branch.weight  ==  branch(input_ids, attention_mask)     # the branch's logits, row for row
    df = document_frequencies(branch, split.input_ids)              # [branch.rows] int64

The branch's `terms` / `shares` are the definition (they are what the exported graph runs); this
module computes the same numbers with numpy and scipy.sparse over the split's flat token array
(tfm_cls.data.ragged): the tokens, the hashed pairs and triples of adjacent tokens of one row, and
the character view (each token's gram rows, summed through a sparse [vocab, grams] table), counted
by one sparse sum of duplicates. Rows go in blocks of BLOCK_TOKENS tokens, so the temporary arrays
stay bounded whatever the split's size; the result is what the caller keeps. A test holds it equal
to the branch's own forward.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
from scipy import sparse

from tfm_cls.data.ragged import RaggedIds, as_ragged
from tfm_cls.model.wide import PAIR_HASH, TRIPLE_HASH, WideBranch

logger = logging.getLogger(__name__)

BLOCK_TOKENS = 2_000_000
"""Tokens handled at once: each block's temporary arrays (terms, rows, counts) take ~100 bytes a token
with pairs and triples, so ~200 MB, whatever the split's size (the character view adds its grams)."""
PROGRESS_SECONDS = 30.0
"""A log line at least this often while a split's bags are built (a million short texts take minutes)."""


def bag_rows(branch: WideBranch, ids: RaggedIds | Sequence[Sequence[int]], what: str = "bags") -> sparse.csr_matrix:
    """[rows, branch.rows] float32 CSR: each row's bag as the branch weighs it (`shares` summed over a
    term's positions), so that its product with `branch.weight` is the branch's logits. `ids`: each
    row's token ids, unpadded (a row holds no padding: every id counts, as under an attention mask
    of ones)."""
    ids = as_ragged(ids)
    started = last_said = time.monotonic()
    blocks = []
    for first, last in _blocks(ids.offsets, BLOCK_TOKENS):
        blocks.append(_weighted(branch, _counts(branch, ids, first, last)))
        if time.monotonic() - last_said >= PROGRESS_SECONDS:
            last_said = time.monotonic()
            done = last / max(len(ids), 1)
            logger.info("%s: %d of %d rows (%.0f%%), ~%.0f s left", what, last, len(ids), 100 * done,
                        (last_said - started) * (1 - done) / max(done, 1e-9))
    if not blocks:
        return sparse.csr_matrix((0, branch.rows), dtype=np.float32)
    return sparse.vstack(blocks, format="csr", dtype=np.float32)


def document_frequencies(branch: WideBranch, ids: RaggedIds | Sequence[Sequence[int]]) -> np.ndarray:
    """[branch.rows] int64: in how many rows each term the bag counts occurs."""
    ids = as_ragged(ids)
    df = np.zeros(branch.rows, dtype=np.int64)
    for first, last in _blocks(ids.offsets, BLOCK_TOKENS):
        counts = _counts(branch, ids, first, last)  # one entry per (row, term): its column counts the row once
        df += np.bincount(counts.indices, minlength=branch.rows)
    return df


def _blocks(offsets: np.ndarray, tokens: int) -> list[tuple[int, int]]:
    """(first row, end row) blocks of about `tokens` tokens each, every row in one block."""
    rows = len(offsets) - 1
    if rows == 0:
        return []
    cuts = np.searchsorted(offsets, np.arange(tokens, offsets[-1], tokens), side="right") - 1
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, rows), [rows]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _counts(branch: WideBranch, ids: RaggedIds, first: int, last: int) -> sparse.csr_matrix:
    """[last - first, branch.rows] int32 CSR: how often each term occurs in each row of the block
    (WideBranch.terms, kept positions only)."""
    start, end = ids.offsets[first], ids.offsets[last]
    tokens = ids.values[start:end].astype(np.int64)  # [T] the block's ids, end to end
    row_of = np.repeat(np.arange(last - first, dtype=np.int64), np.diff(ids.offsets[first:last + 1]))  # [T]
    kept = ~np.isin(tokens, np.asarray(branch.skip_ids, dtype=np.int64)) if branch.skip_ids else \
        np.ones(len(tokens), dtype=bool)  # [T]
    rows, terms = [row_of[kept]], [tokens[kept]]
    if branch.ngrams >= 2:
        same_row = row_of[:-1] == row_of[1:]  # [T-1] a pair inside one row
        pairs = (tokens[:-1] * PAIR_HASH + tokens[1:]) % branch.buckets  # [T-1]
        pairs_kept = same_row & kept[:-1] & kept[1:]
        rows.append(row_of[:-1][pairs_kept])
        terms.append(pairs[pairs_kept] + branch.vocab_size)
        if branch.ngrams == 3:
            triples = (pairs[:-1] * TRIPLE_HASH + tokens[2:]) % branch.buckets  # [T-2]
            triples_kept = pairs_kept[:-1] & pairs_kept[1:]  # both pairs inside the row and kept
            rows.append(row_of[:-2][triples_kept])
            terms.append(triples[triples_kept] + branch.vocab_size)
    shape = (last - first, branch.rows)
    row_idx, term_idx = np.concatenate(rows), np.concatenate(terms)
    counts = sparse.csr_matrix((np.ones(len(row_idx), dtype=np.int32), (row_idx, term_idx)), shape=shape)
    counts.sum_duplicates()
    if branch.char_rows:
        counts = counts + _gram_counts(branch, row_of[kept], tokens[kept], shape)
    return counts


def _gram_counts(branch: WideBranch, rows: np.ndarray, tokens: np.ndarray, shape: tuple[int, int]) -> sparse.csr_matrix:
    """The character view's counts [rows of the block, branch.rows]: the kept tokens' counts by row times
    each token's grams ([vocab, grams], one per slot holding a gram), placed at `char_start`."""
    token_counts = sparse.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, tokens)),
                                     shape=(shape[0], branch.vocab_size))
    grams = gram_table(branch)
    counts = (token_counts @ grams).tocsr()  # [rows, char_rows]
    counts.sum_duplicates()
    return sparse.hstack([sparse.csr_matrix((shape[0], branch.char_start), dtype=np.int32), counts],
                         format="csr", dtype=np.int32)


def gram_table(branch: WideBranch) -> sparse.csr_matrix:
    """[vocab, char_rows] int32 CSR: token -> its gram rows (a 1 for each slot of `char_grams` holding one)."""
    table = branch.char_grams.cpu().numpy().astype(np.int64) + branch.gram_offset  # [vocab, slots], -1: none
    token, slot = np.nonzero(table >= 0)
    return sparse.csr_matrix((np.ones(len(token), dtype=np.int32), (token, table[token, slot].astype(np.int64))),
                             shape=(branch.vocab_size, branch.char_rows))


def _weighted(branch: WideBranch, counts: sparse.csr_matrix) -> sparse.csr_matrix:
    """Counts [rows, branch.rows] -> the bag's values (WideBranch.shares summed over each term's positions):
    `count`, each count over the root of the row's number of kept positions; `tfidf`, (1 + log tf) x idf,
    the row L2-normalised. With the character view each view on its own, its squared norm doubled (each
    view 1 / sqrt(2) of a unit bag)."""
    counts = counts.tocsr()
    row_of = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))  # [nnz]
    gram = counts.indices >= branch.char_start  # [nnz] a character gram (none without the view)
    view = row_of * 2 + gram  # [nnz] (row, view) as one key
    tf = counts.data.astype(np.float64)
    if branch.weighting == "count":
        value, squared = tf, tf  # the norm counts positions: the sum of the counts
    else:
        idf = branch.idf.detach().cpu().numpy().astype(np.float64)
        value = (1.0 + np.log(tf)) * idf[counts.indices]
        squared = value * value
    sums = np.bincount(view, weights=squared, minlength=2 * counts.shape[0])  # [rows * 2]
    factor = 2.0 if branch.char_rows else 1.0
    if branch.weighting == "count":
        norm = np.sqrt(np.maximum(factor * sums[view], 1.0))  # WideBranch.shares clamps the count at 1
    else:
        norm = np.maximum(np.sqrt(factor * sums[view]), 1e-12)
    return sparse.csr_matrix(((value / norm).astype(np.float32), counts.indices, counts.indptr),
                             shape=counts.shape)
