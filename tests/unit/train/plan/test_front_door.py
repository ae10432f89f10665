"""The recipe's front door refuses what training refuses (issue 41): profile_data reads every split
through training's own checks, so each hostile folder below is refused by the profile (what
`tfm-cls train --data DIR --explain` runs) with the very DataError training's loader gives, naming the
file and the line; and the label names the profile reports are training's."""

import pytest
from kits.tiny_topics import CLASSES, make_texts, write_dataset

from tfm_cls.config import DataConfig
from tfm_cls.data.sources import load_data
from tfm_cls.errors import DataError
from tfm_cls.train.plan import profile_data

ROWS = make_texts(30, 0)
NAMED = [{"text": r["text"], "label": CLASSES[r["label"]]} for r in ROWS]
SCORES = [{"text": r["text"], "score": 0.25 + i / 8} for i, r in enumerate(ROWS)]
LISTS = [{"text": r["text"], "labels": [CLASSES[r["label"]]]} for r in ROWS]
PAIRS = [{"sentence1": r["text"], "sentence2": r["text"][::-1], "label": r["label"]} for r in ROWS]


def _with(rows, at, row):
    """`rows` with `row` inserted as the at-th (1-based) example."""
    return [*rows[:at - 1], row, *rows[at - 1:]]


# name: the splits, labels.json, training's config of the data (the columns the recipe finds),
# the file and line the error must name, and what it must say.
CASES = {
    "a null label": (
        {"train": _with(NAMED, 3, {"text": "no label here", "label": None})}, None, {},
        "train.jsonl, line 3", "no label (None)"),
    "a validation label training never has": (
        {"train": NAMED, "validation": _with(NAMED[:5], 2, {"text": "x", "label": "weather"})}, None, {},
        "validation.jsonl, line 2", "label 'weather' is not a class (validation split)"),
    "a test label training never has, with labels.json": (
        {"train": [r for r in NAMED if r["label"] != "sports"], "test": NAMED[:4]}, CLASSES, {},
        "test.jsonl, line 3", "label 'sports' (test split): label(s) ['sports'] never occur in the training split"),
    "a NaN regression target": (
        {"train": _with(SCORES, 4, {"text": "x", "score": float("nan")})}, None,
        {"task": "regression", "label_column": "score"}, "train.jsonl, line 4", "regression target nan is not a finite"),
    "an inf regression target in validation": (
        {"train": SCORES, "validation": _with(SCORES[:3], 2, {"text": "x", "score": float("inf")})}, None,
        {"task": "regression", "label_column": "score"}, "validation.jsonl, line 2", "regression target inf is not"),
    "a label not in labels.json": (
        {"train": _with(NAMED, 5, {"text": "x", "label": "weather"})}, CLASSES, {},
        "train.jsonl, line 5", "label 'weather' is not a class (train split)"),
    "an id past the end of labels.json": (
        {"train": _with(ROWS, 6, {"text": "x", "label": 7})}, CLASSES, {}, "train.jsonl, line 6", "label 7 is not a class"),
    "a negative id (a ClassLabel's missing label)": (
        {"train": _with(ROWS, 2, {"text": "x", "label": -1})}, None, {}, "train.jsonl, line 2", "no label (-1)"),
    "a validation file without the label column": (
        {"train": NAMED, "validation": [{"text": "x"}]}, None, {}, "validation.jsonl, line 1", "no label (None)"),
    "a label list with an unknown id": (
        {"train": _with([{"text": r["text"], "labels": [r["label"]]} for r in ROWS], 7, {"text": "x", "labels": [0, 9]})},
        CLASSES, {"task": "multi_label", "label_column": "labels"}, "train.jsonl, line 7", "unknown label 9"),
    "label-list ids without names": (
        {"train": [{"text": r["text"], "labels": [r["label"]]} for r in ROWS]}, None,
        {"task": "multi_label", "label_column": "labels"}, "train.jsonl, line 1", "label id 0 without label names"),
    "an unknown name in a validation label list": (
        {"train": LISTS, "validation": _with(LISTS[:3], 3, {"text": "x", "labels": ["nope"]})}, None,
        {"task": "multi_label", "label_column": "labels"}, "validation.jsonl, line 3", "unknown label 'nope'"),
    "a validation row with a column train lacks": (
        {"train": NAMED, "validation": [{"text": "x", "label": "food"}, {"sentence": "y", "label": "food"}]}, None, {},
        "validation.jsonl, line 2", "column(s) ['sentence'] not in train.jsonl (its columns: ['label', 'text'])"),
    "a pair without its second text": (
        {"train": _with(PAIRS, 8, {"sentence1": "one side", "sentence2": None, "label": 1})}, None,
        {"text_columns": ["sentence1"], "text_pair_column": "sentence2"}, "train.jsonl, line 8",
        "the pair's second text ('sentence2') is missing or empty"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_profile_refuses_what_training_refuses_with_training_s_error(tmp_path, case):
    splits, labels, columns, place, says = CASES[case]
    folder = write_dataset(tmp_path / "data", splits, labels)
    with pytest.raises(DataError) as by_training:
        load_data(DataConfig(path=str(folder), **columns))
    with pytest.raises(DataError) as by_profile:
        profile_data(folder)
    assert str(by_profile.value) == str(by_training.value)  # one source of truth: the same check, the same words
    assert str(by_profile.value).startswith(f"{folder / place}: ") and says in str(by_profile.value)


def test_a_csv_label_column_mixing_ids_and_names_is_refused_at_its_line(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    lines = [f"{r['text']},{r['label']}" for r in ROWS[:20]] + ["one named,animals", "another named,animals"]
    (folder / "train.csv").write_text("text,label\n" + "\n\n".join(lines[:2]) + "\n" + "\n".join(lines[2:]) + "\n")
    with pytest.raises(DataError) as by_training:
        load_data(DataConfig(path=str(folder)))
    with pytest.raises(DataError) as by_profile:
        profile_data(folder)
    assert str(by_profile.value) == str(by_training.value)
    # the rarer kind is the names; the first (row 21) is on line 23: the header and a blank line come before
    assert str(by_profile.value).startswith(f"{folder / 'train.csv'}, line 23: label 'animals': labels mix integers")


def test_a_csv_split_whose_header_names_another_column_is_refused_at_line_1(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.csv").write_text("text,label\n" + "".join(f"{r['text']},{r['label']}\n" for r in NAMED))
    (folder / "test.csv").write_text("sentence,label\nsome words,food\n")
    with pytest.raises(DataError) as by_training:
        load_data(DataConfig(path=str(folder)))
    with pytest.raises(DataError) as by_profile:
        profile_data(folder)
    assert str(by_profile.value) == str(by_training.value)
    assert str(by_profile.value).startswith(f"{folder / 'test.csv'}, line 1: column(s) ['sentence'] not in train.csv")


def test_a_csv_row_is_placed_on_the_line_it_starts_on_past_a_quoted_line_break(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    rows = "".join(f"\"{r['text']}\",{r['label']}\n" for r in NAMED)
    (folder / "train.csv").write_text('text,label\n"two\nlines",animals\n' + rows + "three,\n")
    with pytest.raises(DataError, match=r"train\.csv, line 34: no label \(None\)"):  # row 32; row 1 takes 2 lines
        profile_data(folder)


def test_label_names_are_the_ones_training_gets(tmp_path):
    # whole numbers written as floats: training names them "0.0", "1.0", "2.0" (the profile once
    # refused them, looking their ids up in a labels.json that did not exist)
    rows = [{"text": r["text"], "label": float(r["label"])} for r in ROWS]
    folder = write_dataset(tmp_path / "floats", {"train": rows})
    profile = profile_data(folder)
    assert profile.labels == load_data(DataConfig(path=str(folder))).labels == ["0.0", "1.0", "2.0"]
    assert profile.counts == [10, 10, 10] and profile.task == "single_label"
    # ids that skip one: the classes are the ids used, as training has them
    gaps = [{"text": r["text"], "label": [0, 2, 5][r["label"]]} for r in ROWS]
    profile = profile_data(write_dataset(tmp_path / "gaps", {"train": gaps}))
    assert profile.labels == ["0", "2", "5"] and profile.counts == [10, 10, 10]


def test_a_hub_dataset_is_profiled_from_the_splits_training_reads(monkeypatch):
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    from tfm_cls.data import sources

    features = Features({"text": Value("string"), "label": ClassLabel(names=CLASSES)})
    hub = DatasetDict(train=Dataset.from_list(ROWS, features=features),
                      dev=Dataset.from_list(ROWS[:6], features=features))
    asked = []
    monkeypatch.setattr(sources, "load_dataset", lambda name, config=None, **_: asked.append((name, config)) or hub)
    profile = profile_data(DataConfig(path=None, name="someone/topics", config_name="small", validation_split="dev",
                                      test_split=None))
    assert asked == [("someone/topics", "small")]
    assert profile.labels == CLASSES and profile.sizes == {"train": 30, "validation": 6}
    assert profile.files == {"train": "someone/topics[train]", "validation": "someone/topics[dev]"}
    assert profile.source == {"name": "someone/topics", "config_name": "small", "train_split": "train",
                              "validation_split": "dev", "test_split": None}
