"""The label page's HTTP server (Starlette + uvicorn) on 127.0.0.1, driven with raw sockets and with
httpx: what it refuses (Host, content type, body cap, malformed or lying Content-Length, slow and
vanishing clients) gets a 4xx or nothing and never appends; 20 concurrent labels are all kept; a text
holding U+2028 / U+0085 is appended and later labels still work. Every test is bounded in time."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from tfm_cls.suggest.names import LabelNames
from tfm_cls.suggest.pool import collect
from tfm_cls.suggest.server import LabelServer, LabelSession, listening_socket
from tfm_cls.suggest.suggester import Suggester

pytest.importorskip("uvicorn", reason="the serve extra (uvicorn, starlette) is not installed")

LABELS = ["neg", "pos"]
BODY_TIMEOUT = 1.0  # seconds: a body slower than this is 408


class WordVectors:
    """A tiny deterministic vectorizer: hashed words, unit length (no model to load)."""

    name = "hashed words (test)"
    unk_id = None

    def unknown_share(self, texts):
        return np.zeros(len(texts), np.float32)

    def __call__(self, texts):
        out = np.zeros((len(texts), 64), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture
def label_server(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "labels.json").write_text(json.dumps(LABELS))
    texts = [f"text number {i} about {w}" for i, w in enumerate(["films", "music", "books", "games"] * 5)]
    suggester = Suggester(collect(enumerate(texts, 1)), WordVectors(), LabelNames(LABELS, [None, None]))
    server = LabelServer(LabelSession(suggester, folder, 4, "pool.txt"), listening_socket(0),
                         body_timeout=BODY_TIMEOUT, max_body=4096).start()
    yield server, folder
    server.stop()


def rows(folder):
    path = folder / "train.jsonl"
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").split("\n") if line] if path.exists() else []


def raw(port: int, data: bytes, *, close_after: bool = False, wait: float = 5.0) -> bytes:
    """Send `data` on a fresh connection and read until the server closes it or `wait` passes."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(data)
        if close_after:
            return b""
        out, deadline = b"", time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out and out.split(b"\r\n", 1)[0].split()[1] != b"100":
                head, _, rest = out.partition(b"\r\n\r\n")
                length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), None)
                if length is not None and len(rest) >= length:
                    break
        return out


def status_of(response: bytes) -> int | None:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else None


def post(length: bytes, body: bytes, host: bytes = b"127.0.0.1", kind: bytes = b"application/json") -> bytes:
    return (b"POST /api/label HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: " + kind +
            b"\r\nContent-Length: " + length + b"\r\n\r\n" + body)


LABEL = json.dumps({"text": "text number 0 about films", "label": "pos"}).encode()


def test_a_label_through_httpx_and_through_a_raw_socket(label_server):
    server, folder = label_server
    with httpx.Client(base_url=server.url, timeout=10) as client:
        state = client.get("/api/state").json()
        assert state["labels"] == LABELS and len(state["suggestions"]) == 4
        assert "<title>tfm-cls label</title>" in client.get("/").text
        r = client.post("/api/label", json={"text": "a film I loved", "label": "pos"})
        assert r.status_code == 200 and r.json() == {"added": 1, "counts": [0, 1]}
        assert client.post("/api/label", json={"text": "A film I loved ", "label": "neg"}).json()["added"] == 0
    assert status_of(raw(server.port, post(str(len(LABEL)).encode(), LABEL))) == 200
    assert rows(folder) == [{"text": "a film I loved", "label": "pos"}, {"text": "text number 0 about films", "label": "pos"}]


@pytest.mark.parametrize("length", [b"abc", b"-1", b"+24", b"1e3", b"24\r\nContent-Length: 25", b"0x18", b""])
def test_a_malformed_content_length_is_400_and_never_appends(label_server, length):
    server, folder = label_server
    started = time.monotonic()
    assert status_of(raw(server.port, post(length, LABEL))) == 400
    assert time.monotonic() - started < 3 and rows(folder) == []


def test_a_lying_content_length_never_appends(label_server):
    server, folder = label_server
    # longer than the body, connection kept open: the body never ends -> 408 after BODY_TIMEOUT
    started = time.monotonic()
    assert status_of(raw(server.port, post(str(len(LABEL) + 50).encode(), LABEL))) == 408
    assert time.monotonic() - started < BODY_TIMEOUT + 3
    # shorter than the body: what it covers is not JSON -> 400
    assert status_of(raw(server.port, post(str(len(LABEL) - 5).encode(), LABEL))) == 400
    # over the cap: refused from the header, before a byte of body is read
    assert status_of(raw(server.port, post(b"5000", LABEL))) == 413
    assert rows(folder) == []


def test_vanishing_and_slow_clients_never_append(label_server):
    server, folder = label_server
    # half the body, then the connection closes: nothing to answer, nothing appended
    raw(server.port, post(str(len(LABEL)).encode(), LABEL[: len(LABEL) // 2]), close_after=True)
    # headers only, then gone
    raw(server.port, post(str(len(LABEL)).encode(), b""), close_after=True)
    # a byte at a time, slower than the body timeout allows -> 408
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(post(str(len(LABEL)).encode(), b""))
        answer = b""
        for byte in LABEL:
            try:
                s.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.1)
            s.setblocking(False)
            try:
                answer += s.recv(4096)
            except BlockingIOError:
                pass
            s.setblocking(True)
            if answer:
                break
        s.settimeout(5)
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert status_of(answer) == 408
    time.sleep(0.3)  # the server has seen every close
    assert rows(folder) == []
    # and the server still serves
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.post("/api/label", json={"text": "still here", "label": "neg"}).status_code == 200
    assert rows(folder) == [{"text": "still here", "label": "neg"}]


def test_host_content_type_and_bad_bodies_are_refused(label_server):
    server, folder = label_server
    assert status_of(raw(server.port, post(str(len(LABEL)).encode(), LABEL, host=b"evil.example"))) == 403
    assert status_of(raw(server.port, post(str(len(LABEL)).encode(), LABEL, host=b"127.0.0.1.evil.example:80"))) == 403
    assert status_of(raw(server.port, b"GET /api/state HTTP/1.1\r\nHost: evil.example\r\n\r\n")) == 403
    assert status_of(raw(server.port, b"GET /nowhere HTTP/1.1\r\nHost: evil.example\r\n\r\n")) == 403
    form = b"text=x&label=pos"
    assert status_of(raw(server.port, post(str(len(form)).encode(), form, kind=b"application/x-www-form-urlencoded"))) == 415
    assert status_of(raw(server.port, post(str(len(form)).encode(), form, kind=b"text/plain"))) == 415
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert client.get("/api/state", headers={"Host": "localhost"}).status_code == 200
        bad = client.post("/api/label", json={"text": "x", "label": "nope"})
        assert bad.status_code == 400 and "must be one of" in bad.json()["error"]
        assert client.post("/api/label", json=["text", "pos"]).status_code == 400
        assert client.post("/api/label", content=b"\xff\xfe{", headers={"Content-Type": "application/json"}).status_code == 400
        chunked = client.post("/api/label", content=iter([b'{"text": "', b"x" * 5000, b'", "label": "pos"}']),
                              headers={"Content-Type": "application/json"})  # no Content-Length: capped while read
        assert chunked.status_code == 413
        assert client.get("/api/label").status_code == 405
    assert rows(folder) == []


def test_twenty_concurrent_labels_are_all_kept(label_server):
    server, folder = label_server
    texts = [f"concurrent text {i}" for i in range(20)]
    barrier = threading.Barrier(20)

    def label(text):
        with httpx.Client(base_url=server.url, timeout=20) as client:
            barrier.wait(10)
            return client.post("/api/label", json={"text": text, "label": "neg"}).status_code

    with ThreadPoolExecutor(20) as pool:
        assert list(pool.map(label, texts)) == [200] * 20
    got = rows(folder)
    assert sorted(r["text"] for r in got) == sorted(texts) and len(got) == 20


def test_texts_with_line_separators_do_not_break_later_labels(label_server):
    server, folder = label_server
    with httpx.Client(base_url=server.url, timeout=10) as client:
        for text in ["scraped\u2028line", "next\x85line", "para\u2029graph", "sep\x1c\x1d\x1e"]:
            r = client.post("/api/label", json={"text": text, "label": "pos"})
            assert r.status_code == 200 and r.json()["added"] == 1, r.text
        assert client.post("/api/label", json={"text": "after them", "label": "neg"}).json()["counts"] == [1, 4]
        assert client.post("/api/more", json={}).status_code == 200
    assert [r["text"] for r in rows(folder)][-1] == "after them" and len(rows(folder)) == 5
