"""The resumable last checkpoint of a training loop (the best weights are safetensors files:
tfm_cls.weights).

`save_training_checkpoint` / `resume_training_checkpoint` are the one checkpoint format of the
training engine (engine.py, for every task): model, optimizer, loss scaler, every rank's RNG
states and the loop's own state.

Every file is written through tfm_cls.io.atomic_path (a temporary name in the same folder,
flushed to disk, renamed over the target), so a process killed at any moment leaves either the
old file or the new one, never a torn one. Loading never unpickles code: the checkpoint is read
through `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tfm_cls.errors import CheckpointError, ConfigError
from tfm_cls.io import atomic_path
from tfm_cls.training import distributed as D
from tfm_cls.training.precision import Precision


def rng_state() -> dict[str, Any]:
    """All RNG states that influence training, in a form `torch.load(weights_only=True)` accepts."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_as_tuples(state["python"]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuples(value: Any) -> Any:
    """random.setstate wants tuples; a save/load round trip may hand back lists."""
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuples(v) for v in value)
    return value


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Write a resumable checkpoint (tensors, numbers, strings, lists, dicts only), atomically."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint to resume from: {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # zip, pickle and unpickling-policy errors all mean the same here
        raise CheckpointError(
            f"{path}: corrupt or truncated checkpoint ({type(err).__name__}: {str(err)[:200]}); "
            "delete it and train without --resume, or pass --overwrite to start over"
        ) from err
    if not isinstance(state, dict) or "model" not in state or "step" not in state:
        raise CheckpointError(f"{path}: not a tfm_cls training checkpoint (expected keys 'model' and 'step')")
    return state


def save_training_checkpoint(
    path: str | Path, env: D.DistEnv, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
    amp: Precision, state: dict[str, Any],
) -> None:
    """The resumable checkpoint of a training loop; `state` (plain values, with `step`) is the
    loop's own. A collective: every rank calls it (their RNG states are gathered), rank 0 writes."""
    rngs = D.all_gather_object(rng_state(), env)
    if env.is_main:
        save_checkpoint(
            path,
            {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng_per_rank": rngs,
             "scaler": amp.state_dict(), "world_size": env.world_size, "state": state, "step": state["step"]},
        )


def resume_training_checkpoint(
    path: str | Path, env: D.DistEnv, model: torch.nn.Module, optimizer: torch.optim.Optimizer, amp: Precision,
) -> dict[str, Any]:
    """Restore what `save_training_checkpoint` wrote (rank 0 reads the file and hands it to every
    rank; each rank gets its own RNG states back) and return the loop's state. A checkpoint of a
    different number of processes is a ConfigError: the global batch and the sampler's position
    depend on it."""
    ckpt = D.on_main(env, load_checkpoint, path)
    written_by = ckpt.get("world_size", 1)
    if written_by != env.world_size:
        raise ConfigError(
            f"--resume: {path} was written by {written_by} process(es), this run has {env.world_size}; "
            "resume with the same number (the global batch and the sampler's position depend on it)"
        )
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    amp.load_state_dict(ckpt.get("scaler", {}))
    set_rng_state(ckpt["rng_per_rank"][env.rank] if "rng_per_rank" in ckpt else ckpt["rng"])  # "rng": before DDP
    return ckpt["state"]
