"""A /predict (or /classify) body -> the texts to classify and the request's options, or the
ApiError that says precisely what is wrong. TEI's shapes (text-embeddings-inference):

    {"inputs": "text"}                       one text
    {"inputs": ["text", "second"]}           one sentence pair (a pair model); a batch of texts otherwise
    {"inputs": [["t1"], ["a", "b"], "t3"]}   a batch: each item a text, or a list of one text or a pair
    "truncate": bool, "truncation_direction": "right" | "left", "raw_scores": false, "top_k": int

and the Inference API's task schema, which `huggingface_hub.InferenceClient.text_classification`
sends: {"inputs": ..., "parameters": {"top_k": int, "function_to_apply": "softmax" | "sigmoid" | "none"}}.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from tfm_cls.serve.api_error import EMPTY, VALIDATION, ApiError

KNOWN_KEYS = ("inputs", "truncate", "truncation_direction", "raw_scores", "top_k", "parameters")
PARAMETER_KEYS = ("top_k", "function_to_apply")
DIRECTIONS = {"right": "right", "left": "left", "Right": "right", "Left": "left"}
# The Inference API's `function_to_apply` that gives each head's scores: the one a client may ask for.
SCORE_FUNCTIONS = {"single_label": "softmax", "multi_label": "sigmoid", "regression": "none"}
_WHAT_SCORES_ARE = {"softmax": "softmax probabilities (a single-label model)",
                    "sigmoid": "per-label sigmoids (a multi-label model)", "none": "the values (a regression model)"}


@dataclasses.dataclass
class PredictRequest:
    """The parsed body: `texts` (with `pairs`, each text's second text, for a pair model);
    `single`: one input, answered as one list of labels unless `list_per_input`; `truncate`
    None: the server's --auto-truncate; `direction` None: the export's truncation policy;
    `list_per_input`: the body used the Inference API's task schema ("parameters"), whose clients
    read a list per input even for one text ([[...]])."""

    texts: list[str]
    pairs: list[str] | None
    single: bool
    truncate: bool | None = None
    direction: str | None = None
    top_k: int | None = None
    list_per_input: bool = False


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


def _inputs(inputs: Any, pair_model: bool, max_client_batch_size: int) -> tuple[list[tuple[str, str | None]], bool]:
    """`inputs` -> its (text, second or None) items and whether it was one input."""
    if inputs is None:
        raise _invalid("\"inputs\" is missing: give a text, a pair [text, second] or a list of them")
    if isinstance(inputs, str):
        return [(inputs, None)], True
    if not isinstance(inputs, list):
        raise _invalid(f"\"inputs\" must be a string or a list, got {_kind(inputs)}")
    if not inputs:
        raise ApiError(400, EMPTY, "\"inputs\" is empty")
    flat = all(isinstance(x, str) for x in inputs)
    if flat and pair_model and len(inputs) == 2:
        return [(inputs[0], inputs[1])], True  # TEI: two strings are one pair
    if flat and pair_model:
        raise _invalid(f"\"inputs\" is a list of {len(inputs)} strings; this model classifies sentence pairs: "
                       "send [text, second], or a batch [[text, second], ...]")
    if len(inputs) > max_client_batch_size:
        raise _invalid(f"{len(inputs)} inputs in one request; at most {max_client_batch_size} "
                       "(--max-client-batch-size)", 413)
    return [_item(x, f"inputs[{i}]") for i, x in enumerate(inputs)], False


def _check_items(items: list[tuple[str, str | None]], single: bool, pair_model: bool) -> None:
    for i, (text, second) in enumerate(items):
        where = "the input" if single else f"inputs[{i}]"
        if not text.strip() or (second is not None and not second.strip()):
            raise ApiError(400, EMPTY, f"{where} is empty (or blank): there is nothing to classify")
        if pair_model and second is None:
            raise _invalid(f"{where} is one text; this model classifies sentence pairs: give [text, second]")
        if not pair_model and second is not None:
            raise _invalid(f"{where} is a pair; this model classifies single texts")


def _top_k(value: Any, where: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise _invalid(f"{where} must be a positive integer, got {value!r}")
    return value


def _parameters(parameters: Any, score_function: str) -> int | None:
    """The Inference API's "parameters" -> its top_k. `function_to_apply` must name the function
    that gives this model's scores (`score_function`): the export answers those scores only."""
    if not isinstance(parameters, dict):
        raise _invalid(f"\"parameters\" must be an object, got {_kind(parameters)}")
    unknown = sorted(set(parameters) - set(PARAMETER_KEYS))
    if unknown:
        raise _invalid(f"unknown parameter(s) {unknown}; known: {list(PARAMETER_KEYS)}")
    function = parameters.get("function_to_apply")
    if function is not None and function not in _WHAT_SCORES_ARE:
        raise _invalid(f"\"parameters.function_to_apply\" must be one of {list(_WHAT_SCORES_ARE)}, got {function!r}")
    if function is not None and function != score_function:
        raise _invalid(f"\"parameters.function_to_apply\": {function!r} is not available: this model's scores are "
                       f"{_WHAT_SCORES_ARE[score_function]}, computed inside the exported graph; send "
                       f"{score_function!r} or leave it out")
    return _top_k(parameters.get("top_k"), "\"parameters.top_k\"")


def parse_predict(value: Any, pair_model: bool, max_client_batch_size: int,
                  score_function: str = "softmax") -> PredictRequest:
    """The request a decoded body holds, checked against the model (pairs or single texts, the
    function its scores come from) and --max-client-batch-size; ApiError (400 empty, 413 too
    many, 422 malformed) otherwise."""
    if not isinstance(value, dict):
        raise _invalid(f"the body must be a JSON object with \"inputs\", got {_kind(value)}")
    unknown = sorted(set(value) - set(KNOWN_KEYS))
    if unknown:
        raise _invalid(f"unknown field(s) {unknown}; known: {list(KNOWN_KEYS)}")
    items, single = _inputs(value.get("inputs"), pair_model, max_client_batch_size)
    _check_items(items, single, pair_model)
    truncate = value.get("truncate")
    if truncate is not None and not isinstance(truncate, bool):
        raise _invalid(f"\"truncate\" must be true or false, got {_kind(truncate)}")
    direction = value.get("truncation_direction")
    if direction is not None and (not isinstance(direction, str) or direction not in DIRECTIONS):
        raise _invalid(f"\"truncation_direction\" must be \"right\" or \"left\", got {direction!r}")
    if value.get("raw_scores", False) not in (False, None):
        raise _invalid("\"raw_scores\": true is not supported; scores are the model's probabilities "
                       "(multi-label: per-label sigmoids, regression: the value)")
    top_k = _top_k(value.get("top_k"), "\"top_k\"")
    task_schema = "parameters" in value
    if task_schema:
        given = _parameters({} if value["parameters"] is None else value["parameters"], score_function)
        if given is not None and top_k is not None:
            raise _invalid("\"top_k\" is given twice (at the top and in \"parameters\"); give it once")
        top_k = given or top_k
    texts = [t for t, _ in items]
    pairs = [p for _, p in items] if pair_model else None
    return PredictRequest(texts, pairs, single, truncate, None if direction is None else DIRECTIONS[direction], top_k,
                          list_per_input=task_schema)
