"""`tfm-cls serve MODEL.onnx`: an HTTP service for one exported model, torch-free (needs
tfm-cls[serve]). The flags are parsed here; the start-up is tfm_cls.serve.server (docs/serving.md)."""

from __future__ import annotations

import argparse

from tfm_cls.serve.settings import API_KEY_ENV, ServeSettings

DESCRIPTION = ("Serve one exported .onnx classifier over HTTP: TEI's /predict (also POST / and /invocations, and "
               "the Inference API's body that huggingface_hub.InferenceClient sends), /health (/ping), /info, "
               "/metrics, /openapi.json, and a page at GET /. Torch-free.")


def add_parser(subparsers) -> None:
    d = ServeSettings(model="")  # the defaults of every knob
    p = subparsers.add_parser(
        "serve", help="an HTTP service for one exported .onnx file, torch-free (needs tfm-cls[serve]; "
                      "its flags: tfm-cls serve --help)",
        description=DESCRIPTION)
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
                   help=f"inputs in flight at once, a batch's items each counted; more get 429, from the headers "
                        f"alone while full (default {d.max_concurrent_requests})")
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # The settings are checked by the start-up, in one place (ServeSettings.problems): not by the size check.
    from tfm_cls.serve.server import serve, settings_of

    return serve(settings_of(args))
