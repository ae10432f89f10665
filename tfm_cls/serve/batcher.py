"""Micro-batching: requests queue first-in first-out; ONE inference thread per worker takes as
many as fit a batch whenever it is free (--max-batch-tokens padded cost, --max-batch-size inputs;
with --max-wait-ms it waits that long for a batch to fill), runs them through `Classifier.score`
as one call (onnxruntime releases the GIL, so the event loop goes on accepting and tokenizing) and
hands each request its rows back on its event loop.

A request withdrawn before it runs (its client went away, its queue deadline passed) is dropped
from the queue: its work is never run."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import threading
import time
from typing import Any

import numpy as np

from tfm_cls.runtime.session import Classifier, Inputs
from tfm_cls.serve.api_error import BACKEND, TIMEOUT, ApiError

log = logging.getLogger("tfm_cls.serve")

QUEUED, RUNNING, DONE, WITHDRAWN = "queued", "running", "done", "withdrawn"


@dataclasses.dataclass(eq=False)
class Job:
    """One request's encoded inputs on their way through the queue. `deadline`: the
    time.monotonic() after which it must not start (504)."""

    inputs: Inputs
    future: asyncio.Future
    deadline: float
    enqueued: float = dataclasses.field(default_factory=time.monotonic)
    state: str = QUEUED
    started: float = 0.0
    finished: float = 0.0
    batch_size: int = 0
    """Inputs of the micro-batch it ran in."""

    @property
    def rows(self) -> int:
        return len(self.inputs.ids)

    @property
    def longest(self) -> int:
        return max((len(x) for x in self.inputs.ids), default=0)

    @property
    def size(self) -> int:
        """Its inputs (texts or pairs)."""
        return len(self.inputs.windows)


@dataclasses.dataclass
class Result:
    """A job's scores [inputs, C] (regression [inputs]) and decisions [inputs, C] (multi-label; else None)."""

    scores: np.ndarray
    chosen: np.ndarray | None


class Batcher:
    """The queue and the inference thread of one worker. `submit`, `withdraw` are called on the
    event loop; the thread resolves each job's future there (call_soon_threadsafe)."""

    def __init__(self, classifier: Classifier, max_batch_tokens: int, max_batch_size: int, max_wait_ms: float,
                 metrics: Any = None):
        self.classifier = classifier
        self.max_batch_tokens, self.max_batch_size = max_batch_tokens, max_batch_size
        self.max_wait = max_wait_ms / 1000.0
        self.metrics = metrics
        self._queue: collections.deque[Job] = collections.deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="tfm-cls-inference", daemon=True)
        self.last_progress = time.monotonic()
        """When the thread last finished a batch or found the queue empty (the stall check of /health)."""
        self.batches = 0
        self.inputs_run = 0

    # ---- the event loop's side ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def queued(self) -> int:
        """Inputs waiting in the queue."""
        with self._cond:
            return sum(j.size for j in self._queue)

    def stalled_for(self) -> float:
        """Seconds the thread has had work queued without finishing a batch (0: not stalled)."""
        with self._cond:
            if not self._queue:
                return 0.0
        return time.monotonic() - self.last_progress

    def submit(self, job: Job) -> None:
        with self._cond:
            if self._stopping:
                raise ApiError(503, "Unhealthy", "the server is shutting down", err="draining")
            if not self._queue:
                self.last_progress = time.monotonic()  # an idle thread is not a stalled one
            self._queue.append(job)
            self._gauge()
            self._cond.notify()

    def withdraw(self, job: Job) -> bool:
        """Take a job that has not started out of the queue (True); False once it runs or ran."""
        with self._cond:
            if job.state != QUEUED:
                return False
            job.state = WITHDRAWN
            try:
                self._queue.remove(job)
            except ValueError:
                pass
            self._gauge()
            return True

    def stop(self, timeout: float = 5.0) -> None:
        """Finish what is queued, then end the thread (at most `timeout` seconds)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ---- the inference thread ------------------------------------------------------------------------

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_size.set(sum(j.size for j in self._queue))

    def _fits(self, batch: list[Job], job: Job) -> bool:
        inputs = sum(j.size for j in batch) + job.size
        rows = sum(j.rows for j in batch) + job.rows
        longest = max(job.longest, *(j.longest for j in batch))
        return inputs <= self.max_batch_size and rows * longest <= self.max_batch_tokens

    def _take(self) -> list[Job]:
        """The next micro-batch (called with the lock held; may wait for jobs). Expired jobs met on
        the way are answered 504 and never run."""
        while not self._queue and not self._stopping:
            self.last_progress = time.monotonic()
            self._cond.wait()
        if self.max_wait and self._queue:
            until = self._queue[0].enqueued + self.max_wait
            while not self._stopping and (left := until - time.monotonic()) > 0 and self._room():
                self._cond.wait(left)
        batch: list[Job] = []
        now = time.monotonic()
        while self._queue:
            job = self._queue[0]
            if job.deadline < now:
                self._queue.popleft()
                job.state = DONE
                self._fail(job, ApiError(504, TIMEOUT, "the request waited in the queue past --request-timeout; "
                                         "it was not run", err="timeout"))
                continue
            if batch and not self._fits(batch, job):
                break
            self._queue.popleft()
            job.state = RUNNING
            batch.append(job)
        self._gauge()
        return batch

    def _room(self) -> bool:
        """The queue does not yet fill a batch."""
        return sum(j.size for j in self._queue) < self.max_batch_size and (
            sum(j.rows for j in self._queue) * max(j.longest for j in self._queue) < self.max_batch_tokens)

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopping and not self._queue:
                    return
                batch = self._take()
            if batch:
                self._run(batch)

    def _run(self, batch: list[Job]) -> None:
        start = time.monotonic()
        size = sum(j.size for j in batch)
        try:
            inputs = Inputs.concat([j.inputs for j in batch])
            scores = self.classifier.score(inputs)
            chosen = self.classifier.decide(scores)
        except Exception as err:  # a backend failure answers the batch; the thread goes on
            log.exception("inference failed on a batch of %d inputs", size)
            for job in batch:
                job.state = DONE
                self._fail(job, ApiError(424, BACKEND, f"inference failed: {type(err).__name__}", err="backend"))
            return
        finished = time.monotonic()
        offset = 0
        for job in batch:
            n = job.size
            job.started, job.finished, job.batch_size, job.state = start, finished, size, DONE
            result = Result(scores[offset : offset + n], None if chosen is None else chosen[offset : offset + n])
            offset += n
            self._resolve(job, result)
        self.batches += 1
        self.inputs_run += size
        self.last_progress = finished
        if self.metrics is not None:
            self.metrics.batch(size, sum(j.rows for j in batch) * max(j.longest for j in batch), finished - start)

    @staticmethod
    def _resolve(job: Job, value: Any) -> None:
        _call(job.future, _set_result, value)

    @staticmethod
    def _fail(job: Job, error: ApiError) -> None:
        _call(job.future, _set_exception, error)


def _call(future: asyncio.Future, setter, value: Any) -> None:
    try:
        future.get_loop().call_soon_threadsafe(setter, future, value)
    except RuntimeError:  # the event loop has closed (shutdown): nobody waits for the answer any more
        pass


def _set_result(future: asyncio.Future, value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
