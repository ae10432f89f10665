"""Connecting to Ray: an existing cluster (`--address`), or a local one confined to this machine
(loopback only, no dashboard, no usage statistics, its files under a temporary folder), and the
one-line message of a failure that happened on the cluster."""

from __future__ import annotations

import os
import secrets
from typing import Any

from tfm_cls.errors import InferenceError, TfmClsError

EXTRA_MESSAGE = "tfm-cls batch needs the ray extra: pip install 'tfm-cls[ray]'"


def import_ray():
    """ray and ray.data, or one clear InferenceError naming the extra."""
    try:
        import pyarrow  # noqa: F401
        import ray
        import ray.data  # noqa: F401
    except ImportError as err:
        raise InferenceError(f"{EXTRA_MESSAGE} ({err.name} is not installed)") from None
    return ray


def local_environment() -> None:
    """What a local cluster needs to stay local, set before ray is imported: its processes talk
    over the loopback address (Ray otherwise picks the machine's network address, and
    `_node_ip_address="127.0.0.1"` is turned back into it; the switch Ray reads for this is named
    after Windows and macOS, where loopback is its default), no usage statistics are sent, and
    token authentication keeps its token in the environment of this process and its workers,
    not in ~/.ray/auth_token (where Ray >= 2.5x writes one for a new cluster)."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not any(os.environ.get(k) for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE")):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def connect(address: str | None, num_cpus: int | None = None, temp_dir: str | None = None) -> bool:
    """Ray initialised: the running one if this process has one, the cluster at `address`
    ("auto", "HOST:6379", "ray://HOST:10001"), or a new local one of `num_cpus` CPUs (default:
    this machine's). True when this call started it (the caller shuts it down)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    common: dict[str, Any] = {"configure_logging": False, "log_to_driver": True}
    if address:
        try:
            ray.init(address=address, **common)
        except Exception as err:  # ConnectionError, or Ray's own types, for an address with no cluster behind it
            raise InferenceError(f"cannot connect to the Ray cluster at {address}: {err}") from None
        return True
    local_environment()  # again: ray may have been imported before, by the caller
    ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, _node_ip_address="127.0.0.1",
             _temp_dir=temp_dir, **common)
    return True


def cluster_cpus() -> int:
    import ray

    return int(ray.cluster_resources().get("CPU", 1))


def user_error(err: BaseException) -> TfmClsError | None:
    """The TfmClsError raised in a task or an actor that a Ray failure carries, or None. Ray
    re-raises it as a RayTaskError that is also an instance of its class, with the remote
    traceback as its message; the original is its `cause` (or further down the chain)."""
    seen = set()
    stack = [err]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        cause = getattr(e, "cause", None)
        if isinstance(e, TfmClsError) and cause is None:
            return e
        stack += [e.__context__, e.__cause__, cause]  # the last pushed is looked at first
    return None


def failure_message(err: BaseException, restarts: int) -> str:
    """One line for a cluster failure that is not bad input: a dead actor, a lost task."""
    name = type(err).__name__
    if "ActorDied" in name or "ActorError" in name or "WorkerCrashed" in name or "ActorUnavailable" in name:
        return (f"an inference actor died and was restarted {restarts} times without finishing (out of memory? "
                f"see the Ray logs); no output was kept ({name})")
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"the Ray job failed: {name}: {first}; no output was kept"
