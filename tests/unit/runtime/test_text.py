"""Long documents: the length chosen from the data, truncation strategies, chunked inference
(torch and ONNX), length-sorted token-budget batching, and bad values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

# The long-document fixtures, imported here so that they win over the export fixtures of this folder's
# conftest (both have a `tokenizer`); ruff reads a fixture argument as a redefinition of the import.
# ruff: noqa: F811
from kits.longdocs_fixtures import chunked_onnx, model, tokenizer  # noqa: F401
from kits.longdocs_kit import LABELS, MAX_LENGTH, WORDS, make_run, texts

from tfm_cls.classify.predict import classify_texts, predict_logits
from tfm_cls.config import ClassifierConfig, TokenizerConfig, load_config
from tfm_cls.data.tokenized import tokenize_dataset
from tfm_cls.data.tokenizer import auto_max_length, percentile_length, token_lengths
from tfm_cls.errors import ConfigError, InferenceError
from tfm_cls.runtime.batching import plan_batches
from tfm_cls.runtime.session import Classifier
from tfm_cls.runtime.text import LongText, TextEncoder, aggregate_windows

# ---- max_length: auto ----------------------------------------------------------------------------------


def test_percentile_length_is_the_inverted_cdf_percentile():
    lengths = np.random.default_rng(0).permutation(np.arange(1, 101))  # 1..100, shuffled
    assert percentile_length(lengths, 95) == 95
    assert percentile_length(lengths, 100) == 100
    assert percentile_length(lengths, 50) == 50
    assert percentile_length(lengths, 0.5) == 1
    assert percentile_length([7, 3, 3, 3], 75) == 3 and percentile_length([7, 3, 3, 3], 76) == 7


def test_auto_picks_the_percentile_of_token_lengths_then_the_caps(tokenizer):
    corpus = [" ".join(["cat"] * n) for n in range(1, 41)]  # 1..40 text tokens: 3..42 with [CLS] [SEP]
    assert token_lengths(tokenizer, corpus).tolist() == list(range(3, 43))
    cfg = TokenizerConfig(max_length="auto", length_percentile=90, max_length_cap=512)
    assert auto_max_length(tokenizer, corpus, cfg) == 38  # 36 of 40 texts have <= 38 tokens
    assert auto_max_length(tokenizer, corpus, cfg, position_limit=20) == 20
    assert auto_max_length(tokenizer, corpus, TokenizerConfig(max_length="auto", max_length_cap=16)) == 16


@pytest.mark.parametrize("value", ["0", "-5", "100.5"])
def test_a_percentile_outside_0_100_is_a_config_error(value):
    with pytest.raises(ConfigError, match=r"length_percentile: expected a percentile in \(0, 100\]"):
        load_config(ClassifierConfig, None, [f"tokenizer.length_percentile={value}"])


@pytest.mark.parametrize("keys", [["tokenizer.max_length=16", "tokenizer.stride=16"],
                                  ["tokenizer.max_length=auto", "tokenizer.max_length_cap=64", "tokenizer.stride=80"]])
def test_a_stride_not_below_the_window_is_a_config_error(keys):
    with pytest.raises(ConfigError, match=r"stride=\d+ must be smaller than the window"):
        load_config(ClassifierConfig, None, keys)


def test_bad_long_text_values_are_clear_errors(tokenizer):
    with pytest.raises(ConfigError, match="expected one of"):
        load_config(ClassifierConfig, None, ["tokenizer.truncation=middle"])
    with pytest.raises(ConfigError, match=r"head_fraction: expected \[0, 1\]"):
        load_config(ClassifierConfig, None, ["tokenizer.head_fraction=1.5"])
    # The window's text tokens are max_length minus [CLS] and [SEP]: 10 here.
    with pytest.raises(InferenceError, match="stride 10 must be smaller than the window's 10 text tokens"):
        TextEncoder(tokenizer, MAX_LENGTH, LongText(chunk=True, stride=10))


# ---- truncation strategies ------------------------------------------------------------------------------


def _content(tokenizer, text):
    """All text tokens of `text` (an untruncated copy of the tokenizer)."""
    whole = type(tokenizer).from_str(tokenizer.to_str())
    whole.no_truncation()
    return whole.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("truncation,fraction", [("head", 0.25), ("tail", 0.25), ("head+tail", 0.25), ("head+tail", 0.6)])
def test_each_strategy_keeps_the_right_tokens_and_the_special_tokens(tokenizer, truncation, fraction):
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    encoder = TextEncoder(tokenizer, MAX_LENGTH, LongText(truncation=truncation, head_fraction=fraction))
    long_text, short_text = " ".join(WORDS), "cat dog"
    enc = encoder.encode([long_text, short_text])
    content = _content(tokenizer, long_text)
    assert len(content) == 20 and enc.truncated == [True, False] and enc.windows == [1, 1]
    budget = MAX_LENGTH - 2
    head = {"head": budget, "tail": 0}.get(truncation, round(budget * fraction))
    kept = content[:head] + (content[len(content) - (budget - head):] if head < budget else [])
    assert enc.ids[0] == [cls, *kept, sep] and len(enc.ids[0]) == MAX_LENGTH
    assert enc.ids[1] == [cls, *_content(tokenizer, short_text), sep]  # short texts untouched


def test_head_is_exactly_the_tokenizers_own_truncation(tokenizer):
    """The default reproduces the truncation of every run before long-text support, id for id."""
    corpus = texts(200, seed=1, high=40)
    tokenizer_unpadded = type(tokenizer).from_str(tokenizer.to_str())
    tokenizer_unpadded.no_padding()
    native = [e.ids for e in tokenizer_unpadded.encode_batch(corpus)]
    assert TextEncoder(tokenizer, MAX_LENGTH).encode(corpus).ids == native


def test_tail_matches_the_tokenizers_left_truncation(tokenizer):
    corpus = texts(50, seed=2, high=40)
    left = type(tokenizer).from_str(tokenizer.to_str())
    left.no_padding()
    left.enable_truncation(MAX_LENGTH, direction="left")
    assert TextEncoder(tokenizer, MAX_LENGTH, LongText(truncation="tail")).encode(corpus).ids == [
        e.ids for e in left.encode_batch(corpus)
    ]


def test_training_rows_follow_the_strategy(tokenizer):
    from datasets import Dataset

    corpus = texts(30, seed=3, high=40)
    ds = Dataset.from_dict({"text": corpus, "label": [i % 3 for i in range(30)]})
    policy = LongText(truncation="head+tail", head_fraction=0.3)
    split = tokenize_dataset(ds, tokenizer, policy=policy)
    expected = TextEncoder(tokenizer, MAX_LENGTH, policy).encode(corpus)
    assert split.input_ids == expected.ids and split.windows is None
    assert split.num_truncated == sum(expected.truncated) > 0
    assert split.lengths.tolist() == [len(x) for x in expected.ids]


# ---- windows and chunked inference ---------------------------------------------------------------------


def test_windows_overlap_by_the_stride_and_cover_the_text(tokenizer):
    encoder = TextEncoder(tokenizer, MAX_LENGTH, LongText(chunk=True, stride=3))  # 10 tokens, step 7
    assert encoder.window_starts(10) == [0]
    assert encoder.window_starts(11) == [0, 1]
    assert encoder.window_starts(20) == [0, 7, 10]  # the last window ends at the text's end
    long_text = " ".join(WORDS)
    content = _content(tokenizer, long_text)
    enc = encoder.encode([long_text, "cat"])
    assert enc.windows == [3, 1] and enc.truncated == [False, False]
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    assert enc.ids[:3] == [[cls, *content[s : s + 10], sep] for s in (0, 7, 10)]


def _window_logits_one_by_one(model, rows):
    with torch.no_grad():
        return np.stack([model(torch.tensor([r]), torch.ones(1, len(r), dtype=torch.long))[0].numpy() for r in rows])


@pytest.mark.parametrize("aggregate,scores", [("mean", "logits"), ("max", "logits"), ("mean", "probabilities"),
                                              ("max", "probabilities")])
def test_chunked_inference_is_the_hand_computed_aggregate_of_the_windows(model, tokenizer, aggregate, scores):
    run = make_run(model, tokenizer, chunk=True, stride=2, aggregate=aggregate, aggregate_scores=scores)
    corpus = texts(12, seed=4, high=50)
    probs, truncated, windows = classify_texts(run, corpus, batching="tokens", max_tokens=40)
    assert not any(truncated) and max(windows) > 2
    encoder = TextEncoder(tokenizer, MAX_LENGTH, LongText(chunk=True, stride=2))
    for i, text in enumerate(corpus):
        rows = encoder.encode([text]).ids
        assert len(rows) == windows[i]
        logits = _window_logits_one_by_one(model, rows).astype(np.float64)  # [windows, C]
        if scores == "logits":
            agg = logits.mean(0) if aggregate == "mean" else logits.max(0)
            want = np.exp(agg - agg.max()) / np.exp(agg - agg.max()).sum()
        else:
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            agg = p.mean(0) if aggregate == "mean" else p.max(0)
            want = agg / agg.sum()
        np.testing.assert_allclose(probs[i], want, atol=1e-5)


def test_eval_aggregates_the_windows_of_each_example(model, tokenizer):
    from datasets import Dataset

    corpus = texts(20, seed=5, high=50)
    policy = LongText(chunk=True, stride=4, aggregate="max")
    ds = Dataset.from_dict({"text": corpus, "label": [i % 3 for i in range(20)]})
    split = tokenize_dataset(ds, tokenizer, policy=policy)
    assert len(split) == 20 and split.num_rows == int(split.windows.sum()) > 20
    logits = predict_logits(model, split, 8, torch.device("cpu"))  # [examples, C]
    rows = _window_logits_one_by_one(model, split.input_ids)
    want = aggregate_windows(rows, split.windows, "max", "logits")
    np.testing.assert_allclose(logits, want, atol=1e-5)
    probs = classify_texts(make_run(model, tokenizer, chunk=True, stride=4, aggregate="max"), corpus)[0]
    np.testing.assert_allclose(torch.softmax(torch.from_numpy(logits), -1).numpy(), probs, atol=1e-5)


def test_onnx_equals_torch_on_chunked_texts(model, tokenizer, chunked_onnx):
    corpus = texts(25, seed=6, high=60) + ["cat", " ".join(WORDS * 3)]
    classifier = Classifier(str(chunked_onnx), max_tokens=64)
    assert classifier.policy == LongText(chunk=True, stride=3)  # read from the export's metadata
    got, truncated, windows = classifier.classify(corpus)
    want, want_truncated, want_windows = classify_texts(make_run(model, tokenizer, chunk=True, stride=3), corpus)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert windows == want_windows and truncated == want_truncated and max(windows) >= 6
    # A flag overrides the export's policy: head truncation again.
    plain = Classifier(str(chunked_onnx), long_text={"chunk": False})
    probs, truncated, windows = plain.classify(corpus)
    assert windows == [1] * len(corpus) and any(truncated)
    np.testing.assert_allclose(probs, classify_texts(make_run(model, tokenizer), corpus)[0], atol=1e-5)


# ---- batching --------------------------------------------------------------------------------------------


def test_plan_batches_covers_every_row_once_within_the_budget():
    lengths = [int(x) for x in np.random.default_rng(0).integers(3, 60, size=500)]
    for batches in (plan_batches(lengths, "tokens", max_tokens=256), plan_batches(lengths, "fixed", batch_size=7)):
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(500))
        assert [lengths[i] for i in flat] == sorted(lengths)  # sorted by length
    for b in plan_batches(lengths, "tokens", max_tokens=256):
        assert len(b) * max(lengths[i] for i in b) <= 256
    assert plan_batches([300, 5], "tokens", max_tokens=256) == [[1], [0]]  # too long for the budget: alone


@pytest.mark.parametrize("chunk", [False, True])
def test_sorted_token_budget_batches_give_the_unsorted_paths_outputs_in_input_order(model, tokenizer, chunk):
    run = make_run(model, tokenizer, chunk=chunk, stride=3)
    corpus = texts(60, seed=7, high=45)
    reference = np.stack([classify_texts(run, [t], batching="fixed", batch_size=1)[0][0] for t in corpus])
    for kwargs in ({"batching": "tokens", "max_tokens": 48}, {"batching": "tokens", "max_tokens": 4096},
                   {"batching": "fixed", "batch_size": 5}):
        np.testing.assert_allclose(classify_texts(run, corpus, **kwargs)[0], reference, atol=1e-6)


def test_labels_of_the_api_match_between_paths(model, tokenizer, tmp_path):
    from tfm_cls.export.exporter import export_classifier

    path = tmp_path / "m.onnx"
    export_classifier(model, path, tokenizer=tokenizer, labels=LABELS, max_length=MAX_LENGTH)
    corpus = texts(40, seed=8, high=40)
    onnx_probs = Classifier(str(path)).classify(corpus)[0]
    torch_probs = classify_texts(make_run(model, tokenizer), corpus)[0]
    np.testing.assert_allclose(onnx_probs, torch_probs, atol=1e-5)
    assert (onnx_probs.argmax(1) == torch_probs.argmax(1)).all()
