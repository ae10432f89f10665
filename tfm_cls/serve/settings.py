"""Every knob of `tfm-cls serve`, in one dataclass: the command line fills it, each worker process
reads it back from the environment (JSON), the app and the batcher read their fields from it."""

from __future__ import annotations

import dataclasses
import json
import os

SETTINGS_ENV = "TFM_CLS_SERVE_SETTINGS"
API_KEY_ENV = "TFM_CLS_API_KEY"


@dataclasses.dataclass(kw_only=True)
class ServeSettings:
    """The service's settings (docs/serving.md lists each with its flag)."""

    model: str
    """The .onnx file written by `tfm-cls export`; read once, at start-up."""
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    """Processes sharing the port, each with its own session and inference thread."""
    threads: int = 1
    """onnxruntime intra-op threads per worker."""
    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    max_batch_tokens: int = 4096
    """A micro-batch's padded cost (rows x its longest row) at most; a bigger request runs alone."""
    max_batch_size: int = 64
    """Inputs (texts or pairs) gathered into one micro-batch at most; 1 turns batching off."""
    max_wait_ms: float = 0.0
    """How long the inference thread waits for a micro-batch to fill; 0: it takes what is queued."""
    max_concurrent_requests: int = 512
    """Inputs admitted at once (queued or running, a batch's items each count); more: 429."""
    max_client_batch_size: int = 32
    """Inputs in one request at most; more: 413."""
    payload_limit: int = 2_000_000
    """Bytes of a request body at most; more: 413."""
    request_timeout: float = 30.0
    """Seconds a request may wait in the queue; then 504, and its work is not run."""
    graceful_timeout: float = 30.0
    """Seconds in-flight requests get to finish after SIGTERM."""
    auto_truncate: bool = False
    """Truncate over-long inputs (by the export's policy) instead of answering 413."""
    api_key: str | None = None
    """A Bearer token every endpoint but /health and the page asks for; None: no key."""
    max_length: int | None = None
    """Tokens per input below the model's maximum."""
    warmup: bool = True
    """Run a few batches before /health turns 200."""
    log_level: str = "info"
    loop: str = "auto"
    """uvicorn's event loop: `auto` takes uvloop where it is installed, else asyncio."""
    http: str = "auto"
    """uvicorn's HTTP parser: `auto` takes httptools where it is installed, else h11."""

    def problems(self) -> list[str]:
        """What is wrong with these values (empty when they can work), one flag each."""
        out = []
        positive = {"--workers": self.workers, "--max-batch-tokens": self.max_batch_tokens,
                    "--max-batch-size": self.max_batch_size, "--max-concurrent-requests": self.max_concurrent_requests,
                    "--max-client-batch-size": self.max_client_batch_size, "--payload-limit": self.payload_limit}
        out += [f"{flag} must be a positive integer, got {value}" for flag, value in positive.items() if value < 1]
        if self.threads < 0:
            out.append(f"--threads must be >= 0 (0: the runtime decides), got {self.threads}")
        for flag, value in {"--max-wait-ms": self.max_wait_ms, "--graceful-timeout": self.graceful_timeout}.items():
            if value < 0:
                out.append(f"{flag} must be >= 0, got {value}")
        if self.request_timeout <= 0:
            out.append(f"--request-timeout must be > 0 seconds, got {self.request_timeout}")
        if not 0 <= self.port <= 65535:
            out.append(f"--port must be in [0, 65535], got {self.port}")
        if self.max_client_batch_size > self.max_concurrent_requests:
            out.append(f"--max-client-batch-size ({self.max_client_batch_size}) must not exceed "
                       f"--max-concurrent-requests ({self.max_concurrent_requests}): such a request could never run")
        if self.api_key is not None and not self.api_key.strip():
            out.append("--api-key is empty")
        return out

    def to_env(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_env(cls) -> ServeSettings:
        """The settings a worker process was started with (the CLI wrote them to SETTINGS_ENV)."""
        values = json.loads(os.environ[SETTINGS_ENV])
        values["providers"] = tuple(values["providers"])
        return cls(**values)

    def public(self) -> dict:
        """The settings /info shows (never the API key)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "api_key"}
