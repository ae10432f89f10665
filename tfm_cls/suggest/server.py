"""`tfm-cls label`: the label page's HTTP server, on 127.0.0.1 only (the standard library's
threading server: no extra to install). GET / is the page; GET /api/state the current
suggestions, the labels and their counts; POST /api/label appends one labelled text to
DIR/train.jsonl (store.append_labels: atomic, under the folder's lock); POST /api/more reads the
folder again (other tabs' labels included) and suggests again. Requests whose Host is not this
machine's loopback name are refused (a web page elsewhere cannot drive it through DNS
rebinding), and the POST routes take JSON only (a cross-site form cannot send it)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tfm_cls.errors import TfmClsError
from tfm_cls.suggest.page import PAGE
from tfm_cls.suggest.store import append_labels, read_folder
from tfm_cls.suggest.suggester import Suggester, Suggestion

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
MAX_BODY = 1 << 20


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


def handler_for(session: LabelSession) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
            logger.debug("%s " + format, self.address_string(), *args)

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, value: Any) -> None:
            self._send(status, json.dumps(value, ensure_ascii=False).encode("utf-8"), "application/json")

        def _local(self) -> bool:
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
            if host not in (HOST, "localhost"):
                self._json(403, {"error": "this page answers on 127.0.0.1 / localhost only"})
                return False
            return True

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if not self._local():
                return
            if self.path in ("/", "/index.html"):
                self._send(200, PAGE.encode("utf-8"), "text/html; charset=utf-8")
            elif self.path == "/api/state":
                self._json(200, session.state())
            else:
                self._json(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            if not self._local():
                return
            if not (self.headers.get("Content-Type") or "").startswith("application/json"):
                self._json(415, {"error": "send JSON (Content-Type: application/json)"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._json(413, {"error": f"body over {MAX_BODY} bytes"})
                return
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path == "/api/label":
                    self._json(200, session.label(body))
                elif self.path == "/api/more":
                    self._json(200, session.more())
                else:
                    self._json(404, {"error": f"no route {self.path}"})
            except (ValueError, TfmClsError) as err:
                self._json(400, {"error": str(err)})

    return Handler


def make_server(session: LabelSession, port: int = 0) -> ThreadingHTTPServer:
    """The server bound to 127.0.0.1:port (0: a free one); `serve_forever` runs it."""
    server = ThreadingHTTPServer((HOST, port), handler_for(session))
    server.daemon_threads = True
    return server
