"""Bad input, one test per case of the issue: each answer is JSON of TEI's shape with a specific
status and message, and the server goes on serving; then a seeded fuzz of random bodies (no 500)."""

from __future__ import annotations

import json
import random

import pytest


def _bad(r, status: int, error_type: str, *words: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"error", "error_type"} and body["error_type"] == error_type, body
    assert "Traceback" not in body["error"]
    for word in words:
        assert word in body["error"], (word, body["error"])
    return body


@pytest.fixture
def client(clients):
    c = clients["single_label"]
    yield c
    assert c.post("/predict", json={"inputs": "still serving"}).status_code == 200  # after every bad request


def _post(client, body: bytes | str, content_type: str = "application/json"):
    return client.post("/predict", content=body, headers={"Content-Type": content_type})


def test_invalid_json(client):
    _bad(_post(client, '{"inputs": "a",'), 400, "Validation", "not valid JSON", "line 1")


def test_wrong_content_type(client):
    _bad(_post(client, '{"inputs": "a"}', "text/plain"), 415, "Validation", "application/json", "text/plain")
    _bad(client.post("/predict", content=b'{"inputs": "a"}'), 415, "Validation", "Content-Type")


def test_inputs_missing(client):
    _bad(client.post("/predict", json={"text": "a"}), 422, "Validation", "unknown field", "text")
    _bad(client.post("/predict", json={}), 422, "Validation", "\"inputs\" is missing")


def test_inputs_empty(client):
    _bad(client.post("/predict", json={"inputs": []}), 400, "Empty", "empty")


def test_inputs_null(client):
    _bad(client.post("/predict", json={"inputs": None}), 422, "Validation", "missing")


def test_inputs_a_number(client):
    _bad(client.post("/predict", json={"inputs": 7}), 422, "Validation", "a string or a list", "a number")


def test_inputs_nested_three_deep(client):
    _bad(client.post("/predict", json={"inputs": [[["a"]]]}), 422, "Validation", "inputs[0][0]", "a list")


def test_an_empty_string(client):
    _bad(client.post("/predict", json={"inputs": ""}), 400, "Empty", "empty")
    _bad(client.post("/predict", json={"inputs": ["a", "  "]}), 400, "Empty", "inputs[1]")


def test_invalid_utf8_bytes(client):
    _bad(_post(client, b'{"inputs": "caf\xe9 \xff"}'), 400, "Validation", "UTF-8", "byte")


def test_a_10_mb_body(client):
    body = json.dumps({"inputs": "a " * (5 * 2**20)})
    _bad(_post(client, body), 413, "Validation", "larger than", "--payload-limit")


def test_10000_inputs(client):
    _bad(client.post("/predict", json={"inputs": ["a text"] * 10_000}), 413, "Validation", "10000 inputs",
         "--max-client-batch-size")


def test_an_input_of_a_million_characters(client):
    body = _bad(client.post("/predict", json={"inputs": "word " * 200_000}), 413, "Validation", "tokens",
                "at most 24", "truncate")
    assert int(body["error"].split(" has ")[1].split()[0]) > 100_000  # the real count


def test_a_pair_with_three_elements(clients):
    _bad(clients["pair"].post("/predict", json={"inputs": [["a", "b", "c"]]}), 422, "Validation", "3 elements")
    _bad(clients["pair"].post("/predict", json={"inputs": ["a", "b", "c"]}), 422, "Validation", "sentence pairs")


def test_a_pair_for_a_single_text_model_and_a_text_for_a_pair_model(clients):
    _bad(clients["single_label"].post("/predict", json={"inputs": [["a", "b"]]}), 422, "Validation", "single texts")
    _bad(clients["pair"].post("/predict", json={"inputs": "a"}), 422, "Validation", "sentence pairs")


def test_bad_options(client):
    _bad(client.post("/predict", json={"inputs": "a", "top_k": 0}), 422, "Validation", "top_k")
    _bad(client.post("/predict", json={"inputs": "a", "truncate": "yes"}), 422, "Validation", "truncate")
    _bad(client.post("/predict", json={"inputs": "a", "truncation_direction": "up"}), 422, "Validation", "right")
    _bad(client.post("/predict", json={"inputs": "a", "raw_scores": True}), 422, "Validation", "raw_scores")


def test_bad_parameters(clients, client):
    def post(c, parameters, **extra):
        return c.post("/", json={"inputs": "a", "parameters": parameters, **extra})

    _bad(post(client, {"function_to_apply": "sigmoid"}), 422, "Validation", "'sigmoid' is not available",
         "softmax probabilities", "send 'softmax'")
    _bad(post(client, {"function_to_apply": "none"}), 422, "Validation", "'none' is not available")
    _bad(post(clients["multi_label"], {"function_to_apply": "softmax"}), 422, "Validation", "per-label sigmoids")
    _bad(post(client, {"function_to_apply": "tanh"}), 422, "Validation", "one of", "'tanh'")
    _bad(post(client, {"top_k": 0}), 422, "Validation", "parameters.top_k")
    _bad(post(client, {"top_k": 1}, top_k=1), 422, "Validation", "twice")
    _bad(post(client, {"temperature": 2}), 422, "Validation", "unknown parameter", "temperature")
    _bad(post(client, ["top_k"]), 422, "Validation", "\"parameters\" must be an object", "a list")


def test_not_an_object(client):
    _bad(client.post("/predict", json=["a"]), 422, "Validation", "JSON object")
    _bad(_post(client, b""), 400, "Validation", "empty")


def test_a_wrong_api_key(models):
    from kits.serve_kit import open_client

    c = open_client(models["single_label"], api_key="k")
    try:
        _bad(c.post("/predict", json={"inputs": "a"}, headers={"Authorization": "Bearer nope"}), 401,
             "Unauthorized", "API key")
    finally:
        c.__exit__(None, None, None)


def _random_json(rng: random.Random, depth: int = 0):
    kind = rng.choice(["str", "int", "float", "null", "bool", "list", "dict"] if depth < 4 else ["str", "int"])
    if kind == "str":
        return "".join(rng.choice("ab é\u2603\x00\"\\\n\ud7ff") for _ in range(rng.randint(0, 12)))
    if kind == "int":
        return rng.choice([0, -1, 1, 2, 10**30, rng.randint(-5, 50)])
    if kind == "float":
        return rng.choice([0.5, -1e308, 1e-9])
    if kind == "null":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "list":
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["inputs", "truncate", "truncation_direction", "raw_scores", "top_k", "parameters", "function_to_apply",
            "x"]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _random_body(rng: random.Random) -> tuple[bytes, str]:
    roll = rng.random()
    if roll < 0.55:
        body = {"inputs": _random_json(rng)}
        for key in rng.sample(["truncate", "truncation_direction", "top_k", "raw_scores", "parameters"],
                              rng.randint(0, 2)):
            body[key] = _random_json(rng, 3)
        data = json.dumps(body).encode()
    elif roll < 0.75:
        data = json.dumps(_random_json(rng)).encode()
    elif roll < 0.9:
        good = json.dumps({"inputs": ["a text", ["b", "c"]]}).encode()
        data = good[: rng.randint(0, len(good))]  # cut short
    else:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
    content_type = rng.choice(["application/json"] * 8 + ["text/plain", "application/json; charset=utf-8"])
    return data, content_type


@pytest.mark.parametrize("kind, bodies", [("single_label", 2000), ("pair", 500)])
def test_a_seeded_fuzz_of_random_bodies_gets_no_500(clients, kind, bodies):
    rng = random.Random(24)
    c = clients[kind]
    statuses = {}
    for _ in range(bodies):
        data, content_type = _random_body(rng)
        r = c.post("/predict", content=data, headers={"Content-Type": content_type})
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code < 500, (data, r.text)
        if r.status_code != 200:
            assert set(r.json()) == {"error", "error_type"}
    assert len(statuses) >= 3  # the fuzz reaches several answers
    assert c.get("/health").status_code == 200
