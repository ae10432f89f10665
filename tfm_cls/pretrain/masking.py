"""Masked-language-model data: tokenise, pack short texts into full sequences, mask dynamically.

Every sequence carries, next to its token ids, a *word id* per token: the index of the word the
token belongs to within that sequence (increasing from 0), or -1 for [CLS], [SEP] and padding.
Word ids serve twice: `word_id >= 0` marks the tokens that may be masked (special tokens and
padding never are), and tokens sharing a word id are masked together in whole-word and span modes.

Masking is BERT's (Devlin et al., 2019, section 3.1): a fraction `mask_prob` of the maskable tokens
becomes a prediction target; of those, 80% are replaced by [MASK], 10% by a random token and 10%
are kept. Masks are drawn afresh for every batch (RoBERTa's dynamic masking) from generators the
training loop seeds per sequence and epoch, so a resumed run draws exactly the masks of an
uninterrupted one, and N data-parallel processes the masks of one process with N times the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100  # label of tokens that are not prediction targets (cross_entropy's default)
MASKING_MODES = ("token", "whole_word", "span")


@dataclass(frozen=True)
class Document:
    """One tokenised text, without special tokens: token ids and 0-based word ids, both [n]."""

    ids: np.ndarray
    word_ids: np.ndarray


def tokenize_documents(tokenizer, texts: Sequence[str], batch_size: int = 2048) -> list[Document]:
    """Tokenise `texts` with a `tokenizers.Tokenizer`, keeping word boundaries; empty texts are dropped.

    Whole texts, without padding or truncation (a saved tokenizer carries both for classification):
    packing cuts long texts into sequences itself, so no token is lost.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy: the caller's settings stay as they are
    tokenizer.no_padding()
    tokenizer.no_truncation()
    docs: list[Document] = []
    for start in range(0, len(texts), batch_size):
        for enc in tokenizer.encode_batch(list(texts[start : start + batch_size]), add_special_tokens=False):
            if not enc.ids:
                continue
            words = [-1 if w is None else w for w in enc.word_ids]
            docs.append(Document(np.asarray(enc.ids, dtype=np.int64), _renumber_words(words)))
    return docs


def _renumber_words(word_ids: Sequence[int] | np.ndarray, start: int = 0) -> np.ndarray:
    """Map word ids to consecutive integers from `start` in order of appearance (-1 stays -1)."""
    word_ids = np.asarray(word_ids, dtype=np.int64)
    out = np.full_like(word_ids, -1)
    valid = word_ids >= 0
    if valid.any():
        w = word_ids[valid]
        # A new word begins wherever the id changes from the previous valid token.
        new_word = np.concatenate([[True], w[1:] != w[:-1]])
        out[valid] = start + np.cumsum(new_word) - 1
    return out


def _finish(ids: list[np.ndarray], words: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    ids_arr = np.concatenate(ids)
    return ids_arr, _renumber_words(np.concatenate(words))


def pack_documents(
    docs: Sequence[Document], max_len: int, cls_id: int, sep_id: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Concatenate documents into sequences of exactly `max_len` tokens: [CLS] a [SEP] b [SEP] c...

    Documents are streamed in the given order and the stream is cut every `max_len - 1` tokens,
    so a document may continue in the next sequence (as RoBERTa's FULL-SENTENCES packing); only the
    last sequence can be shorter. Short texts (an SST-2 phrase is ~10 tokens) thus fill whole
    sequences and no compute is spent on padding. Returns (ids [max_len], word_ids [max_len]) pairs.
    """
    if max_len < 3:
        raise ValueError(f"max_len must be >= 3 to hold [CLS], a token and [SEP], got {max_len}")
    body = max_len - 1  # every sequence starts with [CLS]
    sep = np.asarray([sep_id], dtype=np.int64)
    no_word = np.asarray([-1], dtype=np.int64)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    ids: list[np.ndarray] = []
    words: list[np.ndarray] = []
    filled = 0
    next_word = 0  # word ids stay distinct across documents in one stream
    for doc in docs:
        pieces = [(doc.ids, doc.word_ids + next_word), (sep, no_word)]
        next_word += int(doc.word_ids.max()) + 1
        for piece_ids, piece_words in pieces:
            while len(piece_ids):
                take = min(body - filled, len(piece_ids))
                ids.append(piece_ids[:take])
                words.append(piece_words[:take])
                piece_ids, piece_words = piece_ids[take:], piece_words[take:]
                filled += take
                if filled == body:
                    out.append(_with_cls(ids, words, cls_id))
                    ids, words, filled = [], [], 0
    if filled:
        out.append(_with_cls(ids, words, cls_id))
    return out


def _with_cls(ids: list[np.ndarray], words: list[np.ndarray], cls_id: int) -> tuple[np.ndarray, np.ndarray]:
    return _finish([np.asarray([cls_id], dtype=np.int64), *ids], [np.asarray([-1], dtype=np.int64), *words])


def single_documents(
    docs: Sequence[Document], max_len: int, cls_id: int, sep_id: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """One sequence per document, [CLS] text [SEP], truncated to `max_len` (no packing)."""
    if max_len < 3:
        raise ValueError(f"max_len must be >= 3 to hold [CLS], a token and [SEP], got {max_len}")
    out = []
    for doc in docs:
        n = min(len(doc.ids), max_len - 2)
        out.append(
            _finish(
                [np.asarray([cls_id]), doc.ids[:n], np.asarray([sep_id])],
                [np.asarray([-1]), doc.word_ids[:n], np.asarray([-1])],
            )
        )
    return out


@lru_cache(maxsize=32)
def span_start_probability(mask_prob: float, geometric_p: float, max_span: int) -> float:
    """Probability q of starting a span at each word so that each word is covered with `mask_prob`.

    Span lengths L (in words) follow a geometric(`geometric_p`) law clipped at `max_span` (SpanBERT).
    A word is left uncovered iff no span starting k words before it is longer than k:
    P(uncovered) = prod_k (1 - q * P(L > k)). Solved for q by bisection (ignoring sequence ends).
    """
    lengths = np.arange(1, max_span + 1)
    pmf = geometric_p * (1 - geometric_p) ** (lengths - 1)
    pmf[-1] += 1.0 - pmf.sum()  # clipping puts the tail mass on max_span
    survival = 1.0 - np.concatenate([[0.0], np.cumsum(pmf)[:-1]])  # P(L > k), k = 0..max_span-1

    def coverage(q: float) -> float:
        return 1.0 - float(np.prod(1.0 - q * survival))

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if coverage(mid) < mask_prob else (lo, mid)
    return (lo + hi) / 2


Generators = torch.Generator | Sequence[torch.Generator] | None
"""One generator for the whole batch, or one per row (see `_rand`), or None (torch's global one)."""


def _rand(batch: int, width: int, generator: Generators, row_widths: Sequence[int] | torch.Tensor | None = None) -> torch.Tensor:
    """Uniform [0, 1) draws [batch, width].

    With one generator per row, row r draws only its own `row_widths[r]` numbers (the rest are
    1.0, which never selects anything), so a row's masks do not depend on the other rows: a
    sequence is masked the same whether it is batched with others, or on another DDP rank.
    """
    if generator is None or isinstance(generator, torch.Generator):
        return torch.rand(batch, width, generator=generator)
    if len(generator) != batch:
        raise ValueError(f"got {len(generator)} generators for a batch of {batch} rows")
    out = torch.ones(batch, width)
    for row, gen in enumerate(generator):
        n = width if row_widths is None else min(int(row_widths[row]), width)
        out[row, :n] = torch.rand(n, generator=gen)
    return out


def select_targets(
    word_ids: torch.Tensor,
    mask_prob: float,
    mode: str = "token",
    generator: Generators = None,
    span_geometric_p: float = 0.2,
    max_span: int = 10,
    lengths: Sequence[int] | torch.Tensor | None = None,
) -> torch.Tensor:
    """Choose which tokens become prediction targets. word_ids: [B, T] (-1 = never). Returns bool [B, T].

    token: each maskable token independently with `mask_prob`.
    whole_word: each word independently with `mask_prob`; all of its pieces together.
    span: runs of whole words (SpanBERT), each word covered with about `mask_prob`.
    `lengths` [B]: tokens per row before padding (only used with one generator per row).
    """
    if mode not in MASKING_MODES:
        raise ValueError(f"masking mode must be one of {list(MASKING_MODES)}, got {mode!r}")
    maskable = word_ids >= 0  # [B, T]
    batch, seq = word_ids.shape
    if mode == "token":
        return (_rand(batch, seq, generator, lengths) < mask_prob) & maskable
    row_words = word_ids.max(dim=1).values + 1  # [B] words per row (0 for a row without any)
    n_words = max(int(row_words.max().item()), 1) if batch else 1
    word_index = word_ids.clamp(min=0)  # [B, T]
    if mode == "whole_word":
        word_selected = _rand(batch, n_words, generator, row_words) < mask_prob  # [B, W]
    else:
        q = span_start_probability(mask_prob, span_geometric_p, max_span)
        # Spans may start up to max_span - 1 words before the sequence so its first words are covered
        # as often as the others (position p here is word p - lead).
        lead = max_span - 1
        n_starts = n_words + lead
        starts = _rand(batch, n_starts, generator, row_words + lead) < q  # [B, W + lead]
        # Span length per start: geometric(p) in {1, 2, ...}, clipped at max_span.
        u = _rand(batch, n_starts, generator, row_words + lead).clamp_min(1e-12)
        span = (torch.floor(torch.log(u) / np.log1p(-span_geometric_p)) + 1).clamp(max=max_span).long()
        # Difference array: +1 at each span start, -1 just past its end; a prefix sum > 0 = covered.
        delta = torch.zeros(batch, n_starts + max_span, dtype=torch.long)  # [B, W + lead + max_span]
        positions = torch.arange(n_starts).expand(batch, -1)
        delta.scatter_add_(1, positions, starts.long())
        delta.scatter_add_(1, positions + span, -starts.long())
        word_selected = delta.cumsum(1)[:, lead : lead + n_words] > 0  # [B, W]
    return torch.gather(word_selected, 1, word_index) & maskable


def apply_mask(
    input_ids: torch.Tensor,
    targets: torch.Tensor,
    mask_token_id: int,
    random_token_ids: torch.Tensor,
    mask_token_frac: float = 0.8,
    random_token_frac: float = 0.1,
    generator: Generators = None,
    lengths: Sequence[int] | torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt the target tokens BERT's way. input_ids, targets: [B, T]. Returns (inputs, labels) [B, T].

    Each target becomes [MASK] with `mask_token_frac`, a random token from `random_token_ids` with
    `random_token_frac`, otherwise stays; labels hold the original id at targets, IGNORE_INDEX elsewhere.
    """
    batch, seq = input_ids.shape
    labels = torch.where(targets, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    u = _rand(batch, seq, generator, lengths)
    to_mask = targets & (u < mask_token_frac)
    to_random = targets & (u >= mask_token_frac) & (u < mask_token_frac + random_token_frac)
    inputs = input_ids.clone()
    inputs[to_mask] = mask_token_id
    n = len(random_token_ids)
    pick = (_rand(batch, seq, generator, lengths) * n).long().clamp(max=n - 1)  # uniform over random_token_ids
    inputs[to_random] = random_token_ids[pick][to_random]
    return inputs, labels


class MLMCollator:
    """Pads a list of (ids, word_ids) sequences and masks them with the given generator(s)."""

    def __init__(
        self,
        *,
        pad_token_id: int,
        mask_token_id: int,
        random_token_ids: Sequence[int],
        mask_prob: float = 0.15,
        mask_token_frac: float = 0.8,
        random_token_frac: float = 0.1,
        mode: str = "token",
        span_geometric_p: float = 0.2,
        max_span: int = 10,
    ) -> None:
        if not 0.0 < mask_prob < 1.0:
            raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
        if mask_token_frac < 0 or random_token_frac < 0 or mask_token_frac + random_token_frac > 1:
            raise ValueError(
                "mask_token_frac and random_token_frac must be >= 0 and sum to <= 1, "
                f"got {mask_token_frac} and {random_token_frac}"
            )
        if mode not in MASKING_MODES:
            raise ValueError(f"masking mode must be one of {list(MASKING_MODES)}, got {mode!r}")
        if len(random_token_ids) == 0:
            raise ValueError("random_token_ids is empty: the vocabulary has no ordinary tokens")
        self.pad_token_id = pad_token_id
        self.mask_token_id = mask_token_id
        self.random_token_ids = torch.as_tensor(list(random_token_ids), dtype=torch.long)
        self.mask_prob = mask_prob
        self.mask_token_frac = mask_token_frac
        self.random_token_frac = random_token_frac
        self.mode = mode
        self.span_geometric_p = span_geometric_p
        self.max_span = max_span

    def pad(
        self, examples: Sequence[tuple[np.ndarray, np.ndarray]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-pad to the longest sequence.

        Returns input_ids [B, T], word_ids [B, T] (-1 on pads) and attention_mask [B, T] (True = token).
        """
        longest = max(len(ids) for ids, _ in examples)
        input_ids = torch.full((len(examples), longest), self.pad_token_id, dtype=torch.long)
        word_ids = torch.full((len(examples), longest), -1, dtype=torch.long)
        attention_mask = torch.zeros((len(examples), longest), dtype=torch.bool)
        for row, (ids, words) in enumerate(examples):
            input_ids[row, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
            word_ids[row, : len(words)] = torch.as_tensor(words, dtype=torch.long)
            attention_mask[row, : len(ids)] = True
        return input_ids, word_ids, attention_mask

    def __call__(
        self, examples: Sequence[tuple[np.ndarray, np.ndarray]], generator: Generators = None
    ) -> dict[str, torch.Tensor]:
        """Returns input_ids, attention_mask (True = real token) and labels, each [B, T].

        `generator`: one for the batch, or one per example (masks independent of the batching)."""
        input_ids, word_ids, attention_mask = self.pad(examples)
        lengths = attention_mask.sum(dim=1)  # [B]
        targets = select_targets(
            word_ids, self.mask_prob, self.mode, generator, self.span_geometric_p, self.max_span, lengths
        )
        inputs, labels = apply_mask(
            input_ids,
            targets,
            self.mask_token_id,
            self.random_token_ids,
            self.mask_token_frac,
            self.random_token_frac,
            generator,
            lengths,
        )
        return {"input_ids": inputs, "attention_mask": attention_mask, "labels": labels}
