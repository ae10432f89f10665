"""Fixtures of the task-type tests: tiny data folders and tiny trained runs, one per session."""

import pytest
from kits import tasks_tiny as T

from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.train import train


@pytest.fixture(scope="session")
def ml_data(tmp_path_factory):
    return T.multi_label_data(tmp_path_factory.mktemp("ml"))


@pytest.fixture(scope="session")
def pair_data(tmp_path_factory):
    return T.pair_data(tmp_path_factory.mktemp("pairs"))


def _train(tmp_path_factory, data, name, *extra):
    run = tmp_path_factory.mktemp(name) / "run"
    metrics = train(load_config(ClassifierConfig, None, T.overrides(data, run, *extra)))
    return run, metrics


@pytest.fixture(scope="session")
def ml_run(tmp_path_factory, ml_data):
    """(run dir, metrics) of a tiny multi-label run."""
    return _train(tmp_path_factory, ml_data, "ml_run", *T.MULTI_LABEL)


@pytest.fixture(scope="session")
def pair_run(tmp_path_factory, pair_data):
    """(run dir, metrics) of a tiny single-label sentence-pair run."""
    return _train(tmp_path_factory, pair_data, "pair_run", *T.PAIRS)


@pytest.fixture(scope="session")
def reg_run(tmp_path_factory, pair_data):
    """(run dir, metrics) of a tiny sentence-pair regression run."""
    return _train(tmp_path_factory, pair_data, "reg_run", *T.REGRESSION)
