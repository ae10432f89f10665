"""The HTTP API in process (Starlette's TestClient): TEI's /predict shapes for every kind of
model, /classify's infer rows, /health, /info, /metrics, timing headers, top_k, the API key."""

from __future__ import annotations

import pytest
from kits import serve_kit as K
from kits.serve_kit import open_client


def test_a_single_text_gets_every_label_sorted_by_score(client):
    r = client.post("/predict", json={"inputs": K.TEXTS[2]})
    assert r.status_code == 200
    entries = r.json()
    assert sorted(e["label"] for e in entries) == sorted(K.LABELS)
    scores = [e["score"] for e in entries]
    assert scores == sorted(scores, reverse=True) and sum(scores) == pytest.approx(1.0, abs=1e-5)


def test_a_batch_gets_a_list_per_input_in_order(client):
    one = [client.post("/predict", json={"inputs": t}).json() for t in K.TEXTS[:3]]
    batch = client.post("/predict", json={"inputs": [[t] for t in K.TEXTS[:3]]}).json()
    flat = client.post("/predict", json={"inputs": K.TEXTS[:3]}).json()
    for a, b, c in zip(one, batch, flat):
        assert [e["label"] for e in a] == [e["label"] for e in b] == [e["label"] for e in c]
        assert [e["score"] for e in a] == pytest.approx([e["score"] for e in b], abs=1e-6)


def test_top_k_keeps_the_best(client):
    entries = client.post("/predict", json={"inputs": K.TEXTS[2], "top_k": 1}).json()
    full = client.post("/predict", json={"inputs": K.TEXTS[2]}).json()
    assert entries == full[:1]


def test_teis_other_routes_answer_as_predict_and_health(client):
    body = {"inputs": [K.TEXTS[1], K.TEXTS[2]], "top_k": 2}
    predicted = client.post("/predict", json=body).json()
    for path in ("/", "/invocations"):  # TEI's route for a classifier, SageMaker's
        assert client.post(path, json=body).json() == predicted, path
    assert client.get("/ping").json() == client.get("/health").json() == {"status": "ok"}
    assert client.get("/").headers["content-type"].startswith("text/html")  # the page stays at GET /


def test_the_inference_apis_parameters(clients):
    c = clients["single_label"]
    plain = c.post("/predict", json={"inputs": K.TEXTS[2]}).json()
    assert c.post("/", json={"inputs": K.TEXTS[2], "parameters": {}}).json() == [plain]  # a list per input
    top = c.post("/", json={"inputs": K.TEXTS[2], "parameters": {"top_k": 1, "function_to_apply": "softmax"}})
    assert top.json() == [plain[:1]]
    batch = c.post("/", json={"inputs": K.TEXTS[1:3], "parameters": {"top_k": 2}}).json()
    assert len(batch) == 2 and [e["label"] for e in batch[1]] == [e["label"] for e in plain[:2]]
    assert [e["score"] for e in batch[1]] == pytest.approx([e["score"] for e in plain[:2]], abs=1e-6)  # padding
    ml = clients["multi_label"]
    scores = ml.post("/predict", json={"inputs": K.TEXTS[4]}).json()
    assert ml.post("/", json={"inputs": K.TEXTS[4], "parameters": {"function_to_apply": "sigmoid"}}).json() == [scores]


def test_pairs_are_two_element_inputs(clients):
    c = clients["pair"]
    single = c.post("/predict", json={"inputs": [K.TEXTS[1], K.TEXTS[2]]}).json()
    batch = c.post("/predict", json={"inputs": [[K.TEXTS[1], K.TEXTS[2]], [K.TEXTS[2], K.TEXTS[3]]]}).json()
    assert [e["label"] for e in single] == [e["label"] for e in batch[0]] and len(batch) == 2
    swapped = c.post("/predict", json={"inputs": [K.TEXTS[2], K.TEXTS[1]]}).json()
    assert swapped != single  # the order of a pair's texts matters (token types)


def test_multi_label_scores_are_per_label_sigmoids_with_the_exports_thresholds(clients):
    entries = clients["multi_label"].post("/predict", json={"inputs": K.TEXTS[4]}).json()
    assert len(entries) == len(K.ML_LABELS) and all("selected" in e for e in entries)
    assert sum(e["score"] for e in entries) != pytest.approx(1.0)  # not a softmax
    thresholds = dict(zip(K.ML_LABELS, [0.5, 0.45, 0.55, 0.5]))
    picked = [e["label"] for e in entries if e["selected"]]
    over = [e["label"] for e in entries if e["score"] >= thresholds[e["label"]]]
    assert picked == (over or [entries[0]["label"]])


def test_classify_answers_the_rows_of_tfm_cls_infer(clients):
    rows = clients["chunked"].post("/classify", json={"inputs": [K.TEXTS[30], K.TEXTS[1]]}).json()
    assert [r["index"] for r in rows] == [0, 1]
    assert set(rows[0]) == {"index", "label", "score", "probabilities", "truncated", "windows"}
    assert rows[0]["windows"] > 1 and rows[1]["windows"] == 1


def test_timing_headers(client):
    r = client.post("/predict", json={"inputs": "the film"})
    for name in ("x-total-time", "x-tokenization-time", "x-queue-time", "x-inference-time"):
        assert float(r.headers[name]) >= 0
    assert float(r.headers["x-total-time"]) >= float(r.headers["x-inference-time"])
    assert r.headers["x-batch-size"] == "1"


def test_info_has_teis_fields_and_ours(clients, models):
    info = clients["multi_label"].get("/info").json()
    for key in ("model_id", "model_sha", "model_dtype", "model_type", "max_concurrent_requests", "max_input_length",
                "max_batch_tokens", "max_client_batch_size", "auto_truncate", "version"):
        assert key in info
    assert info["labels"] == K.ML_LABELS and info["task"] == "multi_label" and info["pair"] is False
    assert info["model_type"]["classifier"]["id2label"]["0"] == "red"
    from tfm_cls.io import file_sha256

    assert info["model_sha"] == file_sha256(models["multi_label"]) and info["tfm_cls_version"]
    assert "api_key" not in str(info)


def test_health_and_metrics_under_teis_names(client):
    assert client.get("/health").json() == {"status": "ok"}
    client.post("/predict", json={"inputs": "a text"})
    client.post("/predict", json={"inputs": ""})
    text = client.get("/metrics").text
    for name in ("te_request_count_total", "te_request_success_total", "te_request_failure_total{err=\"empty\"}",
                 "te_request_duration_bucket", "te_request_queue_duration_bucket", "te_request_inference_duration_sum",
                 "te_request_tokenization_duration_count", "te_batch_next_size_sum", "te_batch_next_size_count",
                 "te_queue_size"):
        assert name in text, name


def test_the_page_is_self_contained(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "http://" not in r.text and "https://" not in r.text  # no external assets
    assert 'id="top-label"' in r.text


def test_unknown_routes_and_methods_answer_json(client):
    r = client.get("/nope")
    assert r.status_code == 404 and r.json()["error_type"] == "NotFound"
    r = client.get("/predict")
    assert r.status_code == 405 and "error" in r.json()


def test_an_api_key_guards_everything_but_health_and_the_page(models):
    c = open_client(models["single_label"], api_key="s3cret")
    try:
        assert c.get("/health").status_code == 200 and c.get("/").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                        {"Authorization": "Basic s3cret"}):
            r = c.post("/predict", json={"inputs": "a"}, headers=headers)
            assert r.status_code == 401 and r.json()["error_type"] == "Unauthorized", headers
            assert "s3cret" not in r.text
            assert c.get("/info", headers=headers).status_code == 401
            assert c.get("/metrics", headers=headers).status_code == 401
        ok = {"Authorization": "Bearer s3cret"}
        assert c.post("/predict", json={"inputs": "a"}, headers=ok).status_code == 200
        assert c.get("/info", headers=ok).status_code == 200
    finally:
        c.__exit__(None, None, None)


def test_auto_truncate_and_the_per_request_flag(models, clients):
    long = " ".join(["film"] * 200)
    r = clients["single_label"].post("/predict", json={"inputs": long})
    assert r.status_code == 413 and "tokens" in r.json()["error"] and str(K.MAX_LENGTH) in r.json()["error"]
    assert clients["single_label"].post("/predict", json={"inputs": long, "truncate": True}).status_code == 200
    head = clients["single_label"].post("/predict", json={"inputs": long + " plot drags", "truncate": True,
                                                          "truncation_direction": "right"}).json()
    tail = clients["single_label"].post("/predict", json={"inputs": "plot drags " + long, "truncate": True,
                                                          "truncation_direction": "left"}).json()
    film = clients["single_label"].post("/predict", json={"inputs": long, "truncate": True}).json()
    for kept in (head, tail):  # right keeps the head, left the tail: both only "film"s here
        assert [e["label"] for e in kept] == [e["label"] for e in film]
        assert [e["score"] for e in kept] == pytest.approx([e["score"] for e in film], abs=1e-6)
    c = open_client(models["single_label"], auto_truncate=True)
    try:
        assert c.post("/predict", json={"inputs": long}).status_code == 200
        assert c.post("/predict", json={"inputs": long, "truncate": False}).status_code == 413
    finally:
        c.__exit__(None, None, None)
    # a chunked model reads every token: nothing is too long
    assert clients["chunked"].post("/predict", json={"inputs": long}).status_code == 200
