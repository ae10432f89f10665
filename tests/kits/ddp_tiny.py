"""Tiny data, a tiny config and a torchrun launcher for the DDP tests (2 CPU processes, gloo)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kits.tiny_topics import write_topic_data

# 48 training texts = 6 global batches of 8: each rank's half-batch has exactly 4 examples, so
# DDP's mean of per-rank mean losses is the single process's mean loss. Validation and test sizes
# are odd, and 33 with a global evaluation batch of 16 leaves one rank an empty last part.
SIZES = {"train": 48, "validation": 33, "test": 29}

# Byte-level BPE: deterministic across processes (WordPiece breaks count ties in hash-map order).
TINY = [
    "name=ddp", "seed=0", "tokenizer.kind=bpe", "tokenizer.vocab_size=300", "tokenizer.min_frequency=1",
    "tokenizer.max_length=16", "model.d_model=16", "model.nhead=2", "model.num_layers=1",
    "model.dim_feedforward=32", "model.max_len=32", "model.dropout=0.0", "train.epochs=2", "train.lr=1e-2",
    "train.warmup_steps=2", "train.eval_batch_size=8", "train.progress=false", "train.num_threads=1",
    "train.log_every=3", "train.device=cpu",
]


def write_data(folder: Path) -> Path:
    return write_topic_data(folder, (SIZES["train"], SIZES["validation"], SIZES["test"]))


def overrides(data_dir: Path, run_dir: Path, batch_size: int, *extra: str) -> list[str]:
    return [*TINY, f"data.path={data_dir}", f"run_dir={run_dir}", f"train.batch_size={batch_size}", *extra]


def config_file(path: Path, data_dir: Path, run_dir: Path, batch_size: int, *extra: str) -> Path:
    """The tiny config as a YAML file: torchrun runs `tfm-cls train --config FILE` (without --config
    the CLI would start from configs/cls/bbc.yaml), and in-process runs load the same file."""
    from tfm_cls.config import ClassifierConfig, load_config, save_config

    save_config(load_config(ClassifierConfig, None, overrides(data_dir, run_dir, batch_size, *extra)), path)
    return path


def torchrun_cmd(nproc: int, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "-m", "tfm_cls.cli", "train", *args]


def torchrun_train(nproc: int, args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """`tfm-cls train` under torchrun; fails the test with the log tail if it does not exit 0."""
    done = subprocess.run(torchrun_cmd(nproc, args), capture_output=True, text=True, timeout=timeout,
                          env=os.environ.copy())
    assert done.returncode == 0, f"torchrun exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done


def torchrun_killed_after_checkpoint(nproc: int, args: list[str], checkpoint: Path, timeout: float = 240) -> None:
    """Start `tfm-cls train` under torchrun and SIGKILL every rank and the agent as soon as the
    first checkpoint exists: an interrupted multi-process run."""
    proc = subprocess.Popen(torchrun_cmd(nproc, args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=os.environ.copy())
    deadline = time.monotonic() + timeout
    try:
        while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr.read().decode()[-3000:]}"
    finally:
        # torchrun starts its workers in sessions of their own: kill them by pid, then the agent.
        for pid in [*_descendants(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=30)


def _descendants(pid: int) -> list[int]:
    """Child processes of `pid`, recursively (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


# ---- workers for torch.multiprocessing.spawn (module level, so the children can import them) -------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun_env(rank: int, world: int, port: int) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))


def helpers_worker(rank: int, world: int, port: int, second_port: int, out_dir: str) -> None:
    """Exercise every collective helper of tfm_cls.training.distributed and write what this rank saw; then
    fail inside a second process group while a DDP model is alive: the process must end with that
    error, not abort in the reducer's destructor ("terminate called ...")."""
    import numpy as np
    import torch

    from tfm_cls.config import ConfigError
    from tfm_cls.training import distributed as D

    _torchrun_env(rank, world, port)
    torch.manual_seed(100 + rank)  # different weights on each rank, on purpose
    seen: dict = {}
    with D.process_group("cpu") as env:
        seen["env"] = [env.rank, env.world_size, env.backend, env.owns_group, str(env.device)]
        # Uneven rows, rank 0 has none: concatenated in rank order.
        local = np.arange(3 * rank, dtype=np.float32).reshape(rank, 3) + 100 * rank
        seen["rows"] = D.all_gather_rows(local, env).tolist()
        seen["scalars"] = D.gather_scalars([rank, 10.0 * rank], env).tolist()
        seen["sum"], seen["max"] = D.all_reduce([rank, 1.0], env), D.all_reduce([rank], env, op="max")
        seen["object"] = D.broadcast_object({"from": rank}, env)
        seen["all_objects"] = D.all_gather_object(rank * 2, env)
        seen["on_main"] = D.on_main(env, lambda: f"computed by rank {rank}")

        def fails():
            raise ConfigError("bad value on rank 0")

        try:
            D.on_main(env, fails)
        except ConfigError as err:
            seen["on_main_error"] = [type(err).__name__, str(err)]

        marker = Path(out_dir) / "written_by_rank0"
        with D.main_first(env):
            if rank == 0:
                marker.write_text("cache")
            seen["main_first_saw"] = marker.read_text()

        module = torch.nn.Linear(3, 2)
        D.broadcast_module(module, env)
        seen["broadcast_weight"] = module.weight.detach().tolist()

        # DDP: gradients are averaged on a synced backward and left local under no_sync.
        model = torch.nn.Linear(2, 1, bias=False)
        ddp = D.wrap_model(model, env)
        x = torch.full((1, 2), float(rank + 1))
        with D.no_sync(ddp, skip=True):
            ddp(x).sum().backward()
        seen["grad_no_sync"] = model.weight.grad.tolist()
        model.weight.grad = None
        with D.no_sync(ddp, skip=False):
            ddp(x).sum().backward()
        seen["grad_synced"] = model.weight.grad.tolist()
        ddp = None  # release DDP's reducer before the group goes
    seen["group_destroyed"] = not torch.distributed.is_initialized()
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(seen))

    _torchrun_env(rank, world, second_port)
    with D.process_group("cpu") as env:
        ddp = D.wrap_model(torch.nn.Linear(2, 2), env)
        ddp(torch.ones(1, 2)).sum().backward()
        raise ValueError(f"planned failure on rank {rank}")
