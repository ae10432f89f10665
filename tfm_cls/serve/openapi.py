"""The OpenAPI 3.1 document of `tfm-cls serve` (GET /openapi.json), so clients can be generated
from it. Starlette's schema generator walks the app's routes (every path and method, however
many routes share an endpoint); the operation of each endpoint and the body schemas are
declared here, as data: no YAML docstrings, because the torch-free install has no pyyaml (and
this module is imported on the first request for the document only: starlette.schemas tries to
import pyyaml)."""

from __future__ import annotations

import copy
from typing import Any

from starlette.routing import BaseRoute
from starlette.schemas import BaseSchemaGenerator

from tfm_cls import __version__

_REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF + name}


def _json(schema: dict[str, Any], description: str, headers: dict | None = None) -> dict[str, Any]:
    out = {"description": description, "content": {"application/json": {"schema": schema}}}
    return {**out, "headers": headers} if headers else out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_ITEM = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}]}
SCHEMAS: dict[str, Any] = {
    "Inputs": {
        "description": "A text; a pair [text, second] (a sentence-pair model); or a batch: a list of texts, "
                       "or of [text] / [text, second] items (at most --max-client-batch-size).",
        "anyOf": [{"type": "string"}, {"type": "array", "items": _ITEM, "minItems": 1}]},
    "Parameters": {
        "description": "The Inference API's text-classification parameters (huggingface_hub.InferenceClient "
                       "sends them). A body with \"parameters\" is answered with a list per input, also for one text.",
        "type": "object", "additionalProperties": False,
        "properties": {
            "top_k": _nullable({"type": "integer", "minimum": 1}),
            "function_to_apply": _nullable({
                "type": "string", "enum": ["softmax", "sigmoid", "none"],
                "description": "Only the function the model's scores come from: softmax (single-label), "
                               "sigmoid (multi-label), none (regression); another is refused (422)."})}},
    "PredictRequest": {
        "type": "object", "additionalProperties": False, "required": ["inputs"],
        "properties": {
            "inputs": _ref("Inputs"),
            "truncate": _nullable({"type": "boolean", "description": "default: the server's --auto-truncate"}),
            "truncation_direction": _nullable({"type": "string", "enum": ["right", "left", "Right", "Left"],
                                               "description": "right keeps the head, left the tail; default: "
                                                              "the export's policy"}),
            "raw_scores": _nullable({"type": "boolean", "enum": [False]}),
            "top_k": _nullable({"type": "integer", "minimum": 1, "description": "keep the k best labels"}),
            "parameters": _nullable(_ref("Parameters"))}},
    "Prediction": {
        "type": "object", "required": ["label", "score"],
        "properties": {"label": {"type": "string"}, "score": {"type": "number"},
                       "selected": {"type": "boolean", "description": "multi-label: the label passes its threshold"}}},
    "PredictResponse": {
        "description": "One input: its labels by score (a list per input when the body had \"parameters\"); "
                       "a batch: a list per input.",
        "anyOf": [{"type": "array", "items": _ref("Prediction")},
                  {"type": "array", "items": {"type": "array", "items": _ref("Prediction")}}]},
    "ClassifyRow": {
        "description": "The prediction fields of a `tfm-cls infer` row: single-label label / score / probabilities, "
                       "multi-label labels / scores / probabilities, regression value.",
        "type": "object", "required": ["index", "truncated"],
        "properties": {"index": {"type": "integer"}, "label": {"type": "string"}, "score": {"type": "number"},
                       "labels": {"type": "array", "items": {"type": "string"}},
                       "scores": {"type": "array", "items": {"type": "number"}},
                       "probabilities": {"type": "object", "additionalProperties": {"type": "number"}},
                       "value": {"type": "number"}, "truncated": {"type": "boolean"},
                       "windows": {"type": "integer", "description": "chunked models: the windows read"}}},
    "ErrorResponse": {
        "type": "object", "required": ["error", "error_type"],
        "properties": {"error": {"type": "string"},
                       "error_type": {"type": "string", "enum": ["Empty", "Validation", "Tokenizer", "Backend",
                                                                 "Overloaded", "Unhealthy", "Timeout",
                                                                 "Unauthorized", "NotFound"]},
                       "status": {"type": "string", "description": "/health: the service's state"}}},
    "Health": {"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}}},
    "Info": {
        "description": "TEI's fields, plus the labels, the task type, digests, versions and the serving settings.",
        "type": "object", "additionalProperties": True,
        "properties": {"model_id": {"type": "string"}, "model_sha": _nullable({"type": "string"}),
                       "max_input_length": _nullable({"type": "integer"}),
                       "max_client_batch_size": {"type": "integer"}, "max_concurrent_requests": {"type": "integer"},
                       "labels": {"type": "array", "items": {"type": "string"}},
                       "task": {"type": "string", "enum": ["single_label", "multi_label", "regression"]},
                       "pair": {"type": "boolean"}, "version": {"type": "string"}}},
}

_ERROR = _ref("ErrorResponse")
_MS = {"schema": {"type": "string"}, "description": "milliseconds"}
_TIMING = {"x-total-time": _MS, "x-tokenization-time": _MS, "x-queue-time": _MS, "x-inference-time": _MS,
           "x-batch-size": {"schema": {"type": "string"}, "description": "inputs of the micro-batch it ran in"}}
_INFERENCE_ERRORS = {
    "400": _json(_ERROR, "empty input, invalid JSON or UTF-8"), "401": _json(_ERROR, "missing or wrong API key"),
    "413": _json(_ERROR, "too many inputs, body too large, or an input too long without truncation"),
    "415": _json(_ERROR, "not application/json"), "422": _json(_ERROR, "malformed body or untokenizable input"),
    "424": _json(_ERROR, "the model failed on the batch"),
    "429": _json(_ERROR, "over --max-concurrent-requests (refused before the body is read)",
                 {"Retry-After": {"schema": {"type": "string"}}}),
    "503": _json(_ERROR, "loading, warming up or draining"), "504": _json(_ERROR, "queue deadline passed; not run")}
_BODY = {"required": True, "content": {"application/json": {"schema": _ref("PredictRequest")}}}
_HEALTH = {"summary": "200 when the model is loaded, warmed up and its inference thread progresses",
           "responses": {"200": _json(_ref("Health"), "ready"), "503": _json(_ERROR, "not ready, with the reason")}}
# Operations by endpoint function name (tfm_cls.serve.app); `keyed`: needs the API key when one is set.
OPERATIONS: dict[str, tuple[dict[str, Any], bool]] = {
    "predict": ({"summary": "Every label with its score, highest first (TEI's /predict)", "requestBody": _BODY,
                 "responses": {"200": _json(_ref("PredictResponse"), "predictions", _TIMING), **_INFERENCE_ERRORS}},
                True),
    "classify": ({"summary": "The prediction fields of `tfm-cls infer` rows, per input", "requestBody": _BODY,
                  "responses": {"200": _json({"type": "array", "items": _ref("ClassifyRow")}, "rows", _TIMING),
                                **_INFERENCE_ERRORS}}, True),
    "health": (_HEALTH, False),
    "info": ({"summary": "The model and the serving settings",
              "responses": {"200": _json(_ref("Info"), "info"), "401": _json(_ERROR, "wrong API key")}}, True),
    "metrics": ({"summary": "Prometheus text format, TEI's metric names",
                 "responses": {"200": {"description": "metrics",
                                       "content": {"text/plain": {"schema": {"type": "string"}}}},
                               "401": _json(_ERROR, "wrong API key")}}, True),
    "page": ({"summary": "A page to try the model (HTML, no external assets)",
              "responses": {"200": {"description": "the page", "content": {"text/html": {"schema": {"type": "string"}}}}}},
             False),
    "openapi": ({"summary": "This document", "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1")}}, False),
}


class OpenApiDocument(BaseSchemaGenerator):
    """The document of an app's routes; `api_key`: the keyed operations declare bearer auth."""

    def __init__(self, api_key: bool):
        self.api_key = api_key

    def get_schema(self, routes: list[BaseRoute]) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "openapi": "3.1.0",
            "info": {"title": "tfm-cls serve", "version": __version__,
                     "description": "Text classification over one exported .onnx model; TEI's /predict shapes "
                                    "and the Inference API's task schema (docs/serving.md)."},
            "paths": {}, "components": {"schemas": copy.deepcopy(SCHEMAS)}}
        if self.api_key:
            doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for endpoint in self.get_endpoints(routes):
            operation, keyed = OPERATIONS[endpoint.func.__name__]
            name = endpoint.path.strip("/").replace(".", "_").replace("/", "_") or "root"
            operation = {**copy.deepcopy(operation), "operationId": f"{endpoint.http_method}_{name}"}
            if keyed and self.api_key:
                operation["security"] = [{"bearer": []}]
            doc["paths"].setdefault(endpoint.path, {})[endpoint.http_method] = operation
        return doc
