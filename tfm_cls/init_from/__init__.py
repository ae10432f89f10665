"""Every way to start a classifier from existing weights (`model.init_from`), in one package.

    a `tfm-cls pretrain` run directory            -> pretraining_run.classifier_from_pretraining_run
    a Hugging Face model folder, `package:NAME`   -> hf.classifier_from_hf
      (a checkpoint shipped in a Python package, e.g. the packaged MiniLM), or a hub id

Each returns (TransformerClassifier with a new head, tokenizers.Tokenizer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from tfm_cls.config import ModelConfig
from tfm_cls.errors import InitFromError
from tfm_cls.init_from.hf import HUB_ID, PACKAGE_PREFIX, classifier_from_hf
from tfm_cls.init_from.pretraining_run import classifier_from_pretraining_run
from tfm_cls.model import TransformerClassifier
from tfm_cls.runs import ENCODER_FILE, PRETRAIN_CONFIG_FILE

# A `tfm-cls pretrain` run is recognised by its files; a Hugging Face model folder by config.json.
_PRETRAIN_MARKERS = (PRETRAIN_CONFIG_FILE, ENCODER_FILE)


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
    if source.startswith(PACKAGE_PREFIX):
        return "hf"
    if source.startswith((".", "/", "~")) or not HUB_ID.match(source):
        raise InitFromError(f"model.init_from={source}: no such folder (nor a hub id like org/name or package:NAME)")
    return "hf"  # a hub id, e.g. sentence-transformers/all-MiniLM-L6-v2


def load_pretrained(source: str, model_cfg: ModelConfig, num_classes: int,
                    wide: dict[str, Any] | None = None) -> tuple[TransformerClassifier, Tokenizer]:
    """(model, tokenizer) for `model.init_from`; the head is new (num_classes outputs), and so is a
    Hugging Face model's wide branch (`wide`: WideConfig.model_kwargs)."""
    kind = init_kind(source)
    if kind == "pretrain":
        return classifier_from_pretraining_run(source, model_cfg, num_classes)
    return classifier_from_hf(source, model_cfg, num_classes, wide)


def with_vocabulary(model: TransformerClassifier, vocab_size: int, copy_id: int) -> TransformerClassifier:
    """The same classifier for a vocabulary grown to `vocab_size` (`tokenizer.extend_vocab`): the
    new embedding rows start as row `copy_id` (the [UNK] embedding, so the encoder reads a new
    token as it read [UNK] until trained); the wide branch, fitted later, is rebuilt at the new size."""
    old = model.config["vocab_size"]
    if vocab_size <= old:
        return model
    grown = TransformerClassifier(**{**model.config, "vocab_size": vocab_size})
    fresh = set(model.branch_keys())  # the wide branch's
    state = {k: v for k, v in model.state_dict().items() if k not in fresh}
    table = state["token_embedding.embedding.weight"]  # [old, d_model]
    state["token_embedding.embedding.weight"] = torch.cat([table, table[copy_id].expand(vocab_size - old, -1)])
    missing = grown.load_state_dict(state, strict=False).missing_keys
    assert set(missing) <= fresh, missing
    return grown
