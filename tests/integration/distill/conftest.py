"""Session fixtures of the distillation tests: tiny data, one tiny teacher run and its ONNX export."""

from pathlib import Path

import pytest
from kits.distill_tiny import train_teacher, write_data


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    return write_data(tmp_path_factory.mktemp("distill_data"))


@pytest.fixture(scope="session")
def teacher_run(tmp_path_factory, tiny_data) -> Path:
    return train_teacher(tiny_data, tmp_path_factory.mktemp("teacher") / "run")


@pytest.fixture(scope="session")
def teacher_onnx(teacher_run) -> Path:
    from tfm_cls.export.exporter import export_run

    return Path(export_run(teacher_run))
