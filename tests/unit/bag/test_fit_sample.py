"""The warm start on a sample: past MAX_BAG_ENTRIES bag entries the bag is fitted on a seeded sample of
the training rows (said in the clock's shrunk); the rows outside it get no offset (the fit never saw them),
and no out-of-fold logits are kept for the choice (they would not be every training row's)."""

import numpy as np

from tfm_cls.bag import fit, warm_start
from tfm_cls.bag.sparse import set_idf
from tfm_cls.classify.heads import Head
from tfm_cls.data.ragged import RaggedIds
from tfm_cls.data.tokenized import TokenizedSplit
from tfm_cls.model import TransformerClassifier
from tfm_cls.training.clock import WallClock


def _split(rng, n):
    labels = rng.integers(0, 3, n)
    rows = [np.concatenate([rng.integers(10 + 10 * y, 20 + 10 * y, 2), rng.integers(1, 10, 5)]).tolist() for y in labels]
    return TokenizedSplit(input_ids=RaggedIds.from_lists(rows), labels=labels, lengths=np.full(n, 7), num_truncated=0,
                          num_empty=0)


def _model():
    return TransformerClassifier(vocab_size=40, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                                 max_len=16, wide=True, wide_weighting="tfidf")


def test_past_the_entry_cap_the_bag_is_fitted_on_a_sample_and_says_so(monkeypatch):
    rng = np.random.default_rng(0)
    train, validation = _split(rng, 300), _split(rng, 60)
    model = _model()
    set_idf(model.wide, train)
    monkeypatch.setattr(fit, "ENTRY_PROBE", 50)
    monkeypatch.setattr(fit, "MAX_BAG_ENTRIES", 100 * 7)  # ~7 entries a row: ~100 rows of 300
    clock = WallClock(None)
    offsets, chosen = warm_start.warm_start(model, Head(), train, validation, "accuracy", ["a", "b", "c"],
                                            "squared_hinge", clock)
    assert len(clock.shrunk) == 1 and "fitted on a sample of" in clock.shrunk[0] and "of 300 training rows" in clock.shrunk[0]
    sampled = fit.fit_rows(model.wide, train)
    assert sampled is not None and 50 <= len(sampled) < 300 and np.array_equal(sampled, np.sort(sampled))
    moved = np.abs(offsets).sum(axis=1) > 0
    assert offsets.shape == (300, 3) and moved.sum() > 0.5 * len(sampled)
    assert set(np.flatnonzero(moved)) <= set(sampled.tolist())  # rows outside the sample: no offset
    assert chosen["out_of_fold"] is None and chosen["validation_score"] > 0.9  # the words still separate the classes
    # under the cap: every row, nothing said
    monkeypatch.setattr(fit, "MAX_BAG_ENTRIES", 10**9)
    assert fit.fit_rows(model.wide, train) is None
