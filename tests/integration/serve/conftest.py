"""Fixtures of the serve tests: the tiny exported models (one export per session) and an app in
process (Starlette's TestClient: no socket, no port) per model kind."""

from __future__ import annotations

import pytest
from kits import serve_kit as K

pytest.importorskip("starlette", reason="tfm-cls[serve] is not installed")
pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx")

from kits.serve_kit import open_client  # noqa: E402


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return K.export_models(tmp_path_factory.mktemp("serve_models"))


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
