"""Refusal before the body: a pure ASGI layer in front of the routes answers a request for
inference 429 (`Retry-After`) from its request line alone while the service has no room for one
more input, without receiving its body. Under overload most requests are refused, and a refusal
that read the body, decoded its JSON and parsed its inputs first cost nearly what an answer costs,
taking the event loop from the work it was protecting (docs/serving.md, "Overload").

A request that passes is admitted exactly (its inputs counted) after its body is parsed
(Service.admit): a batch that does not fit is refused there. A client that sends headers and then
nothing holds no slot here: the slots are taken by parsed inputs only."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from tfm_cls.serve.api_error import error_response

INFERENCE_PATHS = frozenset({"/", "/predict", "/invocations", "/classify"})


class Admission:
    """The ASGI app `app` behind the header-time admission check of `service` (a Service). The
    refusal is built once (at the check, the inputs in flight are exactly the limit) and its
    metrics' children bound once: a refusal is a comparison, two counter increments and two sends."""

    def __init__(self, app: ASGIApp, service) -> None:
        self.app = app
        self.service = service
        self.refusal = error_response(service.overloaded(service.settings.max_concurrent_requests))
        self.counted = service.metrics.request_count.labels(method="prediction")
        self.refused = service.metrics.request_failure.labels(err="overloaded")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in INFERENCE_PATHS
                and self.service.full()):
            self.counted.inc()
            self.refused.inc()
            await self.refusal(scope, receive, send)  # a plain response: it never calls receive
            return
        await self.app(scope, receive, send)
