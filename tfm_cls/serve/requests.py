"""A /predict (or /classify) body -> the texts to classify and the request's options, or the
ApiError that says precisely what is wrong (TEI's shapes, text-embeddings-inference):

    {"inputs": "text"}                       one text
    {"inputs": ["text", "second"]}           one sentence pair (a pair model); a batch of texts otherwise
    {"inputs": [["t1"], ["a", "b"], "t3"]}   a batch: each item a text, or a list of one text or a pair
    "truncate": bool, "truncation_direction": "right" | "left", "raw_scores": false, "top_k": int
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tfm_cls.serve.api_error import EMPTY, VALIDATION, ApiError

KNOWN_KEYS = ("inputs", "truncate", "truncation_direction", "raw_scores", "top_k")
DIRECTIONS = {"right": "right", "left": "left", "Right": "right", "Left": "left"}


@dataclasses.dataclass
class PredictRequest:
    """The parsed body: `texts` (with `pairs`, each text's second text, for a pair model);
    `single`: the answer is one list of labels, not a list of lists; `truncate` None: the server's
    --auto-truncate; `direction` None: the export's truncation policy."""

    texts: list[str]
    pairs: list[str] | None
    single: bool
    truncate: bool | None = None
    direction: str | None = None
    top_k: int | None = None


def _invalid(message: str, status: int = 422) -> ApiError:
    return ApiError(status, VALIDATION, message)


def decode_json(body: bytes, content_type: str | None) -> Any:
    """The JSON value of a body sent as application/json; 415 / 400 otherwise."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ApiError(415, VALIDATION, f"Content-Type must be application/json, got {content_type or 'none'!r}",
                       err="validation")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _invalid(f"the body is not valid UTF-8 (byte {err.start}: {err.reason})", 400) from None
    if not text.strip():
        raise _invalid("the body is empty; send a JSON object with \"inputs\"", 400)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise _invalid(f"the body is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}", 400) from None
    except RecursionError:
        raise _invalid("the body is not valid JSON: nested too deep", 400) from None


def _item(value: Any, where: str) -> tuple[str, str | None]:
    """One batch item: a text, [text] or [text, second] -> (text, second or None)."""
    if isinstance(value, str):
        return value, None
    if isinstance(value, list):
        if not 1 <= len(value) <= 2:
            raise _invalid(f"{where} has {len(value)} elements; an input is a text, [text] or a pair [text, second]")
        for i, part in enumerate(value):
            if not isinstance(part, str):
                raise _invalid(f"{where}[{i}] must be a string, got {_kind(part)}")
        return value[0], (value[1] if len(value) == 2 else None)
    raise _invalid(f"{where} must be a string or a list of one or two strings, got {_kind(value)}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", dict: "an object", list: "a list",
            str: "a string"}.get(type(value), type(value).__name__)


def parse_predict(value: Any, pair_model: bool, max_client_batch_size: int) -> PredictRequest:
    """The request a decoded body holds, checked against the model (pairs or single texts) and
    --max-client-batch-size; ApiError (400 empty, 413 too many, 422 malformed) otherwise."""
    if not isinstance(value, dict):
        raise _invalid(f"the body must be a JSON object with \"inputs\", got {_kind(value)}")
    unknown = sorted(set(value) - set(KNOWN_KEYS))
    if unknown:
        raise _invalid(f"unknown field(s) {unknown}; known: {list(KNOWN_KEYS)}")
    if "inputs" not in value or value["inputs"] is None:
        raise _invalid("\"inputs\" is missing: give a text, a pair [text, second] or a list of them")
    inputs = value["inputs"]
    if isinstance(inputs, str):
        items, single = [(inputs, None)], True
    elif isinstance(inputs, list):
        if not inputs:
            raise ApiError(400, EMPTY, "\"inputs\" is empty")
        flat = all(isinstance(x, str) for x in inputs)
        if flat and pair_model and len(inputs) == 2:
            items, single = [(inputs[0], inputs[1])], True  # TEI: two strings are one pair
        elif flat and pair_model:
            raise _invalid(f"\"inputs\" is a list of {len(inputs)} strings; this model classifies sentence pairs: "
                           "send [text, second], or a batch [[text, second], ...]")
        else:
            if len(inputs) > max_client_batch_size:
                raise _invalid(f"{len(inputs)} inputs in one request; at most {max_client_batch_size} "
                               "(--max-client-batch-size)", 413)
            items, single = [_item(x, f"inputs[{i}]") for i, x in enumerate(inputs)], False
    else:
        raise _invalid(f"\"inputs\" must be a string or a list, got {_kind(inputs)}")
    for i, (text, second) in enumerate(items):
        where = "the input" if single else f"inputs[{i}]"
        if not text.strip() or (second is not None and not second.strip()):
            raise ApiError(400, EMPTY, f"{where} is empty (or blank): there is nothing to classify")
        if pair_model and second is None:
            raise _invalid(f"{where} is one text; this model classifies sentence pairs: give [text, second]")
        if not pair_model and second is not None:
            raise _invalid(f"{where} is a pair; this model classifies single texts")
    truncate = value.get("truncate")
    if truncate is not None and not isinstance(truncate, bool):
        raise _invalid(f"\"truncate\" must be true or false, got {_kind(truncate)}")
    direction = value.get("truncation_direction")
    if direction is not None and (not isinstance(direction, str) or direction not in DIRECTIONS):
        raise _invalid(f"\"truncation_direction\" must be \"right\" or \"left\", got {direction!r}")
    raw = value.get("raw_scores", False)
    if raw not in (False, None):
        raise _invalid("\"raw_scores\": true is not supported; scores are the model's probabilities "
                       "(multi-label: per-label sigmoids, regression: the value)")
    top_k = value.get("top_k")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise _invalid(f"\"top_k\" must be a positive integer, got {top_k!r}")
    texts = [t for t, _ in items]
    pairs = [p for _, p in items] if pair_model else None
    return PredictRequest(texts, pairs, single, truncate, None if direction is None else DIRECTIONS[direction], top_k)
