"""The one error a client sees: a status, TEI's `error_type` and a message, as JSON."""

from __future__ import annotations

from starlette.responses import JSONResponse

# TEI's error types (text-embeddings-inference, router/src/http/types.rs), plus ours for what TEI lacks.
EMPTY, VALIDATION, TOKENIZER, BACKEND, OVERLOADED, UNHEALTHY = (
    "Empty", "Validation", "Tokenizer", "Backend", "Overloaded", "Unhealthy")
TIMEOUT, UNAUTHORIZED, NOT_FOUND = "Timeout", "Unauthorized", "NotFound"


class ApiError(Exception):
    """A request that cannot be answered: `status` (400, 401, 413, 415, 422, 424, 429, 503, 504),
    TEI's `error_type`, a message saying what was wrong; `err` is the label of
    te_request_failure{err} (default: the error type, lower case)."""

    def __init__(self, status: int, error_type: str, message: str, err: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message
        self.err = err or error_type.lower()
        self.headers = headers or {}

    def body(self) -> dict[str, str]:
        return {"error": self.message, "error_type": self.error_type}


def error_response(err: ApiError) -> JSONResponse:
    """The answer to a request that failed with `err`."""
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)
