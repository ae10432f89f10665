"""`tfm-cls label`: the label page's HTTP server, on 127.0.0.1 only. One Starlette app run by uvicorn
(the `serve` extra, as `tfm-cls serve` has): uvicorn parses HTTP, so a malformed or negative
Content-Length is its 400 before any route runs.

    GET  /            the page (page.PAGE)
    GET  /api/state   the current suggestions, the labels and their counts
    POST /api/label   {"text", "label"} (or "labels": [...]): one append to DIR/train.jsonl under the
                      folder's lock (store.append_labels: atomic; a text already there is not added twice)
    POST /api/more    read the folder again (other tabs' labels included) and suggest again

Requests whose Host is not this machine's loopback name are refused (403: a web page elsewhere cannot
drive it through DNS rebinding); the POST routes take JSON only (415: a cross-site form cannot send
it), at most MAX_BODY bytes (413), and the whole body within `body_timeout` seconds (408). A body that
ends early (the client went away) or never arrives is never appended: the label is applied only
once the whole body is read and parsed."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfm_cls.errors import InputError, TfmClsError
from tfm_cls.suggest.page import PAGE
from tfm_cls.suggest.store import append_labels, read_folder
from tfm_cls.suggest.suggester import Suggester, Suggestion

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
LOOPBACK_NAMES = (HOST, "localhost")
MAX_BODY = 1 << 20
"""Bytes a POST body may hold (a label is a text and a name: far less)."""
BODY_TIMEOUT = 15.0
"""Seconds from the end of the headers to the end of the body; a client slower than this gets 408."""


class LabelSession:
    """What the page works on: the pool's Suggester, the folder, the current round's suggestions."""

    def __init__(self, suggester: Suggester, folder: str | Path, n: int, pool_name: str,
                 run_guess: Callable | None = None, text_field: str = "text") -> None:
        self.suggester, self.folder, self.n, self.pool_name = suggester, Path(folder), n, pool_name
        self.run_guess, self.text_field = run_guess, text_field
        self.lock = threading.Lock()
        self.suggestions: list[Suggestion] = []
        self.model = ""
        self.more()

    def _labelled(self):
        return read_folder(self.folder, self.text_field) if self.folder.is_dir() else None

    def more(self) -> dict[str, Any]:
        with self.lock:
            labelled = self._labelled()
            self.suggestions = self.suggester.suggest(self.n, labelled, self.run_guess)
            guess = next((s.guess for s in self.suggestions if s.guess), None)
            has_labels = labelled is not None and len(labelled.texts)
            self.model = ("the run" if self.run_guess else "logistic regression on the labelled texts" if has_labels
                          else "the label names (zero-shot)" if guess else "none yet")
            return self.state(labelled)

    def state(self, labelled: Any = None) -> dict[str, Any]:
        labelled = labelled or self._labelled()
        names = labelled.names if labelled is not None else self.suggester.names
        return {"labels": names.names, "descriptions": names.descriptions,
                "multi_label": bool(labelled is not None and labelled.multi_label),
                "counts": labelled.counts() if labelled is not None else [0] * len(names.names),
                "data": str(self.folder), "pool": self.pool_name, "model": self.model,
                "suggestions": [s.row(i) for i, s in enumerate(self.suggestions, 1)]}

    def label(self, body: Any) -> dict[str, Any]:
        names = self.state()["labels"]
        if not isinstance(body, dict) or not isinstance(body.get("text"), str) or not body["text"].strip():
            raise ValueError("expected {\"text\": ..., \"label\": NAME} (or \"labels\": [NAMES])")
        if "labels" in body:
            if not isinstance(body["labels"], list) or any(v not in names for v in body["labels"]):
                raise ValueError(f"labels must be a list of {names}")
            row = {"text": body["text"], "labels": body["labels"]}
        else:
            if body.get("label") not in names:
                raise ValueError(f"label must be one of {names}")
            row = {"text": body["text"], "label": body["label"]}
        added = append_labels(self.folder, [row], names, self.text_field)
        labelled = self._labelled()
        return {"added": added, "counts": labelled.counts()}


class Refused(Exception):
    """A request answered with `status` and `message` (JSON {"error": message})."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def json_body(request: Any, limit: int = MAX_BODY, timeout: float = BODY_TIMEOUT) -> Any:
    """The request's JSON body, read whole within `timeout` seconds and `limit` bytes; Refused
    (415, 413, 408, 400) otherwise. starlette's ClientDisconnect passes through: nobody to answer."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise Refused(415, "send JSON (Content-Type: application/json)")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:  # uvicorn refused non-numbers already
        raise Refused(413, f"body over {limit} bytes")

    async def read() -> bytes:
        parts, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refused(413, f"body over {limit} bytes")
            parts.append(chunk)
        return b"".join(parts)

    try:
        body = await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        raise Refused(408, f"the body did not arrive within {timeout:g} s") from None
    try:
        return json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as err:
        raise Refused(400, f"the body is not JSON: {err}") from None


def create_app(session: LabelSession, body_timeout: float = BODY_TIMEOUT, max_body: int = MAX_BODY):
    """The label page's Starlette app over `session`."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    no_store = {"Cache-Control": "no-store"}

    def answer(status: int, value: Any) -> Response:
        return JSONResponse(value, status, headers=no_store)

    async def page(request) -> Response:
        return HTMLResponse(PAGE, headers=no_store)

    async def state(request) -> Response:
        return answer(200, await run_in_threadpool(session.state))

    def posting(work: Callable[[Any], dict[str, Any]]):
        async def endpoint(request) -> Response:
            try:
                body = await json_body(request, max_body, body_timeout)
                return answer(200, await run_in_threadpool(work, body))
            except Refused as err:
                return answer(err.status, {"error": str(err)})
            except (ValueError, TfmClsError) as err:
                return answer(400, {"error": str(err)})
            except ClientDisconnect:  # the client left before its body ended: nothing applied, nobody to tell
                logger.debug("%s %s: the client left before its body ended", request.method, request.url.path)
                return Response(status_code=400)

        return endpoint

    app = Starlette(routes=[
        Route("/", page, methods=["GET"]), Route("/index.html", page, methods=["GET"]),
        Route("/api/state", state, methods=["GET"]),
        Route("/api/label", posting(session.label), methods=["POST"]),
        Route("/api/more", posting(lambda body: session.more()), methods=["POST"]),
    ])

    async def loopback_only(scope, receive, send):  # pure ASGI: every route and every 404 behind it
        if scope["type"] == "http":
            host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
            name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
            if name.lower() not in LOOPBACK_NAMES:
                await answer(403, {"error": "this page answers on 127.0.0.1 / localhost only"})(scope, receive, send)
                return
        await app(scope, receive, send)

    return loopback_only


def listening_socket(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:port (0: a free one), taken before the pool is read, so a port
    in use is one line at once; InputError where it cannot be had."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        hint = " (another server? choose another --port, or --port 0)" if err.errno == errno.EADDRINUSE else ""
        raise InputError(f"cannot listen on {HOST}:{port}: {err.strerror or err}{hint}") from None
    return sock


class LabelServer:
    """uvicorn serving the label app on a socket of 127.0.0.1: `run()` until Ctrl-C, or `start()` in a
    thread and `stop()` (the tests)."""

    def __init__(self, session: LabelSession, sock: socket.socket, body_timeout: float = BODY_TIMEOUT,
                 max_body: int = MAX_BODY) -> None:
        import uvicorn

        self.sock = sock
        self.port = sock.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}/"
        # h11: the pure-Python parser of uvicorn, the same everywhere (httptools is optional); lifespan off:
        # nothing to start; no access log: the page's own requests are noise on the user's terminal.
        config = uvicorn.Config(create_app(session, body_timeout, max_body), http="h11", lifespan="off",
                                log_level="warning", access_log=False, timeout_keep_alive=5,
                                timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread: threading.Thread | None = None

    def run(self) -> None:
        self.server.run(sockets=[self.sock])

    def start(self) -> LabelServer:
        self.thread = threading.Thread(target=self.run, name="label-server", daemon=True)
        self.thread.start()
        while not self.server.started and self.thread.is_alive():
            self.thread.join(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(10)
        self.sock.close()
