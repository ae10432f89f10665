"""Weights files: named tensors as safetensors, written atomically and read without unpickling.

    save_weights(model, RUN / "model.safetensors")    the model's state dict
    save_tensors({"offsets": ...}, path)               any named tensors (an encoder, the wide offsets)
    load_weights(model, path)                          strict: a missing or extra key is a CheckpointError

Below both the run directory (runs.load_run reads a run's weights) and the training engine (the
best weights of every recipe), so neither imports the other for them. The resumable checkpoint of a
training loop is the engine's own (tfm_cls.training.checkpoint).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from tfm_cls.errors import CheckpointError
from tfm_cls.io import atomic_path


def save_tensors(state: dict[str, torch.Tensor], path: str | Path) -> None:
    """Write named tensors as safetensors (contiguous CPU copies), atomically."""
    tensors = {name: t.detach().to("cpu").contiguous() for name, t in state.items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})


def save_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Write the model's state dict as safetensors, atomically."""
    save_tensors(model.state_dict(), path)


def load_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Load safetensors weights into `model`; any mismatch is a CheckpointError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"weights file {path} does not exist")
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{path}: corrupt or truncated safetensors file ({err})") from err
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise CheckpointError(
            f"{path}: weights do not fit the model: missing {result.missing_keys[:5]}, "
            f"unexpected {result.unexpected_keys[:5]}"
        )
