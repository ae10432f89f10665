"""Which texts to pick: the strategies, on unit sentence vectors [N, D] and scores, nothing else.

- `cover`: the cold start. k-means of the pool into n clusters; each cluster's text nearest its
  centre (a representative, not an outlier).
- `uncertainty`: how unsure the current model is of each text, from calibrated scores: the margin
  between the two most probable classes (single-label), or per label the distance of its
  probability to its threshold (multi-label; the nearest label is named).
- `spread_uncertain`: the most uncertain texts spread over the pool — the pool clustered into n
  groups, the most uncertain text of each — so n picks are not n near-copies of one confusion.
  Chosen over clustering only the most uncertain candidates by benchmarks.suggest, and over plain
  top-n uncertainty (`top_uncertain`) while the labels are few (below 16 a class: the default
  strategy `auto`, suggester.choose_strategy; docs/suggest.md).
- `NearDuplicates`: nothing within NEAR_DUPLICATE cosine of a labelled text or of an earlier pick.
"""

from __future__ import annotations

import dataclasses

import numpy as np

NEAR_DUPLICATE = 0.95
"""Cosine of two MiniLM vectors above which two texts say the same (a copy with other
punctuation, a retweet, a template filled in alike); labelling both teaches nothing new."""


@dataclasses.dataclass
class Pick:
    index: int
    """Row of the pool."""
    reason: str
    uncertainty: float | None = None
    cluster_size: int | None = None


class NearDuplicates:
    """The unit vectors taken so far (labelled texts, earlier picks); `near(v)`: within NEAR_DUPLICATE."""

    def __init__(self, taken: np.ndarray | None = None, threshold: float = NEAR_DUPLICATE) -> None:
        self.threshold = threshold
        self.rows: list[np.ndarray] = [] if taken is None or not len(taken) else [np.asarray(taken, np.float32)]

    def near(self, vector: np.ndarray) -> bool:
        return any(float((block @ vector).max()) >= self.threshold for block in self.rows if len(block))

    def add(self, vector: np.ndarray) -> None:
        self.rows.append(vector[None, :].astype(np.float32))

    def near_mask(self, vectors: np.ndarray, batch: int = 4096) -> np.ndarray:
        """[N] whether each vector is near one taken so far (in blocks: bounded memory)."""
        out = np.zeros(len(vectors), bool)
        for block in self.rows:
            for s in range(0, len(vectors), batch):
                out[s : s + batch] |= (vectors[s : s + batch] @ block.T).max(axis=1) >= self.threshold
        return out


def clusters(vectors: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(assignment [N], centres [k, D]) of k-means on the unit vectors (mini-batch beyond 20k rows)."""
    from sklearn.cluster import KMeans, MiniBatchKMeans

    k = max(1, min(k, len(vectors)))
    if len(vectors) > 20_000:
        model = MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=3, batch_size=4096)
    else:
        model = KMeans(n_clusters=k, random_state=seed, n_init=1)
    assignment = model.fit_predict(vectors)
    return assignment, model.cluster_centers_.astype(np.float32)


def _take(order: np.ndarray, vectors: np.ndarray, seen: NearDuplicates) -> int | None:
    """The first row of `order` that is not a near-duplicate of what was taken; it is taken."""
    for i in order:
        if not seen.near(vectors[i]):
            seen.add(vectors[i])
            return int(i)
    return None


def cover(vectors: np.ndarray, n: int, seen: NearDuplicates, seed: int = 0) -> list[Pick]:
    """n representatives of the pool: per k-means cluster (largest first), the text nearest its centre."""
    assignment, centres = clusters(vectors, n, seed)
    sizes = np.bincount(assignment, minlength=len(centres))
    picks = []
    for c in np.argsort(-sizes, kind="stable"):
        members = np.flatnonzero(assignment == c)
        order = members[np.argsort(-(vectors[members] @ centres[c]), kind="stable")]
        i = _take(order, vectors, seen)
        if i is not None:
            picks.append(Pick(i, f"represents {sizes[c]} similar texts of the pool (cold start: covering the pool)",
                              cluster_size=int(sizes[c])))
    return picks


def cover_by_guess(vectors: np.ndarray, guessed: np.ndarray, n: int, seen: NearDuplicates, seed: int = 0) -> list[Pick]:
    """The cold start with label names: the pool split by the zero-shot guess, and each part covered
    by its share of the n picks (an equal share, the rest to the largest parts), so a rare label
    the names recognise is not left out of the first round."""
    labels, sizes = np.unique(guessed, return_counts=True)
    share = np.minimum(sizes, n // max(len(labels), 1))
    for j in np.argsort(-sizes, kind="stable"):  # what an equal share leaves: to the largest parts
        if share.sum() >= n:
            break
        share[j] += min(sizes[j] - share[j], n - share.sum())
    picks = []
    for label, k in zip(labels, share):
        members = np.flatnonzero(guessed == label)
        if k:
            for p in cover(vectors[members], int(k), seen, seed):
                p.index = int(members[p.index])
                p.reason = p.reason.replace("texts of the pool", "texts the label names call the same")
                picks.append(p)
    return picks


@dataclasses.dataclass
class Uncertainty:
    """How unsure the model is of each text, in [0, 1] (1: a coin toss), and why."""

    score: np.ndarray
    """[N]"""
    label: np.ndarray | None = None
    """[N] multi-label: the label whose decision is nearest its threshold."""


def uncertainty(proba: np.ndarray, thresholds: np.ndarray | None = None, how: str = "margin") -> Uncertainty:
    """From calibrated scores [N, C]. Single-label (`thresholds` None): 1 - (p1 - p2) (`margin`)
    or the entropy over log C (`entropy`). Multi-label: per label 1 - |p - t| / max(t, 1 - t)
    (1 at its threshold t), the highest over the labels (`margin`) or their mean (`entropy`)."""
    proba = np.asarray(proba, np.float64)
    if thresholds is None:
        if how == "entropy":
            p = np.clip(proba, 1e-12, 1.0)
            return Uncertainty(-(p * np.log(p)).sum(axis=1) / np.log(max(proba.shape[1], 2)))
        top = np.sort(proba, axis=1)[:, -2:]  # [N, 2]
        return Uncertainty(1.0 - (top[:, 1] - top[:, 0]))
    t = np.asarray(thresholds, np.float64)[None, :]  # [1, C]
    per_label = 1.0 - np.abs(proba - t) / np.maximum(t, 1.0 - t)  # [N, C]
    label = per_label.argmax(axis=1)
    score = per_label.mean(axis=1) if how == "entropy" else per_label.max(axis=1)
    return Uncertainty(score, label)


def top_uncertain(vectors: np.ndarray, unsure: Uncertainty, n: int, seen: NearDuplicates) -> list[Pick]:
    """The n most uncertain texts, near-duplicates skipped (small-text's breaking ties, on the margin);
    the default strategy's from 16 labelled texts a class."""
    picks = []
    for i in np.argsort(-unsure.score, kind="stable"):
        if len(picks) == n:
            break
        if not seen.near(vectors[i]):
            seen.add(vectors[i])
            picks.append(Pick(int(i), "among the most uncertain", float(unsure.score[i])))
    return picks


def spread_uncertain(vectors: np.ndarray, unsure: Uncertainty, n: int, seen: NearDuplicates, seed: int = 0,
                     candidates: int | None = None) -> list[Pick]:
    """The most uncertain text of each of n clusters. `candidates` None: clusters of the whole
    pool; else of the `candidates` most uncertain texts only (the variant benchmarks.suggest
    weighs against it)."""
    rows = np.arange(len(vectors))
    if candidates is not None and candidates < len(rows):
        rows = np.argsort(-unsure.score, kind="stable")[: max(candidates, n)]
    assignment, _ = clusters(vectors[rows], n, seed)
    sizes = np.bincount(assignment)
    best = [(float(unsure.score[rows[assignment == c]].max()), c) for c in range(len(sizes)) if sizes[c]]
    picks = []
    for _, c in sorted(best, reverse=True):  # the most uncertain clusters first
        members = rows[assignment == c]
        order = members[np.argsort(-unsure.score[members], kind="stable")]
        i = _take(order, vectors, seen)
        if i is not None:
            picks.append(Pick(i, f"the most uncertain of {sizes[c]} similar texts", float(unsure.score[i]),
                              int(sizes[c])))
    return picks
