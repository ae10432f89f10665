"""The transfer set: the texts the teacher labels and the student learns from.

    training texts (gold labels)  +  N augmented copies of each (no label)  +  extra text (no label)

Augmentation after Tang et al. (2019), "Distilling Task-Specific Knowledge from BERT into Simple
Neural Networks": each word of a copy is replaced by [MASK] with `mask_rate`, else by another word
of the training vocabulary (drawn by frequency) with `replace_rate`; then, with `ngram_rate`, the
copy is cut to a random run of ngram_min..ngram_max words. Words are whitespace-separated pieces.
Copy j of text i draws from its own generator seeded by (seed, i, j): the set does not depend on
the order it is built in. Duplicates (of the texts or of earlier copies) are dropped.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
from collections.abc import Sequence

import numpy as np

from tfm_cls.distill.config import TransferConfig
from tfm_cls.tokenizer import MASK

logger = logging.getLogger(__name__)

NO_LABEL = -1
"""Label of a transfer text without a gold label (augmented copy, extra text)."""


@dataclasses.dataclass
class TransferSet:
    texts: list[str]
    labels: np.ndarray
    """Gold label per text, NO_LABEL where there is none [N]."""
    report: dict[str, int]

    def __len__(self) -> int:
        return len(self.texts)

    def fingerprint(self) -> str:
        """sha256 of the texts and labels, in order (keys the teacher-output cache)."""
        digest = hashlib.sha256()
        for text, label in zip(self.texts, self.labels.tolist()):
            digest.update(f"{label}\t{text}\0".encode())
        return digest.hexdigest()


class Vocabulary:
    """Words of the training texts with their frequencies, for frequency-weighted replacement."""

    def __init__(self, texts: Sequence[str]) -> None:
        counts = collections.Counter(w for t in texts for w in t.split())
        # Sorted by (count desc, word): the same vocabulary in every process.
        items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        self.words = [w for w, _ in items]
        freq = np.asarray([c for _, c in items], dtype=np.float64)
        self.cumulative = np.cumsum(freq / freq.sum()) if len(freq) else np.zeros(0)

    def __len__(self) -> int:
        return len(self.words)

    def draw(self, rng: np.random.Generator, avoid: str) -> str:
        """A word drawn by frequency, never `avoid` (the next word in the list instead)."""
        j = int(np.searchsorted(self.cumulative, rng.random(), side="right"))
        j = min(j, len(self.words) - 1)
        if self.words[j] == avoid:
            j = (j + 1) % len(self.words)
        return self.words[j]


def augment(words: list[str], vocab: Vocabulary, cfg: TransferConfig, rng: np.random.Generator) -> list[str]:
    """One augmented copy of a text's words (rates in the module docstring)."""
    out = []
    can_replace = len(vocab) > 1
    for word in words:
        u = rng.random()
        if u < cfg.mask_rate:
            out.append(MASK)
        elif can_replace and u < cfg.mask_rate + (1.0 - cfg.mask_rate) * cfg.replace_rate:
            out.append(vocab.draw(rng, avoid=word))
        else:
            out.append(word)
    if out and rng.random() < cfg.ngram_rate:
        n = int(rng.integers(cfg.ngram_min, cfg.ngram_max + 1))
        if n < len(out):
            start = int(rng.integers(0, len(out) - n + 1))
            out = out[start : start + n]
    return out


def copy_rng(seed: int, text_index: int, copy_index: int) -> np.random.Generator:
    return np.random.default_rng([seed, text_index, copy_index])


def build_transfer_set(
    train_texts: Sequence[str], train_labels: Sequence[int], extra_texts: Sequence[str], cfg: TransferConfig, seed: int,
) -> TransferSet:
    """The training texts (with their labels), their augmented copies, then the extra texts."""
    vocab = Vocabulary(train_texts)
    texts, labels = list(train_texts), [int(x) for x in train_labels]
    seen = set(texts)
    duplicates = 0
    for i, text in enumerate(train_texts):
        words = text.split()
        for j in range(cfg.copies):
            copy = " ".join(augment(words, vocab, cfg, copy_rng(seed, i, j)))
            if not copy or copy in seen:
                duplicates += 1
                continue
            seen.add(copy)
            texts.append(copy)
            labels.append(NO_LABEL)
    augmented = len(texts) - len(train_texts)
    extra_kept = 0
    for text in extra_texts:
        if text in seen:
            continue
        seen.add(text)
        texts.append(text)
        labels.append(NO_LABEL)
        extra_kept += 1
    report = {
        "train_texts": len(train_texts), "augmented_texts": augmented, "augmented_duplicates_dropped": duplicates,
        "extra_texts": extra_kept, "transfer_texts": len(texts), "vocabulary_words": len(vocab),
    }
    logger.info("transfer set: %s", report)
    return TransferSet(texts=texts, labels=np.asarray(labels, dtype=np.int64), report=report)
