"""Prometheus metrics under TEI's names (text-embeddings-inference: te_request_count, ...).

prometheus_client adds `_total` to a counter's name on exposition (te_request_count_total) and
`_bucket` / `_sum` / `_count` to a histogram's; te_batch_next_size's sum / count is the mean batch
size (Triton's average-batch-size). With --workers N the command line points
PROMETHEUS_MULTIPROC_DIR at a fresh folder before prometheus_client is imported: every worker
writes its values there and /metrics, on whichever worker answers, adds them up."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess as _multiprocess

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_SECONDS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_TOKENS = (16, 64, 256, 1024, 4096, 16384, 65536)


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


class Metrics:
    """The service's metrics. One process, one server: a registry of its own (tests build many
    apps in one process); multiprocess mode: the values go to PROMETHEUS_MULTIPROC_DIR."""

    def __init__(self) -> None:
        self.registry = None if multiprocess() else CollectorRegistry()
        r = {"registry": self.registry}
        self.request_count = Counter("te_request_count", "Requests received", ["method"], **r)
        self.request_success = Counter("te_request_success", "Requests answered 200", ["method"], **r)
        self.request_failure = Counter("te_request_failure", "Requests answered with an error", ["err"], **r)
        self.request_input_count = Histogram("te_request_input_count", "Inputs per request", buckets=_SIZES, **r)
        self.request_duration = Histogram("te_request_duration", "Seconds from receipt to answer", buckets=_SECONDS, **r)
        self.tokenization_duration = Histogram("te_request_tokenization_duration", "Seconds tokenizing a request",
                                               buckets=_SECONDS, **r)
        self.queue_duration = Histogram("te_request_queue_duration", "Seconds a request waited in the queue",
                                        buckets=_SECONDS, **r)
        self.inference_duration = Histogram("te_request_inference_duration", "Seconds of the batch a request ran in",
                                            buckets=_SECONDS, **r)
        self.batch_inference_duration = Histogram("te_batch_inference_duration", "Seconds per model batch",
                                                  buckets=_SECONDS, **r)
        self.batch_next_size = Histogram("te_batch_next_size", "Inputs per model batch (sum / count: mean batch size)",
                                         buckets=_SIZES, **r)
        self.batch_next_tokens = Histogram("te_batch_next_tokens", "Padded tokens per model batch", buckets=_TOKENS, **r)
        self.queue_size = Gauge("te_queue_size", "Inputs waiting in the queue", multiprocess_mode="livesum", **r)
        self.inflight = Gauge("te_inflight_inputs", "Inputs admitted and not yet answered", multiprocess_mode="livesum", **r)

    def batch(self, size: int, tokens: int, seconds: float) -> None:
        """One model batch ran (called from the inference thread)."""
        self.batch_next_size.observe(size)
        self.batch_next_tokens.observe(tokens)
        self.batch_inference_duration.observe(seconds)

    def failure(self, err: str) -> None:
        self.request_failure.labels(err=err).inc()

    def exposition(self) -> bytes:
        """The text format of every worker's metrics (multiprocess mode) or this one's."""
        if self.registry is not None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
