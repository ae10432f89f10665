"""The Starlette application of `tfm-cls serve` (docs/serving.md):

    POST /predict        TEI's shapes: every label with its score, by score (a list per input for a batch);
                         also the Inference API's task schema ({"inputs", "parameters"})
    POST /, /invocations the same as /predict (TEI's routes for a classifier, and SageMaker's)
    POST /classify       the prediction fields of `tfm-cls infer` rows, per input
    GET  /health, /ping  200 when ready; 503 while loading, warming up, draining or stuck
    GET  /info           TEI's fields plus labels, task type, digests and versions
    GET  /metrics        Prometheus text format (TEI's metric names)
    GET  /openapi.json   the OpenAPI 3.1 document of every route and body
    GET  /               a page to try the model

Every error is JSON of TEI's shape, {"error", "error_type"}; no traceback reaches a client. With
an API key every endpoint but /health, /ping, /openapi.json and the page wants `Authorization:
Bearer KEY`. No endpoint reads a file or a path a client names: the model is the one given on
the command line. A request for inference is refused before its body is read while the service
is full (tfm_cls.serve.admission)."""

from __future__ import annotations

import contextlib
import hmac
import logging
import signal
import threading
import time

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tfm_cls.runtime.session import Classifier
from tfm_cls.serve.admission import Admission
from tfm_cls.serve.api_error import NOT_FOUND, UNAUTHORIZED, VALIDATION, ApiError, error_response
from tfm_cls.serve.home_page import PAGE
from tfm_cls.serve.prometheus import CONTENT_TYPE
from tfm_cls.serve.requests import decode_json, parse_predict
from tfm_cls.serve.service import Service, Timing, drain_all, tune_interpreter
from tfm_cls.serve.settings import ServeSettings

log = logging.getLogger("tfm_cls.serve")
_PAGE_POLICY = {"Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"}


def _service(request: Request) -> Service:
    return request.app.state.service


def _authorize(request: Request, key: str | None) -> None:
    """401 unless the request carries `Authorization: Bearer <key>` (compared in constant time)."""
    if key is None:
        return
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
        raise ApiError(401, UNAUTHORIZED, "a valid API key is needed: send the header Authorization: Bearer KEY",
                       err="unauthorized", headers={"WWW-Authenticate": "Bearer"})


async def _body(request: Request, limit: int) -> bytes:
    """The request body, at most `limit` bytes (413 beyond, before it is all read)."""
    too_big = ApiError(413, VALIDATION, f"the body is larger than {limit} bytes (--payload-limit)", err="validation")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def _disconnect_waiter(request: Request):
    """A coroutine function that returns once the client has gone (the ASGI http.disconnect)."""
    async def wait() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
    return wait


def _drain_on_signals() -> None:
    """Chain drain_all before uvicorn's own SIGTERM / SIGINT handlers: /health turns 503 and new
    work is refused the moment the signal comes, while uvicorn lets in-flight requests finish
    (--graceful-timeout). Only the main thread may set handlers (a test client runs elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)

        def handler(signum, frame, previous=previous):
            drain_all()
            if callable(previous):
                previous(signum, frame)

        signal.signal(sig, handler)


async def _infer(request: Request, answer) -> Response:
    """The path /predict and /classify share; `answer(service, result, inputs, req)` shapes the answer."""
    service = _service(request)
    settings = service.settings
    timing = Timing(time.monotonic())
    service.metrics.request_count.labels(method="prediction").inc()
    admitted = 0
    try:
        _authorize(request, settings.api_key)
        service.require_ready()
        value = decode_json(await _body(request, settings.payload_limit), request.headers.get("content-type"))
        req = parse_predict(value, service.classifier.pair, settings.max_client_batch_size, service.score_function)
        service.admit(len(req.texts))
        admitted = len(req.texts)
        service.metrics.request_input_count.observe(admitted)
        inputs = await service.encode(req, timing)
        result = await service.run(inputs, timing, _disconnect_waiter(request))
        if result is None:  # the client has gone: nobody reads this
            return Response(status_code=499)
        body = answer(service, result, inputs, req)
    except ApiError as err:
        service.metrics.failure(err.err)
        return error_response(err)
    finally:
        if admitted:
            service.release(admitted)
    service.metrics.request_success.labels(method="prediction").inc()
    service.metrics.request_duration.observe(time.monotonic() - timing.start)
    return JSONResponse(body, headers=timing.headers())


async def predict(request: Request) -> Response:
    return await _infer(request, lambda service, result, inputs, req: service.predictions(result, req))


async def classify(request: Request) -> Response:
    return await _infer(request, lambda service, result, inputs, req: service.rows(result, inputs, req))


async def health(request: Request) -> Response:
    service = _service(request)
    ok, why = service.health()
    if ok:
        return JSONResponse({"status": "ok"})
    return JSONResponse({"error": why, "error_type": "Unhealthy", "status": service.state}, status_code=503)


async def info(request: Request) -> Response:
    service = _service(request)
    try:
        _authorize(request, service.settings.api_key)
    except ApiError as err:
        return error_response(err)
    return JSONResponse(service.info())


async def metrics(request: Request) -> Response:
    service = _service(request)
    try:
        _authorize(request, service.settings.api_key)
    except ApiError as err:
        return error_response(err)
    return Response(service.metrics.exposition(), media_type=CONTENT_TYPE)


async def page(request: Request) -> Response:
    return HTMLResponse(PAGE, headers=_PAGE_POLICY)


async def openapi(request: Request) -> Response:
    state = request.app.state
    if getattr(state, "openapi", None) is None:  # the routes never change: built once
        # Imported here: starlette.schemas tries pyyaml on import, which a serving process does not load.
        from tfm_cls.serve.openapi import OpenApiDocument

        state.openapi = OpenApiDocument(api_key=state.service.settings.api_key is not None).get_schema(
            request.app.routes)
    return JSONResponse(state.openapi)


async def http_error(request: Request, exc: HTTPException) -> Response:
    error_type = NOT_FOUND if exc.status_code == 404 else VALIDATION
    return JSONResponse({"error": f"{request.method} {request.url.path}: {exc.detail}", "error_type": error_type},
                        status_code=exc.status_code, headers=getattr(exc, "headers", None))


async def client_left(request: Request, exc: ClientDisconnect) -> Response:
    """A client that disconnects before its body is read: its choice, not a failure of ours."""
    log.info("client left during %s %s before sending its whole body", request.method, request.url.path)
    _service(request).metrics.failure("client_disconnect")
    return Response(status_code=499)  # nobody reads it


async def internal_error(request: Request, exc: Exception) -> Response:
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    _service(request).metrics.failure("internal")
    return JSONResponse({"error": "internal server error", "error_type": "Backend"}, status_code=500)


ROUTES = [Route("/predict", predict, methods=["POST"]), Route("/", predict, methods=["POST"]),
          Route("/invocations", predict, methods=["POST"]), Route("/classify", classify, methods=["POST"]),
          Route("/health", health, methods=["GET"]), Route("/ping", health, methods=["GET"]),
          Route("/info", info, methods=["GET"]), Route("/metrics", metrics, methods=["GET"]),
          Route("/openapi.json", openapi, methods=["GET"]), Route("/", page, methods=["GET"])]


def create_app(settings: ServeSettings | None = None, classifier: Classifier | None = None) -> Starlette:
    """The app of one worker; `settings` None: the ones the command line left in the environment
    (uvicorn's factory mode, one call per worker process)."""
    if settings is None:  # a worker process of `tfm-cls serve --workers N`
        settings = ServeSettings.from_env()
        tune_interpreter()
    service = Service(settings, classifier)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        _drain_on_signals()
        service.start()
        yield
        service.close(settings.graceful_timeout)

    app = Starlette(routes=ROUTES, lifespan=lifespan, middleware=[Middleware(Admission, service=service)],
                    exception_handlers={HTTPException: http_error, ClientDisconnect: client_left,
                                        Exception: internal_error})
    app.state.service = service
    return app
