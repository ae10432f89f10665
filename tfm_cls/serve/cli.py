"""`tfm-cls serve MODEL.onnx`: the command line of the service (docs/serving.md). It checks the
settings and the model file (one `error:` line and exit 2 for bad ones, as every tfm-cls
command), then runs uvicorn: one process, or --workers processes sharing the port (uvicorn's
supervisor replaces a worker that dies), each with its own session and inference thread."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import tempfile

from tfm_cls.errors import InferenceError
from tfm_cls.serve.settings import API_KEY_ENV, SETTINGS_ENV, ServeSettings

log = logging.getLogger("tfm_cls.serve")
_DEFAULTS = ServeSettings(model="")


def build_parser() -> argparse.ArgumentParser:
    d = _DEFAULTS
    p = argparse.ArgumentParser(prog="tfm-cls serve", description="Serve one exported .onnx classifier over HTTP "
                                "(TEI's /predict, /health, /info, /metrics; a page at /). Torch-free.")
    p.add_argument("model", help="an .onnx file written by `tfm-cls export`")
    p.add_argument("--host", default=d.host, help=f"address to bind (default {d.host}: this machine only)")
    p.add_argument("--port", type=int, default=d.port, help=f"port (default {d.port}; 0: any free one)")
    p.add_argument("--workers", type=int, default=d.workers, help="processes sharing the port (default 1)")
    p.add_argument("--threads", type=int, default=0,
                   help="onnxruntime intra-op threads per worker (default 0: the cores / --workers)")
    p.add_argument("--providers", default="CPUExecutionProvider", help="comma-separated onnxruntime providers")
    p.add_argument("--max-batch-tokens", type=int, default=d.max_batch_tokens,
                   help=f"padded tokens (rows x longest) of one micro-batch at most (default {d.max_batch_tokens})")
    p.add_argument("--max-batch-size", type=int, default=d.max_batch_size,
                   help=f"inputs of one micro-batch at most; 1 turns batching off (default {d.max_batch_size})")
    p.add_argument("--max-wait-ms", type=float, default=d.max_wait_ms,
                   help="ms the inference thread waits for a batch to fill (default 0: it takes what is queued)")
    p.add_argument("--max-concurrent-requests", type=int, default=d.max_concurrent_requests,
                   help=f"inputs in flight at once, a batch's items each counted; more get 429 "
                        f"(default {d.max_concurrent_requests})")
    p.add_argument("--max-client-batch-size", type=int, default=d.max_client_batch_size,
                   help=f"inputs in one request at most; more get 413 (default {d.max_client_batch_size})")
    p.add_argument("--payload-limit", type=int, default=d.payload_limit,
                   help=f"bytes of a request body at most; more get 413 (default {d.payload_limit})")
    p.add_argument("--request-timeout", type=float, default=d.request_timeout,
                   help=f"seconds a request may wait in the queue; then 504, not run (default {d.request_timeout:g})")
    p.add_argument("--graceful-timeout", type=float, default=d.graceful_timeout,
                   help=f"seconds in-flight requests get after SIGTERM (default {d.graceful_timeout:g})")
    p.add_argument("--auto-truncate", action="store_true",
                   help="truncate over-long inputs by the export's policy (default: 413 naming the token count)")
    p.add_argument("--api-key", default=None,
                   help=f"require `Authorization: Bearer KEY` (default: ${API_KEY_ENV} if set, else no key)")
    p.add_argument("--max-length", type=int, help="tokens per input below the model's maximum")
    p.add_argument("--no-warmup", action="store_true", help="open without running warm-up batches")
    p.add_argument("--log-level", default=d.log_level, choices=("critical", "error", "warning", "info", "debug"))
    p.add_argument("--loop", default=d.loop, choices=("auto", "asyncio", "uvloop"),
                   help="event loop (default auto: uvloop where installed, as with the serve extra)")
    p.add_argument("--http", default=d.http, choices=("auto", "h11", "httptools"),
                   help="HTTP parser (default auto: httptools where installed, as with the serve extra)")
    return p


def settings_of(args: argparse.Namespace) -> ServeSettings:
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    settings = settings_of(args)
    problems = settings.problems()
    if problems:
        print(f"error: {'; '.join(problems)}", file=sys.stderr)
        return 2
    from tfm_cls.serve.service import load_classifier

    try:  # a bad file is one line here, not a worker that fails to start
        classifier = load_classifier(settings)
    except InferenceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    import uvicorn

    common = {"host": settings.host, "port": settings.port, "log_level": settings.log_level,
              "timeout_graceful_shutdown": max(1, round(settings.graceful_timeout)), "lifespan": "on",
              "access_log": settings.log_level == "debug", "loop": settings.loop, "http": settings.http}
    if settings.workers == 1:
        from tfm_cls.serve.app import create_app
        from tfm_cls.serve.service import tune_interpreter

        tune_interpreter()
        # uvicorn drains on SIGTERM, restores the handler it found and raises the signal again:
        # found here, it ends the process with exit code 0 (a drained stop is a clean one).
        signal.signal(signal.SIGTERM, _exit_cleanly)
        uvicorn.Server(uvicorn.Config(create_app(settings, classifier), **common)).run()
        return 0
    del classifier  # each worker loads its own
    from uvicorn.supervisors import Multiprocess

    with tempfile.TemporaryDirectory(prefix="tfm_cls_serve_metrics_") as metrics_dir:
        # Set before any worker imports prometheus_client: every worker writes its values here.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        os.environ[SETTINGS_ENV] = settings.to_env()
        config = uvicorn.Config("tfm_cls.serve.app:create_app", factory=True, workers=settings.workers, **common)
        Multiprocess(config, sockets=[_listening_socket(settings.host, settings.port)]).run()
    return 0


def _listening_socket(host: str, port: int) -> socket.socket:
    """The port the workers share, made with proto=IPPROTO_TCP. uvicorn's own bind_socket leaves
    proto 0, so asyncio does not set TCP_NODELAY on the connections it accepts and every small
    answer waits for the client's delayed ACK (measured: 48 ms a request instead of 1 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise InferenceError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    sock.set_inheritable(True)
    return sock
