"""The strategies on hand-made vectors: cover, uncertainty, spread, near-duplicates."""

import numpy as np

from tfm_cls.suggest import pick


def blobs(k=4, per=20, d=8, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.eye(k, d)
    x = np.concatenate([c + 0.05 * rng.standard_normal((per, d)) for c in centres])
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), np.repeat(np.arange(k), per)


def test_cover_takes_one_representative_per_cluster():
    x, group = blobs()
    picks = pick.cover(x, 4, pick.NearDuplicates())
    assert sorted(group[[p.index for p in picks]]) == [0, 1, 2, 3]
    assert all(p.cluster_size == 20 and "represents 20" in p.reason for p in picks)


def test_near_duplicates_of_taken_texts_are_skipped():
    x, group = blobs()
    seen = pick.NearDuplicates(x[group == 0], threshold=0.9)
    picks = pick.cover(x, 4, seen)
    assert 0 not in group[[p.index for p in picks]]
    fresh = pick.NearDuplicates(x[group == 0], threshold=0.9)
    assert fresh.near_mask(x)[group == 0].all() and not fresh.near_mask(x)[group == 1].any()


def test_margin_entropy_and_per_label_uncertainty():
    p = np.array([[0.5, 0.5, 0.0], [0.9, 0.05, 0.05], [0.4, 0.3, 0.3]])
    margin = pick.uncertainty(p).score
    assert np.allclose(margin, [1.0, 0.15, 0.9])
    entropy = pick.uncertainty(p, how="entropy").score
    assert entropy.argmax() == 2 and entropy.argmin() == 1
    multi = pick.uncertainty(np.array([[0.9, 0.31], [0.5, 0.0]]), thresholds=np.array([0.5, 0.3]))
    assert multi.label.tolist() == [1, 0] and np.isclose(multi.score[1], 1.0)


def test_spread_takes_the_most_uncertain_of_each_cluster():
    x, group = blobs()
    score = np.zeros(len(x))
    score[group == 0] = 0.9  # one confused cluster: top-n would take it all
    score[[25, 45, 65]] = 0.5
    unsure = pick.Uncertainty(score)
    spread = pick.spread_uncertain(x, unsure, 4, pick.NearDuplicates())
    assert sorted(group[[p.index for p in spread]]) == [0, 1, 2, 3]
    assert {25, 45, 65} <= {p.index for p in spread}
    top = pick.top_uncertain(x, unsure, 4, pick.NearDuplicates(threshold=1.01))
    assert set(group[[p.index for p in top]]) == {0}


def test_cover_by_guess_gives_every_guessed_label_its_share():
    x, group = blobs(k=4, per=20)
    guessed = group.copy()
    guessed[:18] = 1  # the names recognise only 2 of cluster 0's texts
    picks = pick.cover_by_guess(x, guessed, 8, pick.NearDuplicates(threshold=1.01))
    assert len(picks) == 8 and len({p.index for p in picks}) == 8
    assert sorted(guessed[[p.index for p in picks]]) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert all("label names call the same" in p.reason for p in picks)
