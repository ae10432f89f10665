"""Fixtures for the tests of tfm_cls.init_from's Hugging Face import (helpers live in hf_tiny.py)."""

from pathlib import Path

import pytest
from kits.hf_tiny import save_tiny


@pytest.fixture
def tiny_bert(tmp_path: Path) -> Path:
    """A random 2-layer, d 32, 4-head BertModel folder: config.json, model.safetensors, tokenizer.json."""
    return save_tiny(tmp_path / "tiny-bert", "bert")
