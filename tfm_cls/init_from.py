"""`model.init_from`: build the classifier (and its tokenizer) from pretrained weights.

    a `tfm-cls pretrain` run directory      -> tfm_cls.pretrain.classifier_from_pretraining_run
    a Hugging Face model folder / a hub id  -> tfm_cls.hf_import.classifier_from_hf

Both return (TransformerClassifier, tokenizers.Tokenizer). They live in optional modules, imported
only when asked for, so training from scratch never depends on them.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tfm_cls.config import ModelConfig

# A `tfm-cls pretrain` run is recognised by its files; a Hugging Face model folder by config.json.
_PRETRAIN_MARKERS = ("pretrain_config.yaml", "encoder.safetensors")
_PACKAGE_PREFIX = "package:"  # a HF model folder shipped inside an installed Python distribution
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


class InitFromError(ValueError):
    """`model.init_from` names something that cannot be loaded."""


def _call(module_name: str, function: str, *args: Any) -> tuple[Any, Tokenizer]:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name:
            raise InitFromError(
                f"model.init_from needs {module_name}.{function}, but {module_name} is not part of this install"
            ) from err
        raise
    if not hasattr(module, function):
        raise InitFromError(f"model.init_from needs {module_name}.{function}, which this version does not provide")
    return getattr(module, function)(*args)


def init_kind(source: str) -> str:
    """'pretrain' (a tfm_cls pretraining run) or 'hf' (a HF folder, `package:NAME` or a hub id)."""
    path = Path(source).expanduser()
    if path.is_dir():
        if any((path / marker).is_file() for marker in _PRETRAIN_MARKERS):
            return "pretrain"
        if (path / "config.json").is_file():
            return "hf"
        raise InitFromError(
            f"model.init_from={source}: folder is neither a tfm-cls pretraining run ({' or '.join(_PRETRAIN_MARKERS)}) "
            f"nor a Hugging Face model (config.json); it holds {sorted(p.name for p in path.iterdir())[:15]}"
        )
    if path.exists():
        raise InitFromError(f"model.init_from={source}: expected a folder (pretraining run or HF model), got a file")
    if source.startswith(_PACKAGE_PREFIX):
        return "hf"
    if source.startswith((".", "/", "~")) or not _HUB_ID.match(source):
        raise InitFromError(f"model.init_from={source}: no such folder (nor a hub id like org/name or package:NAME)")
    return "hf"  # a hub id, e.g. sentence-transformers/all-MiniLM-L6-v2


def load_pretrained(source: str, model_cfg: ModelConfig, num_classes: int) -> tuple[Any, Tokenizer]:
    """(model, tokenizer) for `model.init_from`; the head is new (num_classes outputs)."""
    kind = init_kind(source)
    if kind == "pretrain":
        return _call("tfm_cls.pretrain", "classifier_from_pretraining_run", source, model_cfg, num_classes)
    return _call("tfm_cls.hf_import", "classifier_from_hf", source, model_cfg, num_classes)
