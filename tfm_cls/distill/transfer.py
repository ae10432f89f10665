"""The transfer set: the texts the teacher labels and the student learns from.

    training texts (gold labels)  +  N augmented copies of each (no label)  +  extra text (no label)
    sentence pairs: training pairs (gold)  +  N augmented copies (both sides)  +  neighbour pairs (no label)

Augmentation after Tang et al. (2019), "Distilling Task-Specific Knowledge from BERT into Simple
Neural Networks": each word of a copy is replaced by [MASK] with `mask_rate`, else by another word
of the training vocabulary (drawn by frequency) with `replace_rate`; then, with `ngram_rate`, the
copy is cut to a random run of ngram_min..ngram_max words. Words are whitespace-separated pieces.
Copy j of text i draws from its own generator seeded by (seed, i, j): the set does not depend on
the order it is built in. Duplicates (of the texts or of earlier copies) are dropped.

Sentence pairs augment each side of a copy in turn with the copy's generator. Neighbour pairs
(`pair_neighbours` = k) pair each distinct training sentence with its k nearest other training
sentences (cosine of word TF-IDF vectors): new pairs of the kind the task holds (SICK's sentences
come in families of rewrites), which the teacher labels. A pair that is a validation or test pair
(in either order) is never added.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import logging
from collections.abc import Sequence

import numpy as np

from tfm_cls.data.tokenizer import MASK
from tfm_cls.distill.config import TransferConfig

logger = logging.getLogger(__name__)

NO_LABEL = -1
"""Label of a transfer text without a gold label (augmented copy, extra text); NaN for regression."""


def gold_mask(labels: np.ndarray) -> np.ndarray:
    """bool [N]: which transfer labels are gold (class ids: not NO_LABEL; float values: not NaN)."""
    return ~np.isnan(labels) if labels.dtype.kind == "f" else labels != NO_LABEL


@dataclasses.dataclass
class TransferSet:
    texts: list[str]
    labels: np.ndarray
    """Gold label per text [N]: a class id (NO_LABEL where there is none), or a float value
    (regression; NaN where there is none)."""
    report: dict[str, int]
    pairs: list[str] | None = None
    """Sentence pairs: the second text of each [N]; None for single texts."""

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def has_gold(self) -> np.ndarray:
        """bool [N]: the text has a gold label."""
        return gold_mask(self.labels)

    def fingerprint(self) -> str:
        """sha256 of the texts (and second texts) and labels, in order (keys the teacher-output cache)."""
        digest = hashlib.sha256()
        seconds = self.pairs if self.pairs is not None else [None] * len(self.texts)
        for text, second, label in zip(self.texts, seconds, self.labels.tolist()):
            digest.update(f"{label}\t{text}\0".encode() if second is None else f"{label}\t{text}\t{second}\0".encode())
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


def _nearest_sentences(sentences: list[str], k: int) -> np.ndarray:
    """[len(sentences), k]: the k nearest other sentences of each (cosine of word TF-IDF; ties by
    index). Exact: S^2 similarities, computed ~16M at a time (SICK's 4,802 training sentences: ~2 s)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectors = TfidfVectorizer(token_pattern=r"\S+", lowercase=True).fit_transform(sentences)  # [S, words], rows unit length
    k = min(k, len(sentences) - 1)
    out = np.empty((len(sentences), k), dtype=np.int64)
    block = max(1, 2**24 // len(sentences))
    for start in range(0, len(sentences), block):  # [block, S] similarities at a time
        similarity = (vectors[start : start + block] @ vectors.T).toarray()
        rows = np.arange(similarity.shape[0])
        similarity[rows, start + rows] = -np.inf  # never itself
        out[start : start + len(rows)] = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    return out


def build_pair_transfer_set(
    train_texts: Sequence[str], train_pairs: Sequence[str], train_labels: Sequence, held_out: Sequence[tuple[str, str]],
    cfg: TransferConfig, seed: int, *, regression: bool = False,
) -> TransferSet:
    """Sentence pairs: the training pairs (with their labels: class ids, or values where
    `regression`), augmented copies, then neighbour pairs (module docstring); `held_out`
    (validation and test pairs) are never added, in either order."""
    no_label = float("nan") if regression else NO_LABEL
    vocab = Vocabulary([*train_texts, *train_pairs])
    firsts, seconds = list(train_texts), list(train_pairs)
    labels = [float(x) if regression else int(x) for x in train_labels]
    seen = set(zip(firsts, seconds))
    banned = {pair for a, b in held_out for pair in ((a, b), (b, a))}
    duplicates = held_out_dropped = 0

    def add(a: str, b: str) -> bool:
        nonlocal duplicates, held_out_dropped
        if not a or not b or (a, b) in seen:
            duplicates += 1
            return False
        if (a, b) in banned:
            held_out_dropped += 1
            return False
        seen.add((a, b))
        firsts.append(a)
        seconds.append(b)
        labels.append(no_label)
        return True

    for i, (a, b) in enumerate(zip(train_texts, train_pairs)):
        for j in range(cfg.copies):
            rng = copy_rng(seed, i, j)
            add(" ".join(augment(a.split(), vocab, cfg, rng)), " ".join(augment(b.split(), vocab, cfg, rng)))
    augmented = len(firsts) - len(train_texts)
    neighbours = 0
    if cfg.pair_neighbours:
        sentences = sorted(set(train_texts) | set(train_pairs))
        if len(sentences) > 1:
            nearest = _nearest_sentences(sentences, cfg.pair_neighbours)
            for s, row in enumerate(nearest):
                neighbours += sum(add(sentences[s], sentences[n]) for n in row.tolist())
    report = {
        "train_pairs": len(train_texts), "augmented_pairs": augmented, "neighbour_pairs": neighbours,
        "duplicates_dropped": duplicates, "held_out_pairs_dropped": held_out_dropped, "transfer_texts": len(firsts),
        "vocabulary_words": len(vocab),
    }
    logger.info("transfer set (sentence pairs): %s", report)
    dtype = np.float32 if regression else np.int64
    return TransferSet(texts=firsts, labels=np.asarray(labels, dtype=dtype), report=report, pairs=seconds)
