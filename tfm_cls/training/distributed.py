"""Data-parallel training across processes (torchrun), shared by `tfm-cls train` and `pretrain`.

    with process_group(device="auto") as env:     # torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*
        ddp_model = wrap_model(model, env)         # DistributedDataParallel when world_size > 1
        ...                                        # the loop; every file write is rank 0's
        del ddp_model, optimizer                   # release DDP's reducer before the group goes
    # -> barrier, destroy_process_group()

Without torchrun (no WORLD_SIZE, or WORLD_SIZE=1) there is no process group and every helper
below returns its input unchanged, so single-process code runs the same lines.

Backend and device are chosen together: a CUDA device means nccl, anything else gloo. Under
torchrun `device=auto|cuda` gives each process its own GPU, cuda:LOCAL_RANK.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import inspect
import logging
import os
import pickle
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from tfm_cls.errors import ConfigError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class DistributedError(RuntimeError):
    """The process group cannot be set up, or the ranks disagree where they must not."""


@dataclasses.dataclass(frozen=True)
class DistEnv:
    """Where this process stands: its rank among world_size processes, and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    """Rank on this node (torchrun's LOCAL_RANK): picks the GPU."""
    device: torch.device = torch.device("cpu")
    backend: str | None = None
    """nccl / gloo, or None without a process group."""
    owns_group: bool = False
    """This module created the process group, so it destroys it too."""

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes files, logs and shows progress bars."""
        return self.rank == 0


# ---- setup and teardown ----------------------------------------------------------------------------


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as err:
        raise DistributedError(f"environment variable {name}={value!r}: expected an integer") from err


def select_device(name: str, local_rank: int = 0, local_world_size: int = 1) -> torch.device:
    """`auto` (CUDA if available, else CPU), `cpu`, `cuda` or `cuda:N`.

    Without an index a CUDA device is cuda:local_rank: under torchrun each process on a node
    takes its own GPU. An explicit index with several processes per node would put them all
    on one GPU (nccl refuses that), so it is an error there."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ConfigError(f"train.device={name!r}: expected auto, cpu, cuda or cuda:N") from err
    if device.type != "cuda":
        return device
    if not torch.cuda.is_available():
        raise ConfigError(f"train.device={name}: CUDA is not available on this machine (torch {torch.__version__})")
    count = torch.cuda.device_count()
    if device.index is None:
        if local_rank >= count:
            raise ConfigError(
                f"LOCAL_RANK={local_rank} but only {count} GPU(s) are visible: start at most {count} "
                "processes per node (torchrun --nproc_per_node)"
            )
        return torch.device("cuda", local_rank)
    if local_world_size > 1:
        raise ConfigError(
            f"train.device={name} pins all {local_world_size} processes of this node to one GPU; "
            "under torchrun use train.device=cuda (or auto): each process takes cuda:LOCAL_RANK"
        )
    if device.index >= count:
        raise ConfigError(f"train.device={name}: only {count} GPU(s) are visible")
    return device


def setup(device: str = "auto") -> DistEnv:
    """Join the process group torchrun describes in the environment (env:// rendezvous), or
    return a single-process DistEnv when there is none. Reuses a group the caller made."""
    world_size = _env_int("WORLD_SIZE", 1)
    if world_size <= 1 and not dist.is_initialized():
        single = select_device(device)
        if single.type == "cuda":
            torch.cuda.set_device(single)  # pinned-memory threads and kernels use the current device
        return DistEnv(device=single)
    local_rank = _env_int("LOCAL_RANK", 0)
    chosen = select_device(device, local_rank, _env_int("LOCAL_WORLD_SIZE", world_size))
    backend = "nccl" if chosen.type == "cuda" else "gloo"
    if chosen.type == "cuda":
        torch.cuda.set_device(chosen)  # before any collective: nccl binds to the current device
    owns = not dist.is_initialized()
    if owns:
        missing = [v for v in ("MASTER_ADDR", "MASTER_PORT", "RANK") if v not in os.environ]
        if missing:
            raise DistributedError(
                f"WORLD_SIZE={world_size} but {', '.join(missing)} not set: start with torchrun "
                "(e.g. torchrun --standalone --nproc_per_node=2 -m tfm_cls.cli train ...)"
            )
        dist.init_process_group(backend, device_id=chosen if chosen.type == "cuda" else None)
    else:
        backend = dist.get_backend()
    env = DistEnv(
        rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local_rank, device=chosen,
        backend=backend, owns_group=owns,
    )
    if env.is_main:
        logger.info("process group: %d processes (%s); rank 0 on %s", env.world_size, backend, chosen)
    return env


def teardown(env: DistEnv, *, barrier: bool = True) -> None:
    """Leave the process group cleanly: collect garbage (a DistributedDataParallel model's
    reducer holds the group; it must be gone first, or its destructor runs at interpreter exit
    and aborts with "terminate called without an active exception"), wait for every rank
    (`barrier`; skipped on an error path, where another rank may never arrive), destroy."""
    gc.collect()
    if env.owns_group and dist.is_initialized():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()


@contextlib.contextmanager
def process_group(device: str = "auto") -> Iterator[DistEnv]:
    """setup() ... teardown(). The caller drops its DDP model and optimizer before leaving the
    block; on an exception the traceback would keep them alive, so its frames are cleared."""
    env = setup(device)
    try:
        yield env
    except BaseException as err:
        if env.distributed:
            traceback.clear_frames(err.__traceback__)  # drop the locals (DDP model) the traceback pins
        teardown(env, barrier=False)
        raise
    teardown(env)


def quiet_other_ranks(env: DistEnv) -> None:
    """One voice in the console and the log: ranks other than 0 log warnings and errors only."""
    if not env.is_main:
        logging.getLogger("tfm_cls").setLevel(logging.WARNING)


# ---- the model ----------------------------------------------------------------------------------------


def wrap_model(model: nn.Module, env: DistEnv) -> nn.Module:
    """DistributedDataParallel around `model` (already on env.device) when distributed, else
    `model` itself. Only parameters that require grad at this moment are synchronised, so
    freezing or unfreezing parameters means wrapping anew."""
    if not env.distributed:
        return model
    # Our buffers are constants (positional tables): synchronised once at wrapping, not every forward.
    ddp = nn.parallel.DistributedDataParallel
    no_buffer_sync = (
        {"forward_sync_buffers": False} if "forward_sync_buffers" in inspect.signature(ddp).parameters
        else {"broadcast_buffers": False}  # torch < 2.13
    )
    return ddp(model, device_ids=[env.device.index] if env.device.type == "cuda" else None, **no_buffer_sync)


def no_sync(model: nn.Module, skip: bool) -> contextlib.AbstractContextManager[Any]:
    """Skip DDP's gradient all-reduce for this backward (`skip`): gradient accumulation syncs
    only on the last micro-batch of a step."""
    if skip and isinstance(model, nn.parallel.DistributedDataParallel):
        return model.no_sync()
    return contextlib.nullcontext()


# ---- collectives (all no-ops in a single process) ---------------------------------------------------


def barrier(env: DistEnv) -> None:
    if env.distributed:
        dist.barrier()


def broadcast_object(obj: T, env: DistEnv, src: int = 0) -> T:
    """`obj` of rank `src` on every rank (pickled)."""
    if not env.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src, device=env.device if env.backend == "nccl" else None)
    return box[0]


def all_gather_object(obj: Any, env: DistEnv) -> list[Any]:
    """Every rank's `obj`, in rank order (pickled)."""
    if not env.distributed:
        return [obj]
    out: list[Any] = [None] * env.world_size
    dist.all_gather_object(out, obj)
    return out


def _picklable(err: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # an exception whose constructor takes other arguments than its message
        return DistributedError(f"{type(err).__name__}: {err}")


def on_main(env: DistEnv, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn` on rank 0 only and hand its result to every rank. An exception on rank 0 is
    raised on every rank, so all of them stop with the same clear error instead of waiting
    for a rank that has gone."""
    result: Any = None
    error: BaseException | None = None
    if env.is_main:
        try:
            result = fn(*args, **kwargs)
        except Exception as err:
            if not env.distributed:
                raise
            error = _picklable(err)
    if env.distributed:
        result, error = broadcast_object((result, error), env)
    if error is not None:
        raise error
    return result


@contextlib.contextmanager
def main_first(env: DistEnv) -> Iterator[None]:
    """Rank 0 runs the block first (e.g. fills a cache), then the others; an error on rank 0
    is raised on every rank."""
    if not env.distributed:
        yield
        return
    if not env.is_main:
        error = broadcast_object(None, env)
        if error is not None:
            raise error
        yield
        return
    try:
        yield
    except Exception as err:
        broadcast_object(_picklable(err), env)
        raise
    broadcast_object(None, env)


def all_gather_rows(array: np.ndarray, env: DistEnv) -> np.ndarray:
    """Concatenate every rank's `array` ([n_rank, ...], n_rank may differ) along axis 0, in rank
    order. Shapes beyond axis 0 and the dtype must agree."""
    if not env.distributed:
        return array
    local = torch.from_numpy(np.ascontiguousarray(array)).to(env.device)  # [n, ...]
    sizes = [torch.zeros(1, dtype=torch.long, device=env.device) for _ in range(env.world_size)]
    dist.all_gather(sizes, torch.tensor([local.shape[0]], dtype=torch.long, device=env.device))
    counts = [int(s.item()) for s in sizes]
    if max(counts) == 0:
        return array
    padded = local.new_zeros((max(counts), *local.shape[1:]))  # [max_n, ...]: all_gather wants equal shapes
    padded[: local.shape[0]] = local
    parts = [torch.empty_like(padded) for _ in range(env.world_size)]
    dist.all_gather(parts, padded)
    return torch.cat([p[:n] for p, n in zip(parts, counts)]).cpu().numpy()


def all_reduce(values: list[float], env: DistEnv, op: str = "sum") -> list[float]:
    """Element-wise sum / max / min of `values` over the ranks (float64)."""
    if not env.distributed:
        return list(values)
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
    t = torch.tensor(values, dtype=torch.float64, device=env.device)
    dist.all_reduce(t, op=ops[op])
    return t.tolist()


def gather_scalars(values: list[float], env: DistEnv) -> np.ndarray:
    """Every rank's `values` as rows [world_size, len(values)] (float64), in one collective."""
    if not env.distributed:
        return np.asarray([values], dtype=np.float64)
    local = torch.tensor(values, dtype=torch.float64, device=env.device)  # [k]
    parts = [torch.empty_like(local) for _ in range(env.world_size)]
    dist.all_gather(parts, local)
    return torch.stack(parts).cpu().numpy()


def broadcast_module(module: nn.Module, env: DistEnv, src: int = 0) -> None:
    """Overwrite every parameter and buffer with rank `src`'s (e.g. the best weights that only
    rank 0 loaded from its disk: ranks on other nodes may not see that disk)."""
    if not env.distributed:
        return
    with torch.no_grad():
        for tensor in module.state_dict().values():
            dist.broadcast(tensor, src=src)


# ---- host syncs ----------------------------------------------------------------------------------------


class DeviceSum:
    """A running sum kept on `device` (float64): adding a loss costs no host sync; `take()` reads
    it (one sync) and starts again from zero."""

    def __init__(self, device: torch.device) -> None:
        self.value = torch.zeros((), dtype=torch.float64, device=device)

    def add(self, x: torch.Tensor) -> None:
        self.value += x.detach()

    def take(self) -> float:
        out = self.value.item()
        self.value.zero_()
        return out
