"""Fixtures for the training tests (helpers live in train_tiny.py)."""

import json

import pytest
from train_tiny import CLASSES, make_texts, write_jsonl


@pytest.fixture
def tiny_data(tmp_path):
    """A folder with train (60) / validation (30) / test (30) jsonl and labels.json."""
    folder = tmp_path / "data"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", make_texts(60, 0))
    write_jsonl(folder / "validation.jsonl", make_texts(30, 1))
    write_jsonl(folder / "test.jsonl", make_texts(30, 2))
    (folder / "labels.json").write_text(json.dumps(CLASSES))
    return folder

