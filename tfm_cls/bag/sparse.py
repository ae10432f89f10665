"""The bags of terms of whole splits as the fits hold them: torch and scipy sparse CSR matrices over the
same arrays, and the `tfidf` weighting's IDF table. The rows are exactly the branch's `terms` / `shares`
(tfm_cls.bag.matrix.bag_rows), so a matrix's product with the branch's weights [table rows, C] is the
branch's logits.

    set_idf(branch, train_split)              # the `tfidf` table from the training rows
    bags = bag_matrix(branch, split)          # torch sparse CSR [rows, table rows] float32
    scipy_csr(bags) / torch_csr(matrix)       # one view of the same arrays as the other
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from scipy import sparse
from torch import Tensor

from tfm_cls.bag.matrix import bag_rows, document_frequencies
from tfm_cls.data.char_grams import GRAM_MIN_DF
from tfm_cls.data.tokenized import TokenizedSplit
from tfm_cls.model.wide import WideBranch


def set_idf(branch: WideBranch, split: TokenizedSplit) -> None:
    """The `tfidf` weighting's table from the training rows: scikit-learn's smooth idf,
    ln((1 + N) / (1 + df)) + 1, and 0 for a term the rows never hold (and padding), and for a
    character gram fewer than GRAM_MIN_DF rows hold (the character view's min_df)."""
    df = document_frequencies(branch, split.input_ids)
    n = split.num_rows
    least = np.ones_like(df)
    least[branch.char_start:] = GRAM_MIN_DF  # the character view's rows (none without it)
    branch.set_idf(torch.from_numpy(np.where(df >= least, np.log((1.0 + n) / (1.0 + df)) + 1.0, 0.0)))


def bag_matrix(branch: WideBranch, split: TokenizedSplit) -> Tensor:
    """The split's rows as the branch sees them: a sparse CSR [rows, table rows] float32 matrix
    whose product with the branch's weights [table rows, C] is the branch's logits (built over whole
    arrays: tfm_cls.bag.matrix.bag_rows)."""
    return torch_csr(bag_rows(branch, split.input_ids, what=f"bags of {split.num_rows} rows"))


def torch_csr(matrix: sparse.csr_matrix) -> Tensor:
    """A scipy CSR matrix as a torch sparse CSR tensor (int64 indices, as torch's sparse ops make)."""
    with warnings.catch_warnings():  # "sparse CSR support is in beta": a product and its gradient are all we use
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr.astype(np.int64)),
                                       torch.from_numpy(matrix.indices.astype(np.int64)),
                                       torch.from_numpy(matrix.data.astype(np.float32, copy=False)),
                                       size=tuple(matrix.shape))


def scipy_csr(bags: Tensor) -> sparse.csr_matrix:
    """A torch sparse CSR tensor as a scipy CSR matrix over the same arrays (no copy)."""
    return sparse.csr_matrix((bags.values().numpy(), bags.col_indices().numpy(), bags.crow_indices().numpy()),
                             shape=tuple(bags.shape))
