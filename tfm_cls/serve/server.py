"""The start-up of `tfm-cls serve MODEL.onnx` (its flags: tfm_cls/cli/serve.py; docs/serving.md). It
checks the settings, takes the address and opens the model file, in that order (an InferenceError,
one `error:` line and exit 2 for each, as every tfm-cls command), then runs uvicorn: one process, or --workers processes sharing the
port (uvicorn's supervisor replaces a worker that dies), each with its own session and inference
thread."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import socket
import tempfile

from tfm_cls.errors import InferenceError
from tfm_cls.serve.settings import API_KEY_ENV, SETTINGS_ENV, ServeSettings

log = logging.getLogger("tfm_cls.serve")


def settings_of(args: argparse.Namespace) -> ServeSettings:
    """The service's settings from the flags of `tfm-cls serve` (tfm_cls/cli/serve.py): --threads 0
    is the cores / --workers, --api-key defaults to $TFM_CLS_API_KEY."""
    workers = max(1, args.workers)
    threads = args.threads or max(1, (os.cpu_count() or 1) // workers)
    return ServeSettings(
        model=args.model, host=args.host, port=args.port, workers=args.workers, threads=threads,
        providers=tuple(p.strip() for p in args.providers.split(",") if p.strip()),
        max_batch_tokens=args.max_batch_tokens, max_batch_size=args.max_batch_size, max_wait_ms=args.max_wait_ms,
        max_concurrent_requests=args.max_concurrent_requests, max_client_batch_size=args.max_client_batch_size,
        payload_limit=args.payload_limit, request_timeout=args.request_timeout,
        graceful_timeout=args.graceful_timeout, auto_truncate=args.auto_truncate,
        api_key=args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None,
        max_length=args.max_length, warmup=not args.no_warmup, log_level=args.log_level, loop=args.loop,
        http=args.http,
    )


def _exit_cleanly(signum, frame) -> None:
    raise SystemExit(0)


def serve(settings: ServeSettings) -> int:
    """Check the settings, take the address, then open the model (each failure an InferenceError,
    one line, before any worker starts), then serve until stopped; 0 after a drained stop."""
    problems = settings.problems()
    if problems:
        raise InferenceError("; ".join(problems))
    import uvicorn  # without the serve extra: one line naming it (tfm_cls.cli.entry)

    # The address before the model: a port in use is one line at once, not a model loaded for
    # nothing and then uvicorn's own exit (code 3; once an abort in onnxruntime's threads at exit).
    sock = _listening_socket(settings.host, settings.port)
    try:
        from tfm_cls.serve.service import load_classifier

        classifier = load_classifier(settings)  # a bad file is one line here, not a worker that fails to start
        common = {"host": settings.host, "port": settings.port, "log_level": settings.log_level,
                  "timeout_graceful_shutdown": max(1, round(settings.graceful_timeout)), "lifespan": "on",
                  "access_log": settings.log_level == "debug", "loop": settings.loop, "http": settings.http}
        if settings.workers == 1:
            _serve_one(uvicorn.Config(_app(settings, classifier), **common), sock)
        else:
            del classifier  # each worker loads its own
            _serve_workers(settings, uvicorn.Config("tfm_cls.serve.app:create_app", factory=True,
                                                    workers=settings.workers, **common), sock)
    finally:
        sock.close()
    return 0


def _app(settings: ServeSettings, classifier):
    from tfm_cls.serve.app import create_app

    return create_app(settings, classifier)


def _serve_one(config, sock: socket.socket) -> None:
    """One process: this one serves on `sock`."""
    import uvicorn

    from tfm_cls.serve.service import tune_interpreter

    tune_interpreter()
    # uvicorn drains on SIGTERM, restores the handler it found and raises the signal again:
    # found here, it ends the process with exit code 0 (a drained stop is a clean one).
    signal.signal(signal.SIGTERM, _exit_cleanly)
    uvicorn.Server(config).run(sockets=[sock])


def _serve_workers(settings: ServeSettings, config, sock: socket.socket) -> None:
    """--workers N: uvicorn's supervisor runs N worker processes on the shared socket."""
    from uvicorn.supervisors import Multiprocess

    with tempfile.TemporaryDirectory(prefix="tfm_cls_serve_metrics_") as metrics_dir:
        # Set before any worker imports prometheus_client: every worker writes its values here.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        os.environ[SETTINGS_ENV] = settings.to_env()
        Multiprocess(config, sockets=[sock]).run()


def _listening_socket(host: str, port: int) -> socket.socket:
    """The listening socket (this process's, or the one the workers share), made with
    proto=IPPROTO_TCP. uvicorn's own bind_socket leaves proto 0, so asyncio does not set TCP_NODELAY on the connections it accepts and every small
    answer waits for the client's delayed ACK (measured: 48 ms a request instead of 1 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        # Listening now makes the port ours at once (a second server started meanwhile fails here);
        # connections made while the model loads wait in the backlog and are served once it is ready.
        sock.listen(2048)
    except OSError as err:
        sock.close()
        hint = " (another server? choose another --port)" if err.errno == errno.EADDRINUSE else ""
        raise InferenceError(f"cannot listen on {host}:{port}: {err.strerror or err}{hint}") from None
    sock.set_inheritable(True)
    return sock
