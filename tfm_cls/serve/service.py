"""One worker's service: its model, queue and life cycle (loading -> warming -> ready -> draining),
and what a request goes through between the routes and the batcher: admission (the inputs in
flight), tokenization (the runtime's encoder, never a second one), the over-long check, the queue
with its deadline and the client's disconnect, and the answer in TEI's shape."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
import threading
import time
import weakref
from typing import Any

from tokenizers import Tokenizer

from tfm_cls import __version__
from tfm_cls.io import file_sha256
from tfm_cls.runtime.batching import RUNTIME_MAX_TOKENS
from tfm_cls.runtime.session import Classifier, Inputs
from tfm_cls.runtime.text import TextEncoder
from tfm_cls.serve.api_error import OVERLOADED, TOKENIZER, UNHEALTHY, VALIDATION, ApiError
from tfm_cls.serve.batcher import Batcher, Job, Result
from tfm_cls.serve.prometheus import Metrics
from tfm_cls.serve.requests import SCORE_FUNCTIONS, PredictRequest
from tfm_cls.serve.settings import ServeSettings

log = logging.getLogger("tfm_cls.serve")

LOADING, WARMING, READY, DRAINING, FAILED = "loading", "warming", "ready", "draining", "failed"
# Tokenize in a worker thread above this many characters, so one huge input does not hold up the loop.
_INLINE_CHARS = 20_000
# /health fails when the inference thread has had work queued this long without finishing a batch
# (a stuck request path, which a health check that only sees the event loop would miss).
STALL_SECONDS = 30.0

_SERVICES: weakref.WeakSet[Service] = weakref.WeakSet()
# The GIL passes between the event loop and the inference thread on every batch; at Python's
# default 5 ms switch interval a thread that holds it (uvicorn's worker health pinger, the loop
# parsing requests) makes each hand-over wait up to 5 ms (measured: 4.6 ms a request with
# --workers 2 instead of 1.0 ms). A server process sets it shorter (the command line only).
SWITCH_INTERVAL = 0.0005


def tune_interpreter() -> None:
    """Settings of a server process (not of a process that merely builds an app, e.g. tests)."""
    sys.setswitchinterval(SWITCH_INTERVAL)


def drain_all() -> None:
    """SIGTERM: every service of this process stops taking work (/health 503); in-flight work goes on."""
    for service in list(_SERVICES):
        service.drain()


@dataclasses.dataclass
class Timing:
    """Seconds of one request's stages (the x-*-time headers and the te_request_* histograms)."""

    start: float
    tokenization: float = 0.0
    queue: float = 0.0
    inference: float = 0.0
    batch_size: int = 0

    def headers(self) -> dict[str, str]:
        total = time.monotonic() - self.start
        ms = {"x-total-time": total, "x-tokenization-time": self.tokenization, "x-queue-time": self.queue,
              "x-inference-time": self.inference}
        return {**{k: f"{v * 1000:.3f}" for k, v in ms.items()}, "x-batch-size": str(self.batch_size)}


class Service:
    """The model, its batcher and its state in one worker process. `classifier`: one already
    loaded (the command line checks the file before starting); else it is loaded on start()."""

    def __init__(self, settings: ServeSettings, classifier: Classifier | None = None):
        self.settings = settings
        self.metrics = Metrics()
        self.classifier = classifier
        self.batcher: Batcher | None = None
        self.state = LOADING
        self.problem: str | None = None
        self.inflight = 0
        self.digest: str | None = None
        self._encoders: dict[str, Any] = {}
        self._counter: Tokenizer | None = None
        _SERVICES.add(self)

    # ---- life cycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Load (unless given), warm up and open, in a thread of its own: /health answers 503 meanwhile."""
        threading.Thread(target=self._open, name="tfm-cls-load", daemon=True).start()

    def _open(self) -> None:
        s = self.settings
        try:
            if self.classifier is None:
                self.classifier = load_classifier(s)
            self.digest = file_sha256(s.model)
            self.state = WARMING
            if s.warmup:
                self._warm_up()
            self.batcher = Batcher(self.classifier, s.max_batch_tokens, s.max_batch_size, s.max_wait_ms, self.metrics)
            self.batcher.start()
        except Exception as err:  # a model that loads but cannot run: unhealthy, said once in the log
            self.problem = f"{type(err).__name__}: {err}"
            self.state = FAILED
            log.error("the model could not be started: %s", self.problem)
            return
        if self.state != DRAINING:
            self.state = READY
            log.info("serving %s (%s, %d labels)", s.model, self.classifier.head.task, len(self.classifier.labels))

    def _warm_up(self) -> None:
        """A few batches of the shapes traffic brings, so the first requests do not pay for them."""
        c = self.classifier
        for n, words in ((1, 3), (min(8, self.settings.max_batch_size), 12), (1, c.max_length)):
            texts = [" ".join(["warm"] * words)] * n
            c.score(c.encode_inputs(texts, texts if c.pair else None))

    def drain(self) -> None:
        if self.state != DRAINING:
            log.info("draining: no new work; in-flight requests finish")
        self.state = DRAINING

    def close(self, timeout: float) -> None:
        self.drain()
        if self.batcher is not None:
            self.batcher.stop(timeout)

    def health(self) -> tuple[bool, str]:
        """(healthy, why not): ready, the inference thread alive and not stuck on queued work."""
        if self.state != READY:
            return False, {LOADING: "the model is loading", WARMING: "the model is warming up",
                           DRAINING: "the server is draining (shutting down)",
                           FAILED: f"the model failed to start ({self.problem})"}[self.state]
        if not self.batcher.alive:
            return False, "the inference thread has stopped"
        stalled = self.batcher.stalled_for()
        if stalled > STALL_SECONDS:
            return False, f"the inference thread has not finished a batch for {stalled:.0f} s"
        return True, "ok"

    @property
    def score_function(self) -> str:
        """The Inference API's `function_to_apply` that gives this model's scores."""
        return SCORE_FUNCTIONS[self.classifier.head.task]

    def require_ready(self) -> None:
        if self.state != READY:
            raise ApiError(503, UNHEALTHY, self.health()[1], err="draining" if self.state == DRAINING else "unhealthy")

    # ---- a request -----------------------------------------------------------------------------------

    def full(self) -> bool:
        """No room for one more input: a request is refused from its headers (tfm_cls.serve.admission)."""
        return self.inflight >= self.settings.max_concurrent_requests and self.state == READY

    def overloaded(self, inflight: int) -> ApiError:
        """The 429 of a request refused with `inflight` inputs in flight."""
        limit = self.settings.max_concurrent_requests
        return ApiError(429, OVERLOADED, f"the server is busy ({inflight} inputs in flight, at most {limit}); "
                        "retry later", err="overloaded", headers={"Retry-After": "1"})

    def admit(self, n: int) -> None:
        """Count `n` inputs in flight, or 429 when --max-concurrent-requests would be passed."""
        if self.inflight + n > self.settings.max_concurrent_requests:
            raise self.overloaded(self.inflight)
        self.inflight += n
        self.metrics.inflight.set(self.inflight)

    def release(self, n: int) -> None:
        self.inflight -= n
        self.metrics.inflight.set(self.inflight)

    async def encode(self, req: PredictRequest, timing: Timing) -> Inputs:
        """The request's model rows (by the export's policy, or the side `truncation_direction`
        names); 413 for an over-long input unless truncation is on."""
        t = time.monotonic()
        encoder, pair_tokenizer = self._encoder(req.direction)
        try:
            if sum(len(x) for x in req.texts) + sum(len(x) for x in req.pairs or ()) > _INLINE_CHARS:
                inputs = await asyncio.to_thread(self.classifier.encode_inputs, req.texts, req.pairs, encoder,
                                                 pair_tokenizer)
            else:
                inputs = self.classifier.encode_inputs(req.texts, req.pairs, encoder, pair_tokenizer)
        except Exception as err:  # tokenizers raises its own types on inputs it cannot take
            raise ApiError(422, TOKENIZER, f"the input could not be tokenized: {err}") from None
        timing.tokenization = time.monotonic() - t
        self.metrics.tokenization_duration.observe(timing.tokenization)
        truncate = self.settings.auto_truncate if req.truncate is None else req.truncate
        if not truncate and any(inputs.truncated):
            i = inputs.truncated.index(True)
            tokens = await asyncio.to_thread(self._count, req.texts[i], req.pairs[i] if req.pairs else None)
            where = "the input" if req.single else f"inputs[{i}]"
            raise ApiError(413, VALIDATION, f"{where} has {tokens} tokens; the model takes at most "
                           f"{self.classifier.max_length}: send \"truncate\": true, or start the server with "
                           "--auto-truncate", err="validation")
        return inputs

    def _encoder(self, direction: str | None) -> tuple[TextEncoder | None, Tokenizer | None]:
        """The encoder (single texts) or tokenizer (pairs) that truncates on `direction`'s side
        (right: keep the head, left: keep the tail); None: the classifier's own."""
        if direction is None:
            return None, None
        if direction not in self._encoders:
            c = self.classifier
            if c.pair:
                tok = Tokenizer.from_str(c.tokenizer.to_str())
                tok.no_padding()
                tok.enable_truncation(c.max_length, strategy="longest_first", direction=direction)
                self._encoders[direction] = (None, tok)
            else:
                policy = dataclasses.replace(c.policy, truncation="head" if direction == "right" else "tail")
                self._encoders[direction] = (TextEncoder(c.tokenizer, c.max_length, policy), None)
        return self._encoders[direction]

    def _count(self, text: str, pair: str | None) -> int:
        """Tokens of one input without truncation (for the 413 message only)."""
        if self._counter is None:
            self._counter = Tokenizer.from_str(self.classifier.tokenizer.to_str())
            self._counter.no_truncation()
            self._counter.no_padding()
        return len(self._counter.encode(text, pair).ids)

    async def run(self, inputs: Inputs, timing: Timing, disconnected) -> Result | None:
        """Queue `inputs` and wait for their scores; None when the client went away first (its
        work dropped if it had not started). 504 when the queue deadline passes before it runs."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self.settings.request_timeout
        job = Job(inputs, loop.create_future(), deadline)
        self.batcher.submit(job)
        gone = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({job.future, gone}, timeout=self.settings.request_timeout,
                               return_when=asyncio.FIRST_COMPLETED)
            if not job.future.done():
                if gone.done():
                    if self.batcher.withdraw(job):
                        self.metrics.failure("dropped")
                        return None
                elif self.batcher.withdraw(job):
                    raise ApiError(504, "Timeout", "the request waited in the queue past --request-timeout "
                                   f"({self.settings.request_timeout:g} s); it was not run", err="timeout")
            result = await job.future  # it runs (or ran): its answer comes within a batch
        finally:
            gone.cancel()
        timing.queue = job.started - job.enqueued
        timing.inference = job.finished - job.started
        timing.batch_size = job.batch_size
        self.metrics.queue_duration.observe(timing.queue)
        self.metrics.inference_duration.observe(timing.inference)
        return result

    # ---- answers -------------------------------------------------------------------------------------

    def predictions(self, result: Result, req: PredictRequest) -> list:
        """TEI's /predict answer: per input, every label as {"label", "score"} by score, highest
        first (multi-label: per-label sigmoids, with "selected" by the export's thresholds;
        regression: the value as the score of the one label); `top_k` keeps the first k."""
        head, labels = self.classifier.head, self.classifier.labels
        out = []
        for i in range(len(req.texts)):
            chosen = None if result.chosen is None else result.chosen[i]
            entries = head.label_scores(result.scores[i], chosen, labels)
            out.append(entries[: req.top_k] if req.top_k else entries)
        return out[0] if req.single and not req.list_per_input else out

    def rows(self, result: Result, inputs: Inputs, req: PredictRequest) -> list[dict]:
        """/classify's answer: per input, the prediction fields of a `tfm-cls infer` row (the
        head's fields), whether it was truncated and, with chunking, its windows."""
        c = self.classifier
        out = []
        for i in range(len(req.texts)):
            chosen = None if result.chosen is None else result.chosen[i]
            row = {"index": i, **c.head.fields(result.scores[i], chosen, c.labels), "truncated": inputs.truncated[i]}
            if c.policy.chunk:
                row["windows"] = inputs.windows[i]
            out.append(row)
        return out

    def info(self) -> dict:
        """/info: TEI's fields, plus the labels, the task type, the export's digests and versions."""
        s, c = self.settings, self.classifier
        base = {"model_id": os.path.basename(s.model), "model_sha": self.digest, "model_dtype": None,
                "model_type": None, "max_concurrent_requests": s.max_concurrent_requests, "max_input_length": None,
                "max_batch_tokens": s.max_batch_tokens, "max_batch_requests": s.max_batch_size,
                "max_client_batch_size": s.max_client_batch_size, "auto_truncate": s.auto_truncate,
                "tokenization_workers": None, "version": __version__, "sha": None, "docker_label": None,
                "status": self.state}
        if c is None:
            return base
        meta = c.metadata
        quantized = bool(meta.quantization)
        return {**base, "model_dtype": "int8" if quantized else "float32",
                "model_type": {"classifier": {"id2label": dict(enumerate(c.labels)),
                                              "label2id": {label: i for i, label in enumerate(c.labels)}}},
                "max_input_length": c.max_length, "labels": c.labels, "task": c.head.task, "pair": c.pair,
                "long_text": dataclasses.asdict(c.policy), "weights_sha256": meta.weights_sha256,
                "exported_by": meta.version, "tfm_cls_version": __version__, "workers": s.workers,
                "threads": s.threads, "max_wait_ms": s.max_wait_ms, "request_timeout": s.request_timeout,
                "thresholds": [float(t) for t in c.thresholds] if c.head.decision_fields else None}


def load_classifier(settings: ServeSettings) -> Classifier:
    """The export's Classifier with the service's threads, providers and per-run token budget."""
    return Classifier(settings.model, list(settings.providers), settings.threads, settings.max_length,
                      max_tokens=min(RUNTIME_MAX_TOKENS, settings.max_batch_tokens))
