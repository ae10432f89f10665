"""Fixtures of the serve tests: the tiny exported models (one export per session) and an app in
process (Starlette's TestClient: no socket, no port) per model kind."""

from __future__ import annotations

import time

import pytest
import serve_kit as K

pytest.importorskip("starlette", reason="tfm-cls[serve] is not installed")
pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx")

from starlette.testclient import TestClient  # noqa: E402

from tfm_cls.serve.app import create_app  # noqa: E402
from tfm_cls.serve.settings import ServeSettings  # noqa: E402


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return K.export_models(tmp_path_factory.mktemp("serve_models"))


def open_client(model, **settings) -> TestClient:
    """A TestClient over a fresh app, entered (lifespan run) and ready."""
    client = TestClient(create_app(ServeSettings(model=str(model), threads=1, **settings)),
                        raise_server_exceptions=False)
    client.__enter__()
    deadline = time.monotonic() + 30
    while client.get("/health").status_code != 200:
        assert time.monotonic() < deadline, client.get("/health").json()
        time.sleep(0.01)
    return client


@pytest.fixture(scope="session")
def clients(models):
    """{kind: a ready TestClient with default settings} for every model kind."""
    opened = {kind: open_client(path) for kind, path in models.items()}
    yield opened
    for client in opened.values():
        client.__exit__(None, None, None)


@pytest.fixture
def client(clients):
    return clients["single_label"]
