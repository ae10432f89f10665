"""Fixtures for the training tests (the tiny data and config live in tests/kits/tiny_topics.py)."""

import pytest
from kits.tiny_topics import write_topic_data


@pytest.fixture
def tiny_data(tmp_path):
    """A folder with train (60) / validation (30) / test (30) jsonl and labels.json."""
    return write_topic_data(tmp_path / "data")
