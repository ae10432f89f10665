"""Session fixtures of the pretraining tests: tiny data and one finished tiny pretraining run."""

from pathlib import Path

import pytest
from kits.pretrain_tiny import tiny_config, write_tiny_dataset


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    return write_tiny_dataset(tmp_path_factory.mktemp("tiny_data"))


@pytest.fixture(scope="session")
def tiny_pretrained(tmp_path_factory, tiny_data) -> tuple[Path, dict]:
    """One finished tiny pretraining run shared by the tests that only read it."""
    from tfm_cls.pretrain import pretrain

    run_dir = tmp_path_factory.mktemp("tiny_pretrain") / "run"
    metrics = pretrain(tiny_config(tiny_data, run_dir))
    return run_dir, metrics
