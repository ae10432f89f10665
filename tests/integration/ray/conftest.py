"""Fixtures of the Ray tests: ONE local Ray cluster for the session (2 CPUs, loopback only, no
dashboard, its files in a temporary folder), the tiny exported models of every kind (the serve
kit's), and `tfm-cls infer`'s rows to compare with."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tfm_cls.batch import cluster

cluster.local_environment()  # before ray is imported: Ray reads its loopback switch at import
pytest.importorskip("ray", reason="tfm-cls[ray] is not installed")

from kits import serve_kit as K  # noqa: E402

TOKEN_FILE = Path.home() / ".ray" / "auth_token"


@pytest.fixture(scope="session")
def ray_cluster():
    """The running local cluster: (ray, its session folder, whether ~/.ray/auth_token existed before)."""
    token_before = TOKEN_FILE.exists()
    import ray
    import ray.data

    # A short path: Ray's sockets live in it, and a Unix socket path holds at most 107 bytes.
    temp = tempfile.mkdtemp(prefix="tfmray")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=temp,
             configure_logging=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray, Path(temp), token_before
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return K.export_models(tmp_path_factory.mktemp("ray_models"))


@pytest.fixture
def cwd_tmp(tmp_path, monkeypatch):
    """Run in the test's folder: a stray relative write would land there, not in the checkout."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


