"""Clients we did not write, against the app on real uvicorn (a thread of this process, 127.0.0.1,
a free port): Hugging Face's own `InferenceClient` (it posts the Inference API's task schema to
the base URL), the OpenAPI document a client generator would read, and a raw socket that sends
half a body and leaves. Each test a handful of requests."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

import httpx
import pytest
from kits import serve_kit as K

from tfm_cls.serve.app import create_app
from tfm_cls.serve.settings import ServeSettings

hub = pytest.importorskip("huggingface_hub", reason="huggingface_hub drives these tests")


@contextlib.contextmanager
def running(model, **settings):
    """The app of `model` served by uvicorn in a thread on 127.0.0.1 (a free port); yields its URL."""
    import uvicorn

    app = create_app(ServeSettings(model=str(model), threads=1, **settings))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    # log_config None: uvicorn leaves logging as it is, so its records reach pytest's caplog
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="info", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline and thread.is_alive()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="module")
def urls(models):
    """{name: URL}: the single-label and multi-label models, and the single-label one with an API key."""
    with running(models["single_label"]) as single, running(models["multi_label"]) as multi, \
            running(models["single_label"], api_key="s3cret") as keyed:
        yield {"single_label": single, "multi_label": multi, "keyed": keyed}


def _predict(url: str, text: str, key: str | None = None) -> list[dict]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    r = httpx.post(url + "/predict", json={"inputs": text}, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(autouse=True)
def loopback_only_hub(monkeypatch):
    """tests/conftest.py puts huggingface_hub offline, which refuses every URL; these tests talk to
    127.0.0.1 only (each client below is given a loopback URL as its model, so it calls nothing else)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def _client(url: str, token: str | None = None):
    assert url.startswith("http://127.0.0.1:")
    return hub.InferenceClient(model=url, token=token, timeout=10)


def test_inference_client_text_classification_gets_every_label(urls):
    got = _client(urls["single_label"]).text_classification(K.TEXTS[3])
    assert isinstance(got, list) and all(isinstance(e, hub.TextClassificationOutputElement) for e in got)
    assert [(e.label, e.score) for e in got] == [(e["label"], e["score"]) for e in _predict(urls["single_label"],
                                                                                            K.TEXTS[3])]
    assert sorted(e.label for e in got) == sorted(K.LABELS)


def test_inference_client_top_k(urls):
    got = _client(urls["single_label"]).text_classification(K.TEXTS[1], top_k=2)
    best = _predict(urls["single_label"], K.TEXTS[1])[:2]
    assert [(e.label, e.score) for e in got] == [(e["label"], e["score"]) for e in best]


def test_inference_client_multi_label_sigmoid_scores(urls):
    client = _client(urls["multi_label"])
    got = client.text_classification(K.TEXTS[4], function_to_apply="sigmoid")
    served = _predict(urls["multi_label"], K.TEXTS[4])
    assert [(e.label, e.score) for e in got] == [(e["label"], e["score"]) for e in served]
    assert len(got) == len(K.ML_LABELS) and sum(e.score for e in got) != pytest.approx(1.0)  # per-label sigmoids
    with pytest.raises(hub.errors.HfHubHTTPError) as err:  # a softmax over independent labels: not this model's
        client.text_classification(K.TEXTS[4], function_to_apply="softmax")
    assert err.value.response.status_code == 422 and "sigmoid" in err.value.response.json()["error"]


def test_inference_client_with_an_api_key(urls):
    got = _client(urls["keyed"], token="s3cret").text_classification(K.TEXTS[2], top_k=1)
    assert [(e.label, e.score) for e in got] == [(e["label"], e["score"])
                                                 for e in _predict(urls["keyed"], K.TEXTS[2], "s3cret")[:1]]
    for token in ("wrong", None):
        with pytest.raises(hub.errors.HfHubHTTPError) as err:
            _client(urls["keyed"], token=token).text_classification(K.TEXTS[2])
        assert err.value.response.status_code == 401


def test_the_openapi_document_describes_every_route_and_the_bodies_sent(urls):
    jsonschema = pytest.importorskip("jsonschema")
    doc = httpx.get(urls["keyed"] + "/openapi.json", timeout=10).json()  # readable without the key
    app = create_app(ServeSettings(model="unused.onnx"))
    routes = {(r.path, m.lower()) for r in app.routes for m in r.methods if m != "HEAD"}
    assert {(p, m) for p, ops in doc["paths"].items() for m in ops} == routes
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    assert doc["paths"]["/predict"]["post"]["security"] == [{"bearer": []}] and "security" not in \
        doc["paths"]["/health"]["get"]
    for schema in doc["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)

    def validator(name: str):  # the document as the root, so "#/components/..." references resolve
        return jsonschema.Draft202012Validator({**doc, "$ref": f"#/components/schemas/{name}"})

    bodies = [{"inputs": "a"}, {"inputs": ["a", "b"], "top_k": 1, "truncate": True},
              {"inputs": [["a"], ["b", "c"]], "truncation_direction": "left"},
              {"inputs": "a", "parameters": {"top_k": 2, "function_to_apply": "softmax"}},
              {"inputs": "a", "parameters": {"top_k": None, "function_to_apply": None}}]
    for body in bodies:
        validator("PredictRequest").validate(body)
    for body in ({"inputs": "a", "x": 1}, {"text": "a"}, {"inputs": 7}, {"inputs": "a", "parameters": {"k": 1}}):
        assert not validator("PredictRequest").is_valid(body), body
    plain = _predict(urls["single_label"], "a text")
    nested = httpx.post(urls["single_label"], json={"inputs": "a text", "parameters": {}}, timeout=10).json()
    for answer in (plain, nested, [plain, plain]):
        validator("PredictResponse").validate(answer)
    assert nested == [plain]


def test_a_client_that_sends_half_a_body_and_leaves(urls, caplog):
    url = urls["single_label"]
    port = int(url.rsplit(":", 1)[1])

    def failures() -> str:
        return "\n".join(line for line in httpx.get(url + "/metrics", timeout=10).text.splitlines()
                         if line.startswith("te_request_failure_total"))

    with caplog.at_level(logging.INFO):
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"inputs\": \"the fi")
            time.sleep(0.1)  # the body is being read
        deadline = time.monotonic() + 10
        while 'err="client_disconnect"} 1.0' not in failures():
            assert time.monotonic() < deadline, failures()
            time.sleep(0.05)
    assert 'err="internal"' not in failures()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert _predict(url, "still serving")
