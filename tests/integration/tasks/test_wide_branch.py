"""The bag-of-tokens branch (`wide:`, issue 27; tfm_cls.model.wide, tfm_cls.bag.warm_start): its
logits are a linear bag of the text's tokens, it starts at zero (the model starts as the encoder
alone), trains at wide.lr, and travels through the ONNX export to the torch-free runtime unchanged."""

import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from kits import tasks_tiny as T
from tfm_cls.export.exporter import export_run
from tfm_cls.export.quantize import quantize_model
from tfm_cls.export.verify import verify

from tfm_cls import runs as R
from tfm_cls.bag.fit import WARM_START_C, fit_linear
from tfm_cls.bag.solvers import DEADLINE_CHUNK, WARM_START_ITERATIONS, fit_head_loss
from tfm_cls.bag.sparse import bag_matrix, set_idf
from tfm_cls.bag.warm_start import OFFSETS_FILE, fit_branch, start_wide, train_branch, warm_start
from tfm_cls.classify.heads import Head as SingleLabelHead
from tfm_cls.classify.predict import texts_logits
from tfm_cls.config import ClassifierConfig, TrainConfig, WideConfig, load_config
from tfm_cls.data.tokenized import TokenizedSplit, collate
from tfm_cls.errors import CheckpointError, ConfigError, RunDirError
from tfm_cls.model import TransformerClassifier
from tfm_cls.runtime.heads import sigmoid
from tfm_cls.runtime.session import Classifier
from tfm_cls.train import train
from tfm_cls.training.budget import FIRST_FIT
from tfm_cls.training.optim import param_groups
from tfm_cls.weights import load_weights, save_tensors


def _model(wide=True):
    return TransformerClassifier(vocab_size=30, num_classes=3, d_model=16, nhead=2, num_layers=1,
                                 dim_feedforward=32, max_len=16, wide=wide)


def test_wide_logits_are_an_l2_normalised_bag_of_the_tokens():
    torch.manual_seed(0)
    model = _model().eval()
    with torch.no_grad():
        model.wide.weight.normal_()
        model.wide.weight[0] = 0.0  # padding
    ids = torch.tensor([[5, 7, 7, 2, 0, 0], [3, 4, 5, 6, 8, 9]])
    mask = (ids != 0).long()
    table = model.wide.weight.detach().numpy()
    expected = np.stack([table[[5, 7, 7, 2]].sum(0) / 2.0, table[[3, 4, 5, 6, 8, 9]].sum(0) / np.sqrt(6)])
    assert model.wide(ids, mask).detach().numpy() == pytest.approx(expected, rel=1e-5)
    # the branch adds to the encoder's logits; padding changes nothing
    with torch.no_grad():
        deep = model.head(model.features(ids, mask))
        assert torch.allclose(model(ids, mask), deep + model.wide(ids, mask), atol=1e-6)
        padded = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], 1)
        assert torch.allclose(model(padded, (padded != 0).long()), model(ids, mask), atol=1e-5)


def test_with_encoder_length_the_encoder_reads_the_first_tokens_and_the_branch_all():
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=30, num_classes=3, d_model=16, nhead=2, num_layers=1,
                                  dim_feedforward=32, max_len=16, wide=True, encoder_length=4).eval()
    with torch.no_grad():
        model.wide.weight.normal_()
    a = torch.tensor([[5, 7, 8, 2, 9, 9, 3]])
    b = torch.tensor([[5, 7, 8, 2, 4, 11, 12]])  # differs after the 4th token only
    with torch.no_grad():
        assert torch.equal(model.features(a), model.features(b))
        assert torch.allclose(model(a) - model.wide(a), model(b) - model.wide(b), atol=1e-6)
        assert not torch.allclose(model(a), model(b))
    with pytest.raises(ValueError, match="encoder_length=4 needs wide=True"):
        TransformerClassifier(vocab_size=30, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                              max_len=16, encoder_length=4)


def test_the_branch_starts_at_zero_and_only_when_asked():
    assert _model().wide(torch.tensor([[4, 5]])).abs().max() == 0
    assert _model(wide=False).wide is None and "wide" not in _model(wide=False).config
    assert _model().config["wide"] is True and _model().branch_keys() == ["wide.weight"]
    assert _model(wide=False).branch_keys() == []


def test_the_branch_trains_at_its_own_rate_or_stays_as_fitted():
    def rates(wide):
        model = _model()
        train_branch(model, wide)
        groups = param_groups(model, TrainConfig(lr=1e-4, head_lr=1e-3))
        return model, {name: g["base_lr"] for g in groups for name in g["names"]}

    model, lr_of = rates(WideConfig(enabled=True, lr=5e-2))
    assert lr_of["wide.weight"] == 5e-2 and lr_of["head.weight"] == 1e-3 and lr_of["token_embedding.embedding.weight"] == 1e-4
    assert model.wide.weight.requires_grad
    model, lr_of = rates(WideConfig(enabled=True))  # no rate of its own: the head's
    assert lr_of["wide.weight"] == 1e-3
    model, _ = rates(WideConfig(enabled=True, warm_start=True))  # fitted before step 1, then kept
    assert not model.wide.weight.requires_grad and model.head.weight.requires_grad


def test_a_state_dict_saved_before_the_branch_was_a_module_loads(tmp_path):
    """Runs written before tfm_cls.model.wide kept the IDF table as `wide_idf`: it loads as `wide.idf`."""
    torch.manual_seed(0)
    model = _tfidf_model()
    with torch.no_grad():
        model.wide.weight.normal_()
        model.wide.idf.uniform_(1.0, 3.0)
    state = model.state_dict()
    assert "wide.idf" in state and "wide_idf" not in state  # what runs write now
    old = {("wide_idf" if k == "wide.idf" else k): v for k, v in state.items()}
    save_tensors(old, tmp_path / "model.safetensors")
    fresh = _tfidf_model()
    load_weights(fresh, tmp_path / "model.safetensors")  # strict: a key left over would be an error
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in state.items())
    ids = torch.tensor([[5, 7, 7, 2, 0], [3, 4, 5, 6, 8]])
    with torch.no_grad():
        assert torch.equal(fresh.eval()(ids, (ids != 0).long()), model.eval()(ids, (ids != 0).long()))


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory, ml_data):
    run = tmp_path_factory.mktemp("wide") / "run"
    cfg = load_config(ClassifierConfig, None, T.overrides(ml_data, run, *T.MULTI_LABEL, "wide.enabled=true",
                                                           "wide.encoder_length=8", "wide.lr=0.05"))
    return run, train(cfg)


def test_a_wide_run_trains_the_branch_and_exports_it(wide_run, tmp_path):
    run, metrics = wide_run
    loaded = R.load_run(run)
    assert loaded.model.config["wide"] is True and loaded.model.config["encoder_length"] == 8
    assert loaded.model.wide.weight.abs().max() > 0
    assert metrics["test"]["micro_f1"] > 0.8  # the tiny topics are given away by their words
    path = export_run(run)
    report = verify(loaded.model, path)
    assert report.ok and report.worst_diff < 1e-4
    texts = ["cat dog soup", "rice tea the of " * 5]  # the second is longer than the encoder's 8 tokens
    runtime, _, _ = Classifier(path).classify(texts)  # onnxruntime, sigmoid scores [2, 3]
    torch_logits, _, _ = texts_logits(loaded, texts)
    assert runtime == pytest.approx(sigmoid(torch_logits), abs=1e-5)


def _tfidf_model(vocab_size=40):
    return TransformerClassifier(vocab_size=vocab_size, num_classes=3, d_model=16, nhead=2, num_layers=1,
                                 dim_feedforward=32, max_len=16, wide=True, wide_weighting="tfidf")


def _split(rows, labels):
    return TokenizedSplit(input_ids=rows, labels=np.asarray(labels), lengths=np.asarray([len(r) for r in rows]),
                          num_truncated=0, num_empty=0)


def _class_word_rows(rng: np.random.Generator, n: int) -> tuple[list[list[int]], np.ndarray]:
    """n rows of ids and their class ids: two words of the class's own (10-19, 20-29, 30-39) among five
    of shared filler (1-9)."""
    labels = rng.integers(0, 3, n)
    return [[int(t) for t in np.concatenate([rng.integers(10 + 10 * y, 20 + 10 * y, 2), rng.integers(1, 10, 5)])]
            for y in labels], labels


def test_tfidf_bags_are_scikit_learns_sublinear_tfidf_of_the_tokens():
    from sklearn.feature_extraction.text import TfidfVectorizer

    docs = [[1, 5, 5, 7, 9], [5, 3, 3, 3], [2, 7, 11, 12, 12, 12, 13], [1, 2, 3], [5, 5, 5, 5, 30]]
    model = _tfidf_model()
    set_idf(model.wide, _split(docs, [0] * len(docs)))
    vectorizer = TfidfVectorizer(sublinear_tf=True, analyzer=lambda doc: [str(t) for t in doc]).fit(docs)
    expected = np.zeros((len(docs), 40))
    for token, column in vectorizer.vocabulary_.items():
        expected[:, int(token)] = vectorizer.transform(docs).toarray()[:, column]
        assert model.wide.idf[int(token)].item() == pytest.approx(vectorizer.idf_[column], rel=1e-6)
    unseen = [t for t in range(40) if str(t) not in vectorizer.vocabulary_]
    assert model.wide.idf[unseen].abs().max() == 0  # outside the vocabulary: adds nothing
    bags = bag_matrix(model.wide, _split(docs, [0] * len(docs))).to_dense().numpy()
    assert bags == pytest.approx(expected, abs=1e-6)
    # a text of unseen tokens has an empty bag (no NaN from its zero norm); padding changes nothing
    ids = torch.tensor([[20, 21, 0, 0], [5, 5, 7, 0]])
    shares = model.wide.shares(*model.wide.terms(ids, (ids != 0).long()))
    assert torch.isfinite(shares).all() and shares[0].abs().max() == 0
    with pytest.raises(ValueError, match="wide_weighting must be one of"):
        TransformerClassifier(vocab_size=40, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                              wide_weighting="tfidf")


def test_the_warm_start_is_scikit_learns_logistic_regression_on_the_bags():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 120)
    # each class has its words (10-19, 20-29, 30-39) mixed with shared filler (1-9)
    rows = [[int(t) for t in np.concatenate([rng.integers(10 + 10 * y, 20 + 10 * y, 3), rng.integers(1, 10, 4)])]
            for y in labels]
    split = _split(rows, labels)
    model = _tfidf_model()
    set_idf(model.wide, split)
    head = SingleLabelHead()
    bags = bag_matrix(model.wide, split)
    weights, bias = fit_head_loss(bags, torch.from_numpy(labels), head.loss, torch.zeros(3), c=0.8)
    reference = LogisticRegression(C=0.8, tol=1e-8, max_iter=5000)
    reference.fit(bags.to_dense().numpy(), labels)
    ours = torch.softmax(bags @ weights + bias, -1).numpy()
    assert ours == pytest.approx(reference.predict_proba(bags.to_dense().numpy()), abs=2e-3)


def test_warm_start_fits_the_branch_and_the_bias_and_picks_c_on_validation():
    rng = np.random.default_rng(1)
    train_rows, train_labels = _class_word_rows(rng, 90)
    val_rows, val_labels = _class_word_rows(rng, 45)
    train_split, head = _split(train_rows, train_labels), SingleLabelHead()
    model = _tfidf_model()
    set_idf(model.wide, train_split)
    offsets, chosen = warm_start(model, head, train_split, _split(val_rows, val_labels), "macro_f1", ["a", "b", "c"])
    assert chosen["C"] in WARM_START_C and 0.9 < chosen["validation_score"] <= 1.0
    with torch.no_grad():
        wide = model.wide(torch.tensor(val_rows)) + model.head.bias  # the branch alone, as fitted
    assert (wide.argmax(-1).numpy() == val_labels).mean() > 0.9
    assert model.wide.weight[0].abs().max() == 0  # padding's row stays zero
    # the model starts as the fitted branch: the encoder's head adds nothing until it learns
    with torch.no_grad():
        assert model.head.weight.abs().max() == 0
        assert torch.allclose(model.eval()(torch.tensor(val_rows)), wide, atol=1e-6)

    # the offsets turn the in-sample logits into out-of-fold ones: a fold's rows get the logits of
    # a branch fitted on the other folds, which are worse on them than the full branch's
    bags, targets = bag_matrix(model.wide, train_split), torch.from_numpy(train_labels)
    with torch.no_grad():
        in_sample = bags @ model.wide.weight.detach() + model.head.bias
    oof = in_sample + torch.from_numpy(offsets)
    assert offsets.shape == (90, 3) and head.loss(oof, targets) > head.loss(in_sample, targets)
    held = torch.randperm(90, generator=torch.Generator().manual_seed(0))[0::5]
    kept = torch.tensor(sorted(set(range(90)) - set(held.tolist())))
    dense = bags.to_dense()
    weights, bias = fit_head_loss(dense[kept].to_sparse_csr(), targets[kept], head.loss, torch.zeros(3), chosen["C"])
    # (softmax probabilities: a constant added to every class's bias changes no loss)
    assert torch.softmax(dense[held] @ weights + bias, -1).numpy() == pytest.approx(
        torch.softmax(oof[held], -1).numpy(), abs=2e-3)

    # no branch: nothing happens; a count branch without warm start: left at zero, no offsets
    warm = WideConfig(enabled=True, warm_start=True)
    assert fit_branch(_model(wide=False), head, {"train": train_split}, warm) is None
    counted = _model()
    assert fit_branch(counted, head, {"train": train_split}, WideConfig(enabled=True)) is None
    assert counted.wide.weight.abs().max() == 0


# the second: the many-labels preset's branch with triples too (hashed pairs and triples, the squared-hinge
# fit), reading 24 tokens where the encoder's positions stop at 8
# the third: each token's character grams too (a table the graph reads by id; int8 leaves it as it is)
@pytest.mark.parametrize("extra", [(), ("wide.ngrams=3", "wide.buckets=512", "wide.loss=squared_hinge",
                                        "wide.encoder_length=8", "model.max_len=8", "tokenizer.max_length=24"),
                                   ("wide.ngrams=2", "wide.buckets=512", "wide.char_grams=true")],
                         ids=["tokens", "triples-hinge", "chars"])
def test_a_tfidf_warm_started_run_exports_and_the_runtime_gives_its_scores(tmp_path, ml_data, extra):
    run = tmp_path / "run"
    cfg = load_config(ClassifierConfig, None, T.overrides(ml_data, run, *T.MULTI_LABEL, "wide.enabled=true",
                                                           "wide.weighting=tfidf", "wide.warm_start=true",
                                                           "train.epochs=1", *extra))
    metrics = train(cfg)
    assert metrics["test"]["micro_f1"] > 0.8  # one epoch: the warm start did the work
    loaded = R.load_run(run)
    fitted = loaded.model.wide.weight.detach().clone()
    assert fitted.abs().max() > 0 and (run / OFFSETS_FILE).is_file()
    assert loaded.model.config["wide_weighting"] == "tfidf" and loaded.model.wide.idf.max() > 1.0
    # the bag does not count the tokenizer's [CLS] / [SEP]: no IDF for them, the export reads the same
    markers = [loaded.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]")]
    assert loaded.model.config["wide_skip_ids"] == sorted(markers) and loaded.model.wide.idf[markers].max() == 0
    if "wide.char_grams=true" in extra:  # the grams' rows were fitted: seen in training, weighted
        grams = loaded.model.wide.char_start
        assert loaded.model.config["wide_char_rows"] > 0 and (loaded.model.wide.char_grams >= 0).any()
        assert loaded.model.wide.idf[grams:].max() > 1.0 and fitted[grams:].abs().max() > 0
    path = export_run(run)
    report = verify(loaded.model, path)
    assert report.ok and report.worst_diff < 1e-4
    texts = ["cat dog soup soup soup", "rice tea the of " * 3, "zzzz unknownword", "soup"]
    runtime, _, _ = Classifier(path).classify(texts)
    torch_logits, _, _ = texts_logits(loaded, texts)
    assert runtime == pytest.approx(sigmoid(torch_logits), abs=1e-5)
    # int8: the branch's table becomes int8 rows with a scale each (an embedding Gather), the idf stays
    int8 = tmp_path / "model.int8.onnx"
    quantize_model(path, int8)
    quantized, _, _ = Classifier(int8).classify(texts)
    assert quantized == pytest.approx(runtime, abs=0.05)

    # a resumed warm-started run reads its offsets back; they must be there, for the same training
    # split: else one clear error naming the file
    splits = {"train": SimpleNamespace(num_rows=90)}
    offsets = start_wide(cfg, loaded.model, splits, [], run, resume=True)
    assert offsets.shape == (90, 3) and np.abs(offsets).max() > 0
    splits = {"train": SimpleNamespace(num_rows=7)}
    with pytest.raises(RunDirError, match=r"wide_offsets.safetensors: offsets of shape \[90, 3\], but the training "
                                          r"split gives \[7, 3\]"):
        start_wide(cfg, loaded.model, splits, [], run, resume=True)
    (run / OFFSETS_FILE).write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="wide_offsets.safetensors: corrupt"):
        start_wide(cfg, loaded.model, splits, [], run, resume=True)
    (run / OFFSETS_FILE).unlink()
    with pytest.raises(RunDirError, match="wide_offsets.safetensors: missing"):
        start_wide(cfg, loaded.model, splits, [], run, resume=True)


@pytest.mark.parametrize("overrides, message", [
    (["wide.weighting=tfidf"], "wide.weighting=tfidf: needs wide.enabled: true"),
    (["wide.ngrams=2"], "wide.ngrams=2: expected 1, 2 or 3, and 2 or 3 needs wide.enabled: true"),
    (["wide.enabled=true", "wide.ngrams=4"], "wide.ngrams=4: expected 1, 2 or 3"),
    (["wide.enabled=true", "wide.ngrams=2", "wide.buckets=4294967296"], r"wide.buckets: expected 1 to 2\^31"),
    (["wide.encoder_length=8"], "wide.encoder_length=8: needs wide.enabled: true"),
    (["wide.loss=squared_hinge"], "wide.loss=squared_hinge is a loss of the warm start's fit: it needs "
                                  "wide.warm_start: true"),
    (["wide.enabled=true", "wide.warm_start=true", "wide.loss=squared_hinge", "data.task=regression",
      "train.best_metric=pearson"],
     "wide.loss=squared_hinge fits one-vs-rest classes or labels: it needs data.task: single_label or multi_label "
     r"\(got regression\)"),
    (["wide.warm_start=true"], "wide.warm_start fits the bag-of-tokens branch: it needs wide.enabled: true"),
    (["wide.lr=0"], "wide.lr: expected > 0"),
    (["wide.weighting=idf"], r"wide.weighting: expected one of \['count', 'tfidf'\]"),
    # the keys of before the section: the same check, the command line named
    (["model.wide_weighting=tfidf"], "command line model.wide_weighting=tfidf: wide: wide.weighting=tfidf: needs "
                                     "wide.enabled: true"),
])
def test_wide_options_without_the_branch_are_one_clear_error(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(ClassifierConfig, None, overrides)


def _pair_model(vocab_size=40, buckets=4096, ngrams=2, skip_ids=()):
    return TransformerClassifier(vocab_size=vocab_size, num_classes=3, d_model=16, nhead=2, num_layers=1,
                                 dim_feedforward=32, max_len=16, wide=True, wide_weighting="tfidf", wide_ngrams=ngrams,
                                 wide_buckets=buckets, wide_skip_ids=skip_ids)


# skip (1, 2): the texts' markers ([CLS] ... [SEP]) are not counted, so the bag is scikit-learn's over the
# texts without them: no marker term, no pair or triple across one
@pytest.mark.parametrize("ngrams, skip", [(2, ()), (3, ()), (2, (1, 2)), (3, (1, 2))])
def test_n_gram_bags_are_scikit_learns_sublinear_tfidf_with_hashed_pairs_and_triples(ngrams, skip):
    from sklearn.feature_extraction.text import TfidfVectorizer

    from tfm_cls.model.wide import PAIR_HASH, TRIPLE_HASH

    docs = [[1, 5, 6, 5, 6, 7, 2], [1, 9, 9, 9, 2], [1, 3, 4, 2], [5, 6, 3], [8]]
    model = _pair_model(ngrams=ngrams, skip_ids=skip)
    split = _split(docs, [0] * len(docs))
    set_idf(model.wide, split)
    text_terms = [[t for t in d if t not in skip] for d in docs]
    vectorizer = TfidfVectorizer(sublinear_tf=True, analyzer=lambda d: [" ".join(map(str, d[i:i + n]))
                                                                        for n in range(1, ngrams + 1)
                                                                        for i in range(len(d) - n + 1)]).fit(text_terms)

    def row(term):  # a token's row, or its pair's / triple's hash bucket after the vocabulary
        ids = [int(t) for t in term.split()]
        if len(ids) == 1:
            return ids[0]
        pair = (ids[0] * PAIR_HASH + ids[1]) % 4096
        return 40 + (pair if len(ids) == 2 else (pair * TRIPLE_HASH + ids[2]) % 4096)

    rows = {term: row(term) for term in vectorizer.vocabulary_}
    assert len(set(rows.values())) == len(rows)  # no two terms of these texts share a bucket
    assert any(len(t.split()) == ngrams for t in rows)
    expected = np.zeros((len(docs), model.wide.rows))
    dense = vectorizer.transform(text_terms).toarray()
    for term, column in vectorizer.vocabulary_.items():
        expected[:, rows[term]] = dense[:, column]
        assert model.wide.idf[rows[term]].item() == pytest.approx(vectorizer.idf_[column], rel=1e-6)
    assert model.wide.idf.count_nonzero() == len(rows)  # every other row: outside the vocabulary
    assert bag_matrix(model.wide, split).to_dense().numpy() == pytest.approx(expected, abs=1e-6)
    # (a, b) and (b, a) are different pairs; padding makes no pair or triple; the logits are the bag's product
    with torch.no_grad():
        model.wide.weight.normal_(generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[1, 5, 6, 5, 6, 7, 2, 0, 0], [8, 0, 0, 0, 0, 0, 0, 0, 0]])
    terms, keep = model.wide.terms(ids, (ids != 0).long())
    assert terms.shape == (2, 17 if ngrams == 2 else 24)
    kept = {(2, ()): 13, (3, ()): 18, (2, (1, 2)): 9, (3, (1, 2)): 12}[ngrams, skip]  # 7 or 5 tokens and their grams
    assert keep.sum(1).tolist() == [kept, 1]
    assert terms[0, 9] != terms[0, 10]  # (5, 6) then (6, 5)
    logits = model.wide(ids, (ids != 0).long()).detach().numpy()
    table = model.wide.weight.detach().numpy()
    assert logits == pytest.approx(np.stack([expected[0] @ table, expected[4] @ table]), abs=1e-5)


def test_the_character_view_is_scikit_learns_tfidf_of_each_tokens_grams_beside_the_token_bag():
    """The branch with each token's character grams (tfm_cls.data.char_grams) is a FeatureUnion of two
    sublinear TF-IDF bags, each L2-normalised on its own and scaled by 1 / sqrt(2) (the whole bag keeps
    the unit norm the fit's C grid was chosen for): the tokens and pairs as without the view, and the
    grams of the text's tokens (markers not counted)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from tfm_cls.config import TokenizerConfig
    from tfm_cls.data.char_grams import char_gram_table, piece_grams, piece_text
    from tfm_cls.data.tokenizer import marker_ids, train_tokenizer

    texts = ["the walking dead walked", "walkers walk the walk", "talking heads talk", "a dead talker", "walk"]
    tok = train_tokenizer(texts * 5, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=16))
    markers = marker_ids(tok)
    table, char_rows = char_gram_table(tok, skip_ids=markers)
    ids = [e.ids for e in tok.encode_batch(texts)]
    split = _split(ids, [0] * len(ids))
    words = TransformerClassifier(vocab_size=tok.get_vocab_size(), num_classes=3, d_model=16, nhead=2, num_layers=1,
                                  dim_feedforward=32, max_len=16, wide=True, wide_weighting="tfidf", wide_ngrams=2,
                                  wide_buckets=4096, wide_skip_ids=markers)
    model = R.build_model({**words.config, "wide_char_rows": char_rows, "wide_char_slots": table.shape[1]})
    model.wide.set_char_grams(torch.from_numpy(table))
    assert model.config["wide_char_rows"] == char_rows and model.wide.rows == words.wide.rows + char_rows
    set_idf(words.wide, split), set_idf(model.wide, split)
    bags = bag_matrix(model.wide, split).to_dense().numpy()
    start = words.wide.rows
    # the first view: exactly the branch without characters (its IDF too), scaled
    half = np.sqrt(0.5)
    assert bags[:, :start] == pytest.approx(half * bag_matrix(words.wide, split).to_dense().numpy(), abs=1e-7)
    assert torch.equal(model.wide.idf[:start], words.wide.idf)
    # the second: scikit-learn's TF-IDF of the tokens' grams, columns matched through the table
    vocab = {i: t for t, i in tok.get_vocab().items()}
    special = {i for i, t in vocab.items() if t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}  # no grams

    def analyzer(row):
        return [g for i in row if i not in special for g in piece_grams(piece_text(vocab[i], "##"))]

    vectorizer = TfidfVectorizer(sublinear_tf=True, analyzer=analyzer, min_df=2).fit(ids)  # GRAM_MIN_DF
    column_of = {}
    for i in range(tok.get_vocab_size()):
        for row, gram in zip(table[i], piece_grams(piece_text(vocab[i], "##"))):
            if row >= 0:
                column_of[gram] = start + int(row)
    expected = np.zeros((len(ids), model.wide.rows))
    dense = vectorizer.transform(ids).toarray()
    for gram, column in vectorizer.vocabulary_.items():
        expected[:, column_of[gram]] = dense[:, column]
        assert model.wide.idf[column_of[gram]].item() == pytest.approx(vectorizer.idf_[column], rel=1e-6)
    assert bags[:, start:] == pytest.approx(half * expected[:, start:], abs=1e-6)
    # a gram of one text only is not counted ("ers": "walkers"; min_df 2, as the classical view's)
    once = [g for g, df in Counter(g for row in ids for g in set(analyzer(row))).items() if df == 1]
    assert "ers" in once and all(model.wide.idf[column_of[g]] == 0 for g in once)
    assert (model.wide.idf[start:] > 0).sum() == len(vectorizer.vocabulary_)
    assert np.linalg.norm(bags[:, :start], axis=1) == pytest.approx(half, abs=1e-6)  # each view its own norm
    assert np.linalg.norm(bags[:, start:], axis=1) == pytest.approx(half, abs=1e-6)
    assert np.linalg.norm(bags, axis=1) == pytest.approx(1.0, abs=1e-6)
    # the logits are the bags' product with the weights, padding or not; config and weights round-trip
    with torch.no_grad():
        model.wide.weight.normal_(generator=torch.Generator().manual_seed(0))
    batch = collate(split, list(range(len(ids))), 0)
    logits = model.wide(batch["input_ids"], batch["attention_mask"]).detach().numpy()
    assert logits == pytest.approx(bags @ model.wide.weight.detach().numpy(), abs=1e-5)
    again = R.build_model(model.config)
    again.load_state_dict(model.state_dict())
    assert torch.equal(again.wide.char_grams, model.wide.char_grams)
    # the bag candidate cut from the model keeps the view (its table, its rows), and says so in the card
    from tfm_cls.model import BagOfTermsClassifier
    from tfm_cls.model.classifier import describe_config

    bag = BagOfTermsClassifier.from_wide_and_deep(model, 16)
    assert torch.equal(bag.wide.char_grams, model.wide.char_grams) and bag.config["wide_char_rows"] == char_rows
    assert bag(batch["input_ids"], batch["attention_mask"]).detach().numpy() == pytest.approx(
        logits + model.head.bias.detach().numpy(), abs=1e-5)
    assert f"each token's character 2-5-grams ({char_rows} grams)" in describe_config(bag.config)
    # `count` weighting: 1 / sqrt(2 x its terms) at each of a view's positions: each view's squares sum to 1/2
    counted = R.build_model({**model.config, "wide_weighting": "count"})
    counted.wide.set_char_grams(torch.from_numpy(table))
    terms, keep = counted.wide.terms(batch["input_ids"], batch["attention_mask"])
    squares = counted.wide.shares(terms, keep) ** 2
    gram = terms >= counted.wide.char_start
    assert (squares * ~gram).sum(1) == pytest.approx(torch.full((len(ids),), 0.5))
    assert (squares * gram).sum(1) == pytest.approx(torch.full((len(ids),), 0.5))
    with pytest.raises(ValueError, match="character table of shape"):
        model.wide.set_char_grams(torch.from_numpy(table[:, :3]))
    with pytest.raises(ValueError, match="wide_char_rows and wide_char_slots must be positive integers together"):
        R.build_model({**words.config, "wide_char_rows": char_rows})


def test_a_branch_of_another_order_is_one_clear_error():
    with pytest.raises(ValueError, match="wide_ngrams must be one of"):
        TransformerClassifier(vocab_size=40, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                              wide=True, wide_ngrams=4)


def test_platt_turns_margins_into_log_odds_and_a_constant_label_gets_a_fixed_margin():
    from tfm_cls.bag.solvers import _fit_svm, platt

    rng = np.random.default_rng(0)
    # Platt: scores whose true log-odds are 2 * s - 1 give back that scale and shift
    scores = torch.from_numpy(rng.normal(size=(20_000, 2)).astype(np.float32))
    drawn = torch.from_numpy((rng.random((20_000, 2)) < 1 / (1 + np.exp(-(2 * scores.numpy() - 1)))).astype(np.float32))
    scale, shift = platt(scores, drawn)
    assert scale.numpy() == pytest.approx([2.0, 2.0], abs=0.1) and shift.numpy() == pytest.approx([-1.0, -1.0], abs=0.1)
    # one LinearSVC a label; a label never (or always) on cannot be fitted: zero weights, margin -1 (+1)
    bags = torch.eye(6)[[0, 1, 2, 3, 4, 5, 0, 1]].to_sparse_csr()
    targets = torch.tensor([[1, 0, 1], [1, 0, 1], [1, 0, 1], [0, 0, 1], [0, 0, 1], [0, 0, 1], [1, 0, 1], [1, 0, 1.]])
    weights, bias = _fit_svm(bags, targets, c=1.0)
    margins = bags.to_dense() @ weights + bias
    assert (margins[:, 0] > 0).tolist() == (targets[:, 0] > 0).tolist()
    assert weights[:, 1:].abs().max() == 0 and bias[1:].tolist() == [-1.0, 1.0]


def test_a_squared_hinge_warm_start_leaves_a_branch_of_log_odds():
    from tfm_cls.bag.fit import HINGE_C
    from tfm_cls.classify.heads import MultiLabelHead

    rng = np.random.default_rng(3)

    def rows_of(n):
        labels = rng.integers(0, 3, n)
        targets = np.eye(3, dtype=np.float32)[labels]
        targets[::4, (labels[::4] + 1) % 3] = 1.0
        rows = [[int(t) for t in np.concatenate([rng.integers(10 + 10 * y, 20 + 10 * y, 2),
                                                 *(rng.integers(10 + 10 * z, 20 + 10 * z, 2) for z in np.flatnonzero(
                                                     targets[i]) if z != y), rng.integers(1, 10, 5)])]
                for i, y in enumerate(labels)]
        return rows, targets

    (train_rows, train_targets), (val_rows, val_targets) = rows_of(120), rows_of(60)
    train_split, head = _split(train_rows, train_targets), MultiLabelHead()
    model = _pair_model()
    set_idf(model.wide, train_split)
    offsets, chosen = warm_start(model, head, train_split, _split(val_rows, val_targets), "micro_f1", ["a", "b", "c"],
                                 loss="squared_hinge")
    assert chosen["C"] in HINGE_C and chosen["validation_score"] > 0.9
    with torch.no_grad():
        width = max(map(len, val_rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in val_rows])
        probabilities = torch.sigmoid(model.wide(ids, (ids != 0).long()) + model.head.bias).numpy()
    assert ((probabilities > 0.5) == (val_targets > 0)).mean() > 0.9
    # log-odds, not margins: the mean probability of each label is near its frequency
    assert probabilities.mean(0) == pytest.approx(val_targets.mean(0), abs=0.1)
    # the offsets are out-of-fold minus in-sample: out of fold, the fit is worse on its rows
    bags = bag_matrix(model.wide, train_split)
    with torch.no_grad():
        in_sample = bags @ model.wide.weight.detach() + model.head.bias
    targets = torch.from_numpy(train_targets)
    assert offsets.shape == (120, 3) and head.loss(in_sample + torch.from_numpy(offsets), targets) > head.loss(
        in_sample, targets)


def test_a_single_label_squared_hinge_warm_start_is_linearsvc_scaled_into_one_softmax():
    from sklearn.svm import LinearSVC

    from tfm_cls.bag.fit import HINGE_C

    rng = np.random.default_rng(4)
    (train_rows, train_labels), (val_rows, val_labels) = _class_word_rows(rng, 120), _class_word_rows(rng, 60)
    train_split, head = _split(train_rows, train_labels), SingleLabelHead()
    model = _tfidf_model()
    set_idf(model.wide, train_split)
    offsets, chosen = warm_start(model, head, train_split, _split(val_rows, val_labels), "accuracy", ["a", "b", "c"],
                                 loss="squared_hinge")
    assert chosen["C"] in HINGE_C and chosen["validation_score"] > 0.9
    # the branch is LinearSVC's one-vs-rest weights at the chosen C times one positive scale
    bags = bag_matrix(model.wide, train_split)
    svc = LinearSVC(C=chosen["C"], max_iter=2000).fit(bags.to_dense().numpy(), train_labels)
    weights = model.wide.weight.detach().numpy()  # [rows, 3]
    used = np.abs(svc.coef_.T) > 1e-3
    ratio = weights[used] / svc.coef_.T[used]
    assert ratio.min() > 0 and ratio.std() / ratio.mean() < 1e-3
    # logits of one softmax, not margins: the mean probability of each class is near its frequency
    with torch.no_grad():
        width = max(map(len, val_rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in val_rows])
        probabilities = torch.softmax(model.wide(ids, (ids != 0).long()) + model.head.bias, -1).numpy()
    assert (probabilities.argmax(1) == val_labels).mean() > 0.9
    assert probabilities.mean(0) == pytest.approx(np.bincount(val_labels, minlength=3) / len(val_labels), abs=0.1)
    # the offsets are out-of-fold minus in-sample: out of fold, the fit is worse on its rows
    with torch.no_grad():
        in_sample = bags @ model.wide.weight.detach() + model.head.bias
    targets = torch.from_numpy(train_labels)
    assert offsets.shape == (120, 3) and head.loss(in_sample + torch.from_numpy(offsets), targets) > head.loss(
        in_sample, targets)


def test_with_encoder_length_the_texts_may_be_longer_than_the_positions():
    from tfm_cls.model.wide import longest_input, token_limit

    with pytest.raises(Exception, match="tokenizer.max_length=64 exceeds model.max_len=32"):
        load_config(ClassifierConfig, None, ["model.max_len=32", "tokenizer.max_length=64"])
    cfg = load_config(ClassifierConfig, None, ["model.max_len=32", "tokenizer.max_length=64", "wide.enabled=true",
                                               "wide.encoder_length=16"])
    assert cfg.tokenizer.max_length == 64
    model = TransformerClassifier(vocab_size=30, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                                  max_len=8, wide=True, encoder_length=8)
    assert token_limit(model.config) is None and token_limit(_model().config) == 16
    # an export is verified up to its max_length where the branch reads past the positions
    assert longest_input(model.config, 40) == 40 and longest_input(_model().config, 40) == 16
    with torch.no_grad():  # 40 tokens: the encoder reads 8 of them, the branch all 40
        assert model(torch.randint(1, 30, (2, 40))).shape == (2, 3)


def test_a_spent_wall_clock_stops_the_warm_start_grid_and_skips_the_folds(caplog):
    from tfm_cls.training.clock import WallClock

    rng = np.random.default_rng(2)
    labels = rng.integers(0, 3, 60)
    rows = [[int(t) for t in np.concatenate([rng.integers(10 + 10 * y, 20 + 10 * y, 2), rng.integers(1, 10, 5)])]
            for y in labels]
    split, head = _split(rows, labels), SingleLabelHead()
    model = _tfidf_model()
    set_idf(model.wide, split)
    spent = WallClock(1.0, started=time.monotonic() - 3600)  # a 1-minute budget, an hour ago
    noisy = labels.copy()
    noisy[:6] = (noisy[:6] + 1) % 3  # validation the fit cannot score perfectly (a perfect score ends the grid)
    offsets, chosen = warm_start(model, head, split, _split(rows, noisy), "macro_f1", ["a", "b", "c"], clock=spent)
    assert chosen["C"] == WARM_START_C[0]  # past the deadline: the first fit only, then the grid stopped
    assert np.abs(offsets).max() == 0  # no folds: the encoder trains against the full branch
    assert "the warm start's C grid stopped before C 10" in caplog.text and "no out-of-fold logits" in caplog.text
    assert [what.split(" (")[0] for what in spent.shrunk] == [  # said in metrics.json's wall_clock.shrunk
        "the warm start's C grid stopped before C 10", "no out-of-fold logits for the encoder's targets"]
    # the model is still the fitted branch
    with torch.no_grad():
        assert (model.eval()(torch.tensor(rows)).argmax(-1).numpy() == labels).mean() > 0.9


def test_a_perfect_validation_score_ends_the_c_grid_there(monkeypatch):
    """No other C can beat a validation score of 1.0: the grid fits the first C only, and says why."""
    from tfm_cls.bag import fit
    from tfm_cls.training.clock import WallClock

    rng = np.random.default_rng(7)
    (train_rows, train_labels), (val_rows, val_labels) = _class_word_rows(rng, 60), _class_word_rows(rng, 30)
    train_split, val_split = _split(train_rows, train_labels), _split(val_rows, val_labels)
    fitted_cs = []
    real = fit._fit_svm

    def counted(bags, targets, c):
        fitted_cs.append(c)
        return real(bags, targets, c)

    model = _tfidf_model()
    set_idf(model.wide, train_split)
    monkeypatch.setattr(fit, "_fit_svm", counted)
    fitted = fit.fit_linear(model.wide, torch.zeros(3), SingleLabelHead(), train_split, val_split, "accuracy",
                            ["a", "b", "c"], "squared_hinge", WallClock(None))
    assert fitted.score == 1.0 and fitted.c == 1.0
    # one C on the grid, then the folds at it (five fits of the same C): no other C was tried
    assert set(fitted_cs) == {1.0}


def test_a_loop_that_could_not_train_is_not_held_its_share_and_the_warm_start_fits_its_folds_in_it():
    from tfm_cls.training.budget import FIXED_SECONDS
    from tfm_cls.training.clock import WallClock

    # 5 minutes: the share is 120 s; the loop trains for it and the end's unmeasured reserve, less what
    # scoring the trained encoder at the end needs
    clock = WallClock(5.0)
    assert clock.plan_loop(finish_seconds=FIXED_SECONDS + 60.0) == 120.0 and clock.shrunk == []  # 60 s train: half
    assert clock.plan_loop(finish_seconds=FIXED_SECONDS + 100.0) == 30.0  # 20 s would train: a margin is kept
    assert clock.shrunk[-1].startswith("the encoder's loop is not held its share (120 s): it would train ~20 s")
    assert WallClock(None).plan_loop(1e9) is None

    rng = np.random.default_rng(2)
    labels = rng.integers(0, 3, 60)
    rows = [[int(t) for t in np.concatenate([rng.integers(10 + 10 * y, 20 + 10 * y, 2), rng.integers(1, 10, 5)])]
            for y in labels]
    split = _split(rows, labels)
    for scoring_the_encoder in (0.0, 1e6):  # the loop can train / cannot train
        # 50 s left of a minute: held its 24 s share, the loop leaves the warm start nothing after the end's
        # 30 s reserve; not held (a 6 s margin), it leaves ~14 s, all the tiny grid and folds need
        clock = WallClock(1.0, started=time.monotonic() - 10.0)
        clock.plan_loop(scoring_the_encoder)
        model = _tfidf_model()
        set_idf(model.wide, split)
        offsets, _ = warm_start(model, SingleLabelHead(), split, split, "macro_f1", ["a", "b", "c"], clock=clock)
        held = scoring_the_encoder == 0.0
        assert any(what.startswith("no out-of-fold logits") for what in clock.shrunk) == held
        assert (np.abs(offsets).max() > 0) == (not held)  # the folds: the encoder's targets, the choice's evidence


def test_past_two_c_values_the_grid_stops_where_the_folds_would_no_longer_fit_after_the_next(monkeypatch):
    from tfm_cls.bag import fit
    from tfm_cls.training.clock import WallClock

    real = fit._fit_svm

    def slow_fit(bags, targets, c):  # seconds the clock counts, not the CPU: C 1 a second, the others three
        time.sleep(1.0 if c == 1.0 else 3.0)
        return real(bags, targets, c)

    rng = np.random.default_rng(7)
    (train_rows, train_labels), (val_rows, val_labels) = _class_word_rows(rng, 60), _class_word_rows(rng, 30)
    val_labels[:3] = (val_labels[:3] + 1) % 3  # no C scores validation perfectly (a perfect score ends the grid)
    train_split, val_split = _split(train_rows, train_labels), _split(val_rows, val_labels)
    model = _tfidf_model()
    set_idf(model.wide, train_split)
    # once unclocked at full speed: a first call's one-off costs (imports, first kernels) are not a fit's
    fit.fit_linear(model.wide, torch.zeros(3), SingleLabelHead(), train_split, val_split, "accuracy",
                   ["a", "b", "c"], "squared_hinge")
    monkeypatch.setattr(fit, "_fit_svm", slow_fit)
    # nothing held for a loop; 42 s left of which the end reserves 30: 12 s for the warm start. After two fits
    # (C 1, C 0.3: ~8 s left) a third, C 3 (timed as the slowest, 3 s, times 3 / 1, the C over the largest
    # tried) and the folds at C 1 (the first of the equals) would need ~3 x 3 + 5 x 1 s: the grid stops
    # there; the folds alone fit
    clock = WallClock(1.0, started=time.monotonic() - 18.0)
    clock.hold_loop(0.0)
    fitted = fit.fit_linear(model.wide, torch.zeros(3), SingleLabelHead(), train_split, val_split, "accuracy",
                            ["a", "b", "c"], "squared_hinge", clock)
    assert len(clock.shrunk) == 1 and clock.shrunk[0].startswith("the warm start's C grid stopped before C 3 (")
    assert 13.5 <= float(clock.shrunk[0].split("would need ~")[1].split(" s")[0]) <= 16
    assert fitted.out_of_fold is not None and fitted.out_of_fold.shape == (60, 3)


def test_a_second_bag_starts_only_where_a_first_fit_as_long_as_the_first_bags_fits(tmp_path):
    from tfm_cls.bag.second import fit_second_bag
    from tfm_cls.training.clock import WallClock

    rng = np.random.default_rng(4)
    (train_rows, train_labels), (val_rows, val_labels) = _class_word_rows(rng, 60), _class_word_rows(rng, 30)
    splits = {"train": _split(train_rows, train_labels), "validation": _split(val_rows, val_labels)}
    cfg = load_config(ClassifierConfig, None, ["wide.enabled=true", "wide.weighting=tfidf", "wide.warm_start=true",
                                               "wide.loss=squared_hinge", "wide.second_bag_ngrams=3",
                                               "wide.second_bag_buckets=256", "train.best_metric=accuracy"])
    made = []
    for first_fit in (25.0, 1.0):
        # nothing held for a loop, 45 s left of which the end reserves 30: the deadline is 15 s away
        clock = WallClock(1.0, started=time.monotonic() - 15.0)
        clock.hold_loop(0.0)
        clock.record(FIRST_FIT, first_fit)  # as the first bag's fit_linear records it
        made.append(fit_second_bag(cfg, _tfidf_model(), splits, ["a", "b", "c"], tmp_path / str(first_fit), clock))
        assert (made[-1] is None) == (first_fit == 25.0)
        assert any(what.startswith("no bag_of_terms_3 candidate (a first fit as long as the first bag's, ~25 s")
                   for what in clock.shrunk) == (first_fit == 25.0)
    assert (made[1] / R.WEIGHTS_FILE).is_file() and not (tmp_path / "25.0").exists()
    # fit_linear records what its first fit took, from its call: the bags read and one fit made
    clock = WallClock(5.0)
    model = _tfidf_model()
    set_idf(model.wide, splits["train"])
    fit_linear(model.wide, torch.zeros(3), SingleLabelHead(), splits["train"], splits["validation"], "accuracy",
               ["a", "b", "c"], "squared_hinge", clock)
    assert 0.0 < clock.recorded(FIRST_FIT) < clock.elapsed()


def test_without_out_of_fold_margins_the_hinge_keeps_its_own_decision_and_scales_only():
    from sklearn.svm import LinearSVC

    from tfm_cls.training.clock import WallClock

    rng = np.random.default_rng(5)
    (train_rows, train_labels), (val_rows, val_labels) = _class_word_rows(rng, 90), _class_word_rows(rng, 60)
    train_split = _split(train_rows, train_labels)
    model = _tfidf_model()
    set_idf(model.wide, train_split)
    spent = WallClock(1.0, started=time.monotonic() - 3600)  # no time for the folds
    _, chosen = warm_start(model, SingleLabelHead(), train_split, _split(val_rows, val_labels), "accuracy",
                           ["a", "b", "c"], loss="squared_hinge", clock=spent)
    assert any(what.startswith("no out-of-fold logits") for what in spent.shrunk)
    # in-sample margins would overstate the classes' separation: no shift fitted there, so the model's
    # logits are LinearSVC's margins times one temperature: the same weights up to it, its own bias
    bags = bag_matrix(model.wide, train_split)
    svc = LinearSVC(C=chosen["C"], max_iter=2000).fit(bags.to_dense().numpy(), train_labels)
    scale = float(model.head.bias.detach()[0] / svc.intercept_[0])
    assert scale > 0
    assert model.head.bias.detach().numpy() == pytest.approx(scale * svc.intercept_, rel=1e-4)
    assert model.wide.weight.detach().numpy() == pytest.approx(scale * svc.coef_.T, abs=1e-5 * scale)


def test_a_fit_with_a_passed_deadline_stops_after_one_chunk_of_iterations(caplog):
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, 80)
    rows = [[int(t) for t in np.concatenate([rng.integers(10 + 10 * y, 20 + 10 * y, 3), rng.integers(1, 10, 6)])]
            for y in labels]
    model = _tfidf_model()
    set_idf(model.wide, _split(rows, labels))
    bags, targets = bag_matrix(model.wide, _split(rows, labels)), torch.as_tensor(labels)
    loss = SingleLabelHead().loss
    whole, _ = fit_head_loss(bags, targets, loss, torch.zeros(3), 1000.0)  # weak penalty: many iterations
    cut, _ = fit_head_loss(bags, targets, loss, torch.zeros(3), 1000.0, deadline=time.monotonic())
    assert f"stopped after {DEADLINE_CHUNK} of at most {WARM_START_ITERATIONS}" in caplog.text
    assert not torch.allclose(cut, whole)  # short of the optimum, but a fit: it separates the classes
    assert ((bags @ cut).argmax(-1).numpy() == labels).mean() > 0.9
    # a deadline far off: the same fit as none (chunks carry L-BFGS's history over)
    far, _ = fit_head_loss(bags, targets, loss, torch.zeros(3), 1000.0, deadline=time.monotonic() + 3600)
    assert torch.allclose(far, whole, atol=1e-3)


def test_a_warm_started_model_at_step_0_is_scored_as_its_bag_and_its_own_cost_is_probed():
    from tfm_cls.classify.task import ClassificationTask
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.training import distributed as D
    from tfm_cls.training.precision import Precision

    rng = np.random.default_rng(4)
    labels = rng.integers(0, 3, 70)
    rows = [[int(t) for t in np.concatenate([rng.integers(10 + 10 * y, 20 + 10 * y, 2), rng.integers(1, 10, 4)])]
            for y in labels]
    split = _split(rows, labels)
    cfg = load_config(ClassifierConfig, None, ["wide.enabled=true", "wide.warm_start=true", "wide.weighting=tfidf",
                                               "train.device=cpu", "data.path=unused"])
    env = D.setup("cpu")
    model = _tfidf_model().eval()
    set_idf(model.wide, split)
    warm_start(model, SingleLabelHead(), split, split, "accuracy", ["a", "b", "c"])
    task = ClassificationTask(cfg, model, {"train": split, "validation": split}, ["a", "b", "c"], Path("unused"),
                              env, Precision("fp32", torch.device("cpu")))
    task.evaluate()
    _, bag_logits = task.last_validation
    seconds, examples = task.eval_cost  # the model's own pass, probed on a few rows
    assert seconds > 0 and examples == len(rows)
    with torch.no_grad():  # the same logits as the model's own pass (head weights zero: 0 . pooled + bias)
        own = model(*[collate(split, list(range(len(rows))), 0)[k] for k in ("input_ids", "attention_mask")])
    assert np.array_equal(bag_logits, own.numpy())
    # once the head has learnt something the model is scored by itself
    with torch.no_grad():
        model.head.weight.add_(0.5)
    task.evaluate()
    assert task.eval_cost is None and not np.array_equal(task.last_validation[1], bag_logits)


def test_a_pretrained_models_branch_is_rebuilt_for_its_tokenizers_terms():
    """The checkpoint is loaded before its tokenizer is known: its branch is rebuilt not to count the
    tokenizer's markers and, with `wide.char_grams`, to read its tokens' character grams."""
    from tfm_cls.config import TokenizerConfig
    from tfm_cls.data.char_grams import char_gram_table
    from tfm_cls.data.tokenizer import marker_ids, train_tokenizer
    from tfm_cls.train.recipe import _bag_of_text_terms

    tok = train_tokenizer(["the walking dead walked", "walkers walk the walk"] * 5,
                          TokenizerConfig(vocab_size=100, min_frequency=1, max_length=16))
    markers = marker_ids(tok)
    model = _pair_model(vocab_size=tok.get_vocab_size())
    with torch.no_grad():
        model.wide.weight.normal_(generator=torch.Generator().manual_seed(0))
    wide = WideConfig(enabled=True)
    rebuilt = _bag_of_text_terms(model, wide, tok)
    assert rebuilt.config == {**model.config, "wide_skip_ids": markers} and rebuilt.wide.skip_ids == tuple(markers)
    for key, value in model.state_dict().items():  # the checkpoint's weights kept, every one
        assert torch.equal(rebuilt.state_dict()[key], value), key
    # the encoder reads the same; the branch no longer counts the markers' terms
    cls, sep = markers
    ids = torch.tensor([[cls, 5, 6, sep]])
    model.eval(), rebuilt.eval()
    assert torch.equal(model.features(ids), rebuilt.features(ids))
    assert rebuilt.wide.terms(ids)[1].tolist() == [[False, True, True, False, False, True, False]]
    assert _bag_of_text_terms(model, WideConfig(enabled=True, count_special_tokens=True), tok) is model
    plain = TransformerClassifier(vocab_size=tok.get_vocab_size(), num_classes=3, d_model=16, nhead=2, num_layers=1,
                                  dim_feedforward=32)
    assert _bag_of_text_terms(plain, wide, tok) is plain  # no branch: nothing to rebuild
    # with the character view: the table set, the encoder's and head's weights kept, the branch sized for it
    chars = _bag_of_text_terms(model, WideConfig(enabled=True, char_grams=True), tok)
    table, rows = char_gram_table(tok, skip_ids=markers)
    assert chars.config["wide_char_rows"] == rows and torch.equal(chars.wide.char_grams, torch.from_numpy(table))
    for key, value in model.state_dict().items():
        if not key.startswith("wide."):
            assert torch.equal(chars.state_dict()[key], value), key
    assert chars.wide.weight.shape == (model.wide.rows + rows, 3)
    chars.eval()
    assert torch.equal(model.features(ids), chars.features(ids))
