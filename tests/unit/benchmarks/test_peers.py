"""benchmarks/peers: each peer imports its packages (the bench extra) only when used and says in
one line what is missing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.peers import fastapi_peer, fasttext_peer, missing, model2vec_peer

ROOT = Path(__file__).resolve().parents[3]


def test_a_missing_package_is_one_line_naming_it_and_the_extra():
    reason = missing("json", "surely_not_installed_xyz")
    assert reason.startswith("surely_not_installed_xyz is not installed (pip install 'tfm-cls[bench]')")
    assert "\n" not in reason
    assert missing("json", "numpy") is None
    assert missing("surely_not_installed_xyz", extra="serve").count("tfm-cls[serve]") == 1


def test_importing_the_peers_imports_none_of_their_packages():
    probe = ("import sys, benchmarks.peers.fasttext_peer, benchmarks.peers.model2vec_peer, benchmarks.peers.fastapi_peer; "
             "print(sorted(m for m in ('fasttext', 'model2vec', 'fastapi', 'pydantic', 'uvicorn', 'onnxruntime', 'torch') "
             "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("peer", [fasttext_peer, model2vec_peer, fastapi_peer], ids=lambda m: m.__name__.split(".")[-1])
def test_each_peer_says_in_one_line_whether_it_can_run(peer):
    reason = peer.available()
    assert reason is None or ("pip install 'tfm-cls[bench]'" in reason and "\n" not in reason)


def test_the_fastapi_peer_refuses_to_start_without_its_packages_in_one_error_line(monkeypatch):
    monkeypatch.setattr(fastapi_peer, "available", lambda: "fastapi is not installed (pip install 'tfm-cls[bench]')")
    with pytest.raises(SystemExit, match=r"^error: fastapi is not installed \(pip install 'tfm-cls\[bench\]'\)$"):
        fastapi_peer.create_app()
