"""The choice among a run's candidates (tfm_cls.bag.candidates): the best on validation, then the
fastest of those within one paired standard error of it; and the model without an encoder
(tfm_cls.model.bag) is exactly the wide branch plus the head's bias."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tfm_cls.bag.candidates import Choice, Scored, pick, same_logits, score_test, scoring_seconds
from tfm_cls.bag.compare import MAX_LOSS, paired_se, tolerance
from tfm_cls.classify.heads import Head
from tfm_cls.model import BagOfTermsClassifier, TransformerClassifier
from tfm_cls.runs import build_model

LABELS = ["a", "b"]


def _logits(correct: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Two-class logits [N, 2] that are right exactly where `correct`."""
    predicted = np.where(correct, targets, 1 - targets)
    return np.eye(2, dtype=np.float32)[predicted] * 2.0


def _scored(name, correct, targets, speed, size=1.0):
    head = Head()
    logits = _logits(correct, targets)
    return Scored(name, None, head, head.metrics(logits, targets, LABELS), logits, speed, size)


def _flip(correct: np.ndarray, lose: int, win: int) -> np.ndarray:
    """`correct` with its first `lose` right answers made wrong and its first `win` wrong ones made right."""
    out = correct.copy()
    out[np.flatnonzero(correct)[:lose]] = False
    out[np.flatnonzero(~correct)[:win]] = True
    return out


def test_the_fastest_candidate_within_one_paired_se_of_the_best_ships():
    rng = np.random.default_rng(0)
    targets = rng.integers(0, 2, 1000)
    best = rng.random(1000) < 0.90
    close = _flip(best, 10, 6)  # 0.4 point lower, one SE of the difference ~0.4 point: a bound of ~0.8 point
    far = _flip(best, 100, 0)  # 10 points lower
    slow = _scored("slow", best, targets, speed=10.0)
    quick = _scored("quick", close, targets, speed=500.0)
    quicker = _scored("quicker", far, targets, speed=5000.0)
    chosen, rows = pick([slow, quick, quicker], "accuracy", targets, LABELS)
    assert chosen is quick
    assert [r["holds_best"] for r in rows] == [True, True, False]
    assert rows[0]["tolerance"] == 0.0 and 0.0 < rows[1]["tolerance"] < 0.02
    assert rows[0]["loss_bound"] == 0.0 and 0.004 < rows[1]["loss_bound"] <= MAX_LOSS
    # a candidate 2 points below on 1,000 texts that differ on those 20 only is outside one SE (~0.45 point):
    # a paired difference, consistent over the texts, is resolved by far fewer texts than the scores' own SE
    chosen, rows = pick([slow, _scored("quick", _flip(best, 20, 0), targets, speed=500.0)], "accuracy", targets, LABELS)
    assert chosen is slow and rows[1]["holds_best"] is False and rows[1]["beaten_by"] == ["slow"]


def test_on_a_small_validation_split_the_cheaper_candidate_holds_only_where_its_loss_is_bounded():
    # ag_business_tech: 249 carved texts, the wide-and-deep model 2 texts ahead of its bag. One SE (~1.3
    # points) does not resolve that, so the tolerance alone let the bag ship; its loss could be 2 points
    rng = np.random.default_rng(1)
    targets = rng.integers(0, 2, 249)
    right = rng.random(249) < 0.9
    deep = _scored("wide_and_deep", right, targets, speed=60.0, size=100.0)
    bag = _scored("bag_of_terms", _flip(right, 6, 4), targets, speed=3000.0, size=10.0)
    chosen, rows = pick([deep, bag], "accuracy", targets, LABELS)
    assert rows[1]["beaten_by"] == [] and 2 / 249 < rows[1]["tolerance"]  # within the tolerance ...
    assert rows[1]["loss_bound"] == pytest.approx(2 / 249 + (rows[1]["tolerance"] - 1 / 249))
    assert rows[1]["loss_bound"] > MAX_LOSS and rows[1]["holds_best"] is False  # ... but not bounded
    assert chosen is deep
    # the same two texts among 5,000: bounded (SE ~0.06 point), and the bag ships
    targets = rng.integers(0, 2, 5000)
    right = rng.random(5000) < 0.9
    deep = _scored("wide_and_deep", right, targets, speed=60.0, size=100.0)
    bag = _scored("bag_of_terms", _flip(right, 6, 4), targets, speed=3000.0, size=10.0)
    chosen, rows = pick([deep, bag], "accuracy", targets, LABELS)
    assert chosen is bag and rows[1]["loss_bound"] < MAX_LOSS
    # a loss is not on a 0-1 scale: no margin, the tolerance alone
    chosen, rows = pick([deep, bag], "loss", targets, LABELS)
    assert "loss_bound" not in rows[1]


@pytest.mark.parametrize("seed", range(5))
def test_a_lead_of_one_or_two_texts_with_nothing_else_between_two_candidates_is_a_tie(seed):
    # a wide-and-deep model a few steps from its bag: the same answers but on `lost` texts, all of them
    # the faster bag's losses. The bootstrap SE is then about sqrt(lost) texts; the continuity
    # correction (one text) makes 1 and 2 of 2 ties (sign test: p 0.5, 0.25), 3 of 3 a loss (p 0.125)
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, 2, 5000)
    right = rng.random(5000) < 0.56
    deep = _scored("wide_and_deep", right, targets, speed=150.0, size=120.0)
    for lost, holds in ((1, True), (2, True), (3, False)):
        bag = _scored("bag_of_terms", _flip(right, lost, 0), targets, speed=90000.0, size=20.0)
        chosen, rows = pick([deep, bag], "accuracy", targets, LABELS)
        assert rows[1]["holds_best"] is holds and (chosen is bag) is holds
        assert rows[1]["tolerance"] == pytest.approx(np.sqrt(lost) / 5000 + 1 / 5000, rel=0.25)


def test_the_correction_is_one_text_of_those_compared_and_only_for_metrics_that_count_texts():
    assert tolerance("accuracy", 0.01, 400) == pytest.approx(0.0125)
    assert tolerance("subset_accuracy", 0.0, 50) == pytest.approx(0.02)
    assert tolerance("macro_f1", 0.01, 400) == tolerance("loss", 0.01, 400) == 0.01


def test_two_bags_are_compared_on_their_out_of_fold_training_logits_too():
    rng = np.random.default_rng(3)
    targets, train_targets = rng.integers(0, 2, 1000), rng.integers(0, 2, 5000)
    base, train_base = rng.random(1000) < 0.85, rng.random(5000) < 0.85
    pairs_val, triples_val = base, _flip(base, 3, 5)  # triples 0.2 point ahead on validation: within one SE
    deep = _scored("wide_and_deep", _flip(base, 4, 6), targets, speed=200.0, size=90.0)  # level with the triples
    pairs = _scored("bag_of_terms", pairs_val, targets, speed=20000.0, size=4.0)
    triples = _scored("bag_of_terms_3", triples_val, targets, speed=15000.0, size=16.0)
    # validation alone: every candidate holds the best score, and the fastest, the bag of pairs, ships
    chosen, rows = pick([deep, pairs, triples], "accuracy", targets, LABELS)
    assert chosen is pairs and all(r["holds_best"] for r in rows)
    # the bags' out-of-fold logits of 5,000 training texts: the triples 0.6 point ahead there too, which
    # 6,000 texts resolve (SE ~0.15); the pairs no longer hold, the triples are then the fastest that do
    pairs.out_of_fold = _logits(train_base, train_targets)
    triples.out_of_fold = _logits(_flip(train_base, 20, 50), train_targets)
    chosen, rows = pick([deep, pairs, triples], "accuracy", targets, LABELS, train_targets)
    assert chosen is triples
    assert rows[1]["holds_best"] is False and rows[1]["beaten_by"] == ["bag_of_terms_3"]
    assert rows[2]["holds_best"] and rows[0]["holds_best"]
    # against the encoder, which has no out-of-fold logits, each bag is compared on validation alone
    assert rows[1]["compared_texts"] == rows[2]["compared_texts"] == 1000
    # the same lead on the folds, but the pairs ahead: the pairs hold, and ship
    triples.out_of_fold = _logits(_flip(train_base, 50, 20), train_targets)
    assert pick([deep, pairs, triples], "accuracy", targets, LABELS, train_targets)[0] is pairs
    # without the training targets the folds are not evidence
    assert pick([deep, pairs, triples], "accuracy", targets, LABELS)[0] is pairs


def test_where_every_candidate_is_beaten_in_a_circle_the_best_on_validation_holds():
    rng = np.random.default_rng(4)
    targets, train_targets = rng.integers(0, 2, 400), rng.integers(0, 2, 4000)
    base = rng.random(400) < 0.9
    a = _scored("a", base, targets, speed=10.0)  # the best on validation; beats c there
    c = _scored("c", _flip(base, 60, 0), targets, speed=100.0)  # beats b on validation
    b = _scored("b", _flip(base, 120, 0), targets, speed=1000.0)  # beats a on 4,000 training texts
    a.out_of_fold = _logits(rng.random(4000) < 0.3, train_targets)
    b.out_of_fold = _logits(np.ones(4000, dtype=bool), train_targets)
    chosen, rows = pick([a, b, c], "accuracy", targets, LABELS, train_targets)
    assert [r["beaten_by"] for r in rows] == [["b"], ["c"], ["a"]]
    assert chosen is a and [r["holds_best"] for r in rows] == [True, False, False]


def test_among_speeds_within_the_timing_noise_the_smallest_ships_and_a_clear_speed_gap_still_decides():
    rng = np.random.default_rng(2)
    targets = rng.integers(0, 2, 300)
    right = rng.random(300) < 0.9
    # the same score; the big one read 3.5 % faster this time: timing noise, the smaller file ships
    big = _scored("big", right, targets, speed=3530.0, size=2.0)
    small = _scored("small", right, targets, speed=3410.0, size=0.5)
    assert pick([big, small], "accuracy", targets, LABELS)[0] is small
    assert pick([small, big], "accuracy", targets, LABELS)[0] is small
    # 20 % faster is past the noise: the faster one ships whatever its size
    quick_big = _scored("quick_big", right, targets, speed=4100.0, size=2.0)
    assert pick([quick_big, small], "accuracy", targets, LABELS)[0] is quick_big
    # a smaller candidate that does not hold the score never ships, however alike its speed
    worse_small = _scored("worse_small", right & (rng.random(300) < 0.7), targets, speed=3500.0, size=0.1)
    assert pick([big, worse_small], "accuracy", targets, LABELS)[0] is big


def test_the_best_wins_when_it_is_also_the_fastest_and_a_lower_loss_is_better():
    rng = np.random.default_rng(1)
    targets = rng.integers(0, 2, 200)
    good = rng.random(200) < 0.95
    a, b = _scored("a", good, targets, 100.0), _scored("b", good & (rng.random(200) < 0.7), targets, 10.0)
    assert pick([b, a], "accuracy", targets, LABELS)[0] is a
    # on `loss` lower is better: the candidate with the smaller loss is the best
    assert a.validation["loss"] < b.validation["loss"]
    assert pick([b, a], "loss", targets, LABELS)[0] is a


def test_paired_se_matches_the_analytic_se_of_a_difference_of_accuracies():
    rng = np.random.default_rng(2)
    targets = rng.integers(0, 2, 1000)
    a, b = rng.random(1000) < 0.8, rng.random(1000) < 0.8
    head = Head()
    se = paired_se(head, "accuracy", _logits(a, targets), _logits(b, targets), targets, LABELS, samples=400)
    d = a.astype(float) - b.astype(float)
    analytic = d.std(ddof=1) / np.sqrt(len(d))
    assert se == pytest.approx(analytic, rel=0.15)


@pytest.mark.parametrize("ngrams, weighting", [(1, "count"), (2, "tfidf"), (3, "tfidf")])
def test_the_bag_model_is_the_branch_plus_the_bias_and_rebuilds_from_its_config(ngrams, weighting):
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=40, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                                  max_len=16, wide=True, wide_weighting=weighting, wide_ngrams=ngrams,
                                  wide_buckets=64).eval()
    with torch.no_grad():
        model.wide.weight.normal_()
        model.wide.weight[0] = 0.0
        model.head.bias.normal_()
        if weighting == "tfidf":
            model.wide.set_idf(torch.rand(model.wide.rows) + 0.5)
    bag = BagOfTermsClassifier.from_wide_and_deep(model, max_len=50).eval()
    ids = torch.tensor([[5, 7, 7, 2, 9, 0, 0], [3, 4, 5, 6, 8, 9, 11]])
    mask = (ids != 0).long()
    with torch.no_grad():
        expected = model.wide(ids, mask) + model.head.bias
        assert torch.allclose(bag(ids, mask), expected, atol=1e-6)
        # the encoder's part is what the bag leaves out
        encoder_part = model.features(ids, mask) @ model.head.weight.T  # [B, C], the head without its bias
        assert torch.allclose(model(ids, mask) - bag(ids, mask), encoder_part, atol=1e-5)
        # padding changes nothing; the config rebuilds the same architecture (runs.build_model dispatches)
        padded = torch.cat([ids, torch.zeros(2, 4, dtype=torch.long)], 1)
        assert torch.allclose(bag(padded, (padded != 0).long()), bag(ids, mask), atol=1e-6)
    again = build_model(bag.config)
    assert isinstance(again, BagOfTermsClassifier)
    again.load_state_dict(bag.state_dict())
    assert sorted(bag.state_dict()) == sorted(["bias", "wide.weight", *(["wide.idf"] if weighting == "tfidf" else [])])
    with pytest.raises(ValueError, match="architecture 'bag_of_terms' with wide=true"):
        BagOfTermsClassifier(40, 3, wide=False)


@pytest.mark.parametrize("task", ["single_label", "multi_label", "regression"])
def test_resampled_metrics_equal_the_heads_own_metrics_on_each_resample(task):
    from tfm_cls.bag.compare import resampled_metric
    from tfm_cls.classify.heads import MultiLabelHead, RegressionHead

    rng = np.random.default_rng(3)
    n, labels = 60, ["x", "y", "z"]
    if task == "single_label":
        head, logits, targets, metrics = Head(), rng.normal(size=(n, 3)), rng.integers(0, 3, n), ("accuracy", "macro_f1", "loss")
    elif task == "multi_label":
        head = MultiLabelHead(thresholds=np.array([0.4, 0.5, 0.6]))
        logits, targets = rng.normal(size=(n, 3)), (rng.random((n, 3)) < 0.4).astype(np.float32)
        metrics = ("micro_f1", "macro_f1", "subset_accuracy")
    else:
        head, logits, targets, metrics = RegressionHead(), rng.normal(size=(n, 1)), rng.normal(size=n), ("mse", "pearson")
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=5)
    for metric in metrics:
        fast = resampled_metric(head, metric, logits.astype(np.float32), targets, weights, labels)
        slow = [head.metrics(logits[np.repeat(np.arange(n), w)].astype(np.float32), targets[np.repeat(np.arange(n), w)],
                             labels)[metric] for w in weights]
        assert fast == pytest.approx(slow, abs=1e-5), metric


def test_stratified_folds_hold_out_every_text_once_with_each_class_spread():
    from tfm_cls.bag.few_labels import folds_of

    targets = np.array([0] * 8 + [1] * 8 + [2] * 4)
    folds = folds_of(targets, 4, seed=0)
    assert sorted(np.concatenate(folds).tolist()) == list(range(20))
    for held in folds:  # each fold holds every class
        assert set(targets[held]) == {0, 1, 2}


def test_the_few_label_bag_ships_where_it_beats_or_with_prefer_bag_unless_it_is_beaten():
    from tfm_cls.bag.few_labels import ships_bag

    needed = 0.05  # the lead that beats
    for lead, beats, not_beaten in [(0.2, True, True), (0.05, False, True), (0.0, False, True), (-0.05, False, True),
                                    (-0.051, False, False), (-0.3, False, False)]:
        assert ships_bag(lead, needed, ship_bag=True, prefer_bag=False) is beats, lead
        assert ships_bag(lead, needed, ship_bag=False, prefer_bag=False) is False, lead  # the default: never
        assert ships_bag(lead, needed, ship_bag=False, prefer_bag=True) is not_beaten, lead
        assert ships_bag(lead, needed, ship_bag=True, prefer_bag=True) is not_beaten, lead


def test_term_counts_are_each_positions_count_of_its_term_among_the_kept_ones():
    from tfm_cls.model.wide import term_counts

    rng = np.random.default_rng(4)
    terms = torch.from_numpy(rng.integers(0, 6, (5, 17)))
    keep = torch.from_numpy(rng.random((5, 17)) < 0.8)
    counts = term_counts(terms, keep).numpy()
    t, k = terms.numpy(), keep.numpy()
    for b in range(5):
        for i in range(17):
            if k[b, i]:
                assert counts[b, i] == int(((t[b] == t[b, i]) & k[b]).sum())


def test_a_candidates_test_pass_is_estimated_at_its_own_measured_speed_where_validation_read_faster():
    # the encoder's validation pass was its bag's shortcut (2 s for 500 texts); timed, it reads 40 texts/s
    head = Head()
    deep = Scored("wide_and_deep", None, head, {"seconds": 2.0, "examples": 500}, np.zeros((500, 2)), 40.0, 90.0)
    assert scoring_seconds(deep, 7600) == pytest.approx(190.0)
    # a validation pass slower than the timing (a loaded machine, long texts) is the estimate then
    slow = Scored("bag", None, head, {"seconds": 50.0, "examples": 500}, np.zeros((500, 2)), 40000.0, 5.0)
    assert scoring_seconds(slow, 7600) == pytest.approx(760.0)
    # and a candidate never timed still has its validation pass to go by
    untimed = Scored("encoder", None, head, {"seconds": 5.0, "examples": 500}, np.zeros((500, 2)))
    assert scoring_seconds(untimed, 1000) == pytest.approx(10.0)


def test_a_wide_and_deep_model_whose_head_learnt_nothing_is_its_bag_and_takes_the_bags_test_score():
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=40, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                                  max_len=16, wide=True, wide_weighting="tfidf", wide_ngrams=2, wide_buckets=64).eval()
    with torch.no_grad():
        model.wide.weight.normal_()
        model.wide.weight[0] = 0.0
        model.head.bias.normal_()
        model.head.weight.zero_()  # as the warm start leaves it
    bag = BagOfTermsClassifier.from_wide_and_deep(model, max_len=16).eval()
    ids = torch.tensor([[5, 7, 7, 2, 9, 0, 0], [3, 4, 5, 6, 8, 9, 11]])
    with torch.no_grad():
        assert torch.allclose(model(ids, (ids != 0).long()), bag(ids, (ids != 0).long()), atol=1e-6)
    assert same_logits(model, bag)
    other_bias = BagOfTermsClassifier.from_wide_and_deep(model, 16, model.head.bias.detach() + 0.5)
    assert not same_logits(model, other_bias)  # the loop moved the bias: another model
    with torch.no_grad():
        model.head.weight[0, 0] = 1e-3  # the head learnt something: the encoder counts
    assert not same_logits(model, bag)

    # the twin's test score is its bag's, read without a pass of the encoder (its model is None here:
    # scoring it would fail); the chosen bag's own score comes from the finish
    head, targets = Head(), np.array([0, 1] * 10)
    logits = _logits(np.ones(20, bool), targets)
    chosen = Scored("bag_of_terms", None, head, {"accuracy": 1.0}, logits, 5000.0, 1.0)
    twin = Scored("wide_and_deep", None, head, {"accuracy": 1.0}, logits, 50.0, 90.0, same_as="bag_of_terms")
    front = [{"validation": {"accuracy": 1.0}}, {"validation": {"accuracy": 1.0}}]
    task = SimpleNamespace(splits={"test": [None] * 7600}, cfg=None, env=None, pad_id=0)
    assert score_test(Choice(chosen, [twin, chosen], front, "rule"), task, {"accuracy": 0.81}) == []
    assert front[0]["test"] == front[1]["test"] == {"accuracy": 0.81}
    assert front[0]["test"] is not front[1]["test"]


def test_the_twin_of_a_bag_shipped_shrunk_is_scored_by_the_bag_as_fitted(monkeypatch):
    """A wide-and-deep model whose loop kept step 0 computes the fitted bag's logits; where the bag ships
    smaller (int8, fewer terms) its test score is not the twin's: the bag as fitted scores the test texts for
    it, at a bag's cost, and never the encoder."""
    import tfm_cls.bag.candidates as C

    head, targets = Head(), np.array([0, 1] * 10)
    logits = _logits(np.ones(20, bool), targets)
    fitted, shrunk = object(), object()
    chosen = Scored("bag_of_terms", shrunk, head, {"accuracy": 1.0, "seconds": 0.1, "examples": 20}, logits,
                    5000.0, 1.0, as_fitted=fitted)
    twin = Scored("wide_and_deep", "the encoder", head, {"accuracy": 1.0, "seconds": 0.1, "examples": 20}, logits,
                  50.0, 90.0, same_as="bag_of_terms")
    read = []
    monkeypatch.setattr(C, "evaluate", lambda model, *a, **k: (read.append(model), ({"accuracy": 0.8}, None))[1])
    front = [{"validation": {"accuracy": 1.0}}, {"validation": {"accuracy": 1.0}}]
    cfg = SimpleNamespace(train=SimpleNamespace(eval_batch_size=8))
    task = SimpleNamespace(splits={"test": [None] * 7600}, cfg=cfg, env=SimpleNamespace(device="cpu"), pad_id=0,
                           labels=["a", "b"], amp=None)
    assert score_test(Choice(chosen, [twin, chosen], front, "rule"), task, {"accuracy": 0.79}) == []
    assert read == [fitted]  # the bag as fitted, not the encoder, not the shrunk bag
    assert front[0]["test"] == {"accuracy": 0.8} and front[1]["test"] == {"accuracy": 0.79}
