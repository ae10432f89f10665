"""Data of each task type: label lists (ids, names, delimited strings), float targets, pairs;
and every bad row is one clear DataError naming the row and the file."""

import json

import numpy as np
import pytest
from kits import tasks_tiny as T

from tfm_cls.config import ClassifierConfig, DataConfig, TokenizerConfig, load_config
from tfm_cls.data.sources import load_data
from tfm_cls.data.tokenized import collate, tokenize_dataset
from tfm_cls.data.tokenizer import train_tokenizer
from tfm_cls.errors import ConfigError, DataError


def _folder(tmp_path, rows, labels=None, split_rows=None):
    folder = tmp_path / "data"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "validation", "test"):
        T.write_jsonl(folder / f"{split}.jsonl", (split_rows or {}).get(split, rows))
    if labels:
        (folder / "labels.json").write_text(json.dumps(labels))
    return folder


def test_multi_label_ids_names_and_delimited_strings_give_the_same_multi_hot(tmp_path):
    as_ids = T.multi_label_data(tmp_path / "ids")
    as_names = T.multi_label_data(tmp_path / "names", as_names=True)
    a = load_data(DataConfig(path=str(as_ids), task="multi_label", label_column="labels"))
    b = load_data(DataConfig(path=str(as_names), task="multi_label", label_column="labels"))
    assert a.labels == b.labels == T.TOPICS
    assert a.splits["train"]["label"] == b.splits["train"]["label"]
    assert a.splits["train"]["label"][1] == [0, 1, 1]  # row 2: animals? no: food + sports (i=1)
    rows = [{"text": "cat and bread", "tags": "animals;food"}, {"text": "golf", "tags": "sports"}]
    c = load_data(DataConfig(path=str(_folder(tmp_path, rows, T.TOPICS)), task="multi_label", label_column="tags",
                             label_delimiter=";"))
    assert c.splits["train"]["label"] == [[1, 1, 0], [0, 0, 1]]


def test_multi_label_names_without_labels_json_are_the_sorted_training_names(tmp_path):
    rows = [{"text": "x", "labels": ["b", "a"]}, {"text": "y", "labels": ["c"]}]
    data = load_data(DataConfig(path=str(_folder(tmp_path, rows)), task="multi_label", label_column="labels"))
    assert data.labels == ["a", "b", "c"] and data.splits["test"]["label"] == [[1, 1, 0], [0, 0, 1]]


def test_unknown_label_name_names_the_row_and_the_file(tmp_path):
    rows = [{"text": "x", "labels": ["animals"]}, {"text": "y", "labels": ["food", "weather"]}]
    folder = _folder(tmp_path, rows, T.TOPICS)
    with pytest.raises(DataError, match=r"train\.jsonl, line 2: unknown label 'weather'"):
        load_data(DataConfig(path=str(folder), task="multi_label", label_column="labels"))


def test_empty_label_list_is_an_error_unless_allowed(tmp_path):
    rows = [{"text": "x", "labels": ["animals"]}, {"text": "y", "labels": []}]
    folder = _folder(tmp_path, rows, T.TOPICS)
    with pytest.raises(DataError, match=r"train\.jsonl, line 2: empty label list.*allow_empty_labels"):
        load_data(DataConfig(path=str(folder), task="multi_label", label_column="labels"))
    data = load_data(DataConfig(path=str(folder), task="multi_label", label_column="labels", allow_empty_labels=True))
    assert data.splits["train"]["label"][1] == [0, 0, 0]


def test_non_numeric_regression_target_names_the_row_and_the_file(tmp_path):
    good = [{"text": "a", "score": 1.5}, {"text": "b", "score": 2}]
    bad = [{"text": "a", "score": "1.5"}, {"text": "b", "score": "high"}]
    folder = _folder(tmp_path, bad)  # a column of strings: numbers among them are accepted, "high" is not
    with pytest.raises(DataError, match=r"train\.jsonl, line 2: regression target 'high' is not a finite number"):
        load_data(DataConfig(path=str(folder), task="regression", label_column="score"))
    data = load_data(DataConfig(path=str(_folder(tmp_path / "ok", good)), task="regression", label_column="score"))
    assert data.labels == ["score"] and data.splits["train"]["label"] == [1.5, 2.0]


def test_pair_row_missing_its_second_text_names_the_row_and_the_file(tmp_path):
    rows = [{"a": "one", "b": "two", "label": 0}, {"a": "three", "b": "", "label": 1}]
    folder = _folder(tmp_path, rows)
    with pytest.raises(DataError, match=r"train\.jsonl, line 2: the pair's second text \('b'\) is missing"):
        load_data(DataConfig(path=str(folder), text_columns=["a"], text_pair_column="b"))
    rows[1]["b"] = None
    folder = _folder(tmp_path / "none", rows)
    with pytest.raises(DataError, match=r"line 2: the pair's second text"):
        load_data(DataConfig(path=str(folder), text_columns=["a"], text_pair_column="b"))


def test_pair_column_is_kept_apart_from_the_joined_text_columns(tmp_path):
    rows = [{"t": "title", "a": "first", "b": "second", "label": i % 2} for i in range(4)]
    data = load_data(DataConfig(path=str(_folder(tmp_path, rows)), text_columns=["t", "a"], text_pair_column="b"))
    assert data.splits["train"]["text"][0] == "title first" and data.splits["train"]["text_pair"][0] == "second"
    assert set(data.splits["train"].column_names) == {"text", "text_pair", "label"}


def test_pairs_are_encoded_with_the_pair_template_and_token_types(tmp_path):
    tok = train_tokenizer(["cat dog bird", "bread soup", "golf tennis"], TokenizerConfig(vocab_size=100, min_frequency=1, max_length=8))
    rows = [{"a": "cat dog", "b": "soup", "label": 0}, {"a": "golf", "b": "bread soup cat dog bird tennis golf", "label": 1}]
    data = load_data(DataConfig(path=str(_folder(tmp_path, rows)), text_columns=["a"], text_pair_column="b"))
    split = tokenize_dataset(data.splits["train"], tok)
    ids = [tok.id_to_token(i) for i in split.input_ids[0]]
    assert ids == ["[CLS]", "cat", "dog", "[SEP]", "soup", "[SEP]"]
    assert split.token_type_ids[0].tolist() == [0, 0, 0, 0, 1, 1]
    # Truncated to 8: the longer (second) side loses tokens, the shorter keeps all of its own.
    second = [tok.id_to_token(i) for i in split.input_ids[1]]
    assert len(second) == 8 and second[:4] == ["[CLS]", "golf", "[SEP]", "bread"] and second[-1] == "[SEP]"
    assert split.num_truncated == 1
    batch = collate(split, [0, 1])
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1]]
    assert batch["attention_mask"][0].tolist() == [1] * 6 + [0, 0]


def test_float_targets_reach_the_batches(tmp_path):
    tok = train_tokenizer(["cat dog", "golf"], TokenizerConfig(vocab_size=100, min_frequency=1, max_length=8))
    ml = load_data(DataConfig(path=str(T.multi_label_data(tmp_path / "ml")), task="multi_label", label_column="labels"))
    split = tokenize_dataset(ml.splits["train"], tok)
    assert split.labels.dtype == np.float32 and split.labels.shape == (90, 3)
    assert collate(split, [0, 1])["labels"].tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]


def test_config_checks():
    base = ["data.path=x"]
    cfg = load_config(ClassifierConfig, None, base)
    assert cfg.data.task == "single_label" and cfg.data.text_pair_column is None and cfg.model.segment_embedding is None
    with pytest.raises(ConfigError, match="train.best_metric='macro_f1' is not a regression metric"):
        load_config(ClassifierConfig, None, [*base, "data.task=regression"])
    with pytest.raises(ConfigError, match="best_metric='accuracy' is not a multi_label metric"):
        load_config(ClassifierConfig, None, [*base, "data.task=multi_label", "train.best_metric=accuracy"])
    with pytest.raises(ConfigError, match="text_pair_column='text': expected a column other than text_columns"):
        load_config(ClassifierConfig, None, [*base, "data.text_pair_column=text"])
    with pytest.raises(ConfigError, match=r"multi_label.threshold: expected a probability in \(0, 1\)"):
        load_config(ClassifierConfig, None, [*base, "multi_label.threshold=1.5"])
    with pytest.raises(ConfigError, match="label_smoothing applies to single_label only"):
        load_config(ClassifierConfig, None, [*base, "data.task=multi_label", "train.best_metric=micro_f1",
                                             "train.label_smoothing=0.1"])
    with pytest.raises(ConfigError, match="expected one of"):
        load_config(ClassifierConfig, None, [*base, "data.task=ranking"])
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(ClassifierConfig, None, [*base, "regression.los=mse"])


def test_long_text_policy_with_tasks(tmp_path):
    """After merging long documents: pairs take no long-text policy (truncated longer text first),
    chunking serves single_label only, and a multi-label split truncated by `tail` keeps float targets."""
    base = ["data.path=x"]
    pair = [*base, "data.text_pair_column=hypothesis"]
    for override in ("inference.chunk=true", "tokenizer.truncation=tail", "tokenizer.max_length=auto"):
        with pytest.raises(ConfigError, match="apply to single texts; sentence pairs"):
            load_config(ClassifierConfig, None, [*pair, override])
    with pytest.raises(ConfigError, match="inference.chunk .* applies to single_label only"):
        load_config(ClassifierConfig, None, [*base, "data.task=regression", "train.best_metric=mse",
                                             "inference.chunk=true"])
    assert load_config(ClassifierConfig, None, [*base, "inference.chunk=true"]).inference.chunk
    cfg = load_config(ClassifierConfig, None, [*base, "data.task=multi_label", "train.best_metric=micro_f1",
                                               "tokenizer.truncation=tail"])
    assert cfg.tokenizer.truncation == "tail"
