"""Fixtures of the API / TensorBoard / tune / card tests: tiny data and one finished tiny run."""

from pathlib import Path

import pytest
from kits.api_tiny import tiny_config, write_tiny_data


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    return write_tiny_data(tmp_path_factory.mktemp("api_data"))


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_data) -> tuple[Path, dict]:
    """One finished tiny classification run (TensorBoard on), shared by tests that only read it."""
    from tfm_cls.train import train

    run_dir = tmp_path_factory.mktemp("api_run") / "run"
    metrics = train(tiny_config(tiny_data, run_dir))
    return run_dir, metrics
