"""Each token's character n-grams, as a table the bag of terms reads by token id (the character view of
tfm_cls.model.wide.WideBranch: the graph takes ids only, so a token's grams are looked up, not computed).

    table, rows = char_gram_table(tokenizer)      # [vocab, CHAR_SLOTS] int32 gram rows (-1: none), rows used
    model.wide.set_char_grams(torch.from_numpy(table))
    entries, table = branch_terms(cfg.wide, tokenizer, vocab_size)   # a config's branch keys, and the table

A token's text is its word piece with a space where a word starts (WordPiece: a piece without the
`##` prefix; byte-level BPE / SentencePiece: the `Ġ` / `▁` they already write there), and its grams
are that text's character 2-5-grams, scikit-learn's `char_wb` n-grams taken within the piece (a text
shorter than 2 characters is its own gram). Grams that span two pieces of one word are not counted
(the bag's pairs of adjacent tokens hold those pieces together). The special tokens have none.
Gram rows are numbered in the vocabulary's order, each distinct gram once: the table depends on the
tokenizer alone, so every run with one tokenizer builds the same table.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from tfm_cls.config import WideConfig
from tfm_cls.data.tokenizer import marker_ids

CHAR_SLOTS = 40
"""Grams kept per token, the shortest first: all of them for 97 % of the packaged MiniLM's 30,522
tokens (the median token has 18, the longest 66); a longer piece loses some of its 4- and 5-grams."""
GRAM_SIZES = (2, 5)
"""The smallest and largest n of the grams (the classical char_wb model's, tfm_cls.classify.baseline)."""
GRAM_MIN_DF = 2
"""A gram counts where at least this many training texts hold it (its IDF is 0 otherwise,
tfm_cls.bag.sparse.set_idf): the classical char_wb view's min_df
(tfm_cls.classify.baseline.words_and_chars); a gram of one text is noise its bag's norm would carry."""
WORD_MARKERS = ("Ġ", "▁")
"""Byte-level BPE's and SentencePiece's mark of a word's first piece, read as the space before it."""


def piece_text(token: str, continuing_prefix: str | None) -> str:
    """The text a token stands for, a space where it starts a word: `continuing_prefix` ("##") marks a
    WordPiece piece inside a word; without one (BPE, SentencePiece) the word markers are spaces."""
    if continuing_prefix:
        return token[len(continuing_prefix):] if token.startswith(continuing_prefix) else " " + token
    for marker in WORD_MARKERS:
        token = token.replace(marker, " ")
    return token


def piece_grams(text: str, sizes: tuple[int, int] = GRAM_SIZES) -> list[str]:
    """`text`'s distinct character n-grams for n in `sizes` (inclusive), shortest first, each in
    order of its first position; a text shorter than the smallest n is its only gram."""
    low, high = sizes
    if len(text) < low:
        return [text] if text else []
    grams = (text[start:start + n] for n in range(low, high + 1) for start in range(len(text) - n + 1))
    return list(dict.fromkeys(grams))


def char_gram_table(tokenizer: Tokenizer, slots: int = CHAR_SLOTS, skip_ids: Iterable[int] = (),
                    vocab_size: int | None = None) -> tuple[np.ndarray, int]:
    """(table [vocab, slots] int32, rows): each token's gram rows (`piece_grams` of `piece_text`, the
    first `slots`), -1 in the slots past its last and for the special tokens and `skip_ids`; rows:
    how many distinct grams the table holds (the character view's rows of the branch's weights).
    `vocab_size`: the model's, where it has more ids than the tokenizer (their rows hold none)."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    size = max(tokenizer.get_vocab_size(with_added_tokens=True), max(vocab.values()) + 1, vocab_size or 0)
    special = {i for i, token in tokenizer.get_added_tokens_decoder().items() if token.special} | set(skip_ids)
    prefix = getattr(tokenizer.model, "continuing_subword_prefix", None)
    table = np.full((size, slots), -1, dtype=np.int32)
    rows: dict[str, int] = {}
    for token, i in sorted(vocab.items(), key=lambda item: item[1]):
        if i in special:
            continue
        for slot, gram in enumerate(piece_grams(piece_text(token, prefix))[:slots]):
            table[i, slot] = rows.setdefault(gram, len(rows))
    return table, len(rows)


def branch_terms(wide: WideConfig, tokenizer: Tokenizer, vocab_size: int) -> tuple[dict[str, Any], torch.Tensor | None]:
    """The wide branch's entries of a model config that depend on the tokenizer, and the character
    view's table (or None): the markers the bag does not count (`wide.count_special_tokens`;
    tfm_cls.data.tokenizer.marker_ids) and, with `wide.char_grams`, its tokens' character grams
    (`char_gram_table`). `vocab_size`: the model's. What the training and distillation recipes build
    a model's branch with once its tokenizer is known."""
    if not wide.enabled:
        return {}, None
    skip_ids = wide.skip_ids(marker_ids(tokenizer))
    entries: dict[str, Any] = {"wide_skip_ids": skip_ids} if skip_ids else {}
    if not wide.char_grams:
        return entries, None
    table, rows = char_gram_table(tokenizer, skip_ids=skip_ids, vocab_size=vocab_size)
    entries.update(wide_char_rows=rows, wide_char_slots=table.shape[1])
    return entries, torch.from_numpy(table)
