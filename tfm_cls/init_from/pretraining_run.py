"""A classifier from a `tfm-cls pretrain` run: its tokenizer, its encoder weights, a new head."""

from __future__ import annotations

import logging
from pathlib import Path

from safetensors.torch import load_file
from tokenizers import Tokenizer

from tfm_cls import runs as R
from tfm_cls.config import ModelConfig
from tfm_cls.data.tokenizer import load_tokenizer
from tfm_cls.errors import CheckpointError, ConfigError, RunDirError
from tfm_cls.io import read_json
from tfm_cls.model import TransformerClassifier

logger = logging.getLogger(__name__)

# Classifier keys that pretraining does not produce: a fine-tuned model gets them new.
HEAD_PREFIXES = ("head.", "pooler.")


def classifier_from_pretraining_run(
    run_dir: str | Path, model_cfg: ModelConfig, num_classes: int
) -> tuple[TransformerClassifier, Tokenizer]:
    """A TransformerClassifier with the pretraining run's tokenizer and encoder weights and a new head.

    As for Hugging Face checkpoints (tfm_cls.init_from.hf), the architecture comes from the run (its
    model_config.json) and `model_cfg` gives only what does not touch the weights: `dropout` and
    `pooling`. Weights that do not fit (e.g. a tokenizer whose vocabulary is not the embedding's)
    are a clear error, never a silent partial load.
    """
    run_dir = Path(run_dir)
    for name in (R.MODEL_CONFIG_FILE, R.TOKENIZER_FILE, R.ENCODER_FILE):
        if not (run_dir / name).is_file():
            raise RunDirError(f"model.init_from={run_dir}: not a finished pretraining run ({name} is missing)")
    encoder_config = read_json(run_dir / R.MODEL_CONFIG_FILE)
    if not isinstance(encoder_config, dict) or "vocab_size" not in encoder_config:
        raise RunDirError(f"{run_dir / R.MODEL_CONFIG_FILE}: expected a JSON object of model arguments with vocab_size")
    requested = model_cfg.model_kwargs()
    ignored = {
        k: (encoder_config[k], v)
        for k, v in requested.items()
        if k not in ("dropout", "pooling", "normalize") and k in encoder_config and encoder_config[k] != v
    }
    if ignored:
        logger.info(
            "model.init_from: architecture from the pretrained encoder (%s)",
            ", ".join(f"{k}={a!r}, not the configured {b!r}" for k, (a, b) in sorted(ignored.items())),
        )
    config = {**encoder_config, "dropout": requested["dropout"], "pooling": requested["pooling"], "num_classes": num_classes,
              **({"normalize": True} if requested.get("normalize") else {})}
    model = TransformerClassifier(**config)

    tokenizer = load_tokenizer(run_dir / R.TOKENIZER_FILE)
    vocab = tokenizer.get_vocab_size()
    if vocab != config["vocab_size"]:
        raise ConfigError(
            f"model.init_from={run_dir}: {R.TOKENIZER_FILE} has {vocab} tokens but the pretrained embedding has "
            f"{config['vocab_size']} rows; the tokenizer does not belong to these weights"
        )
    try:
        state = load_file(str(run_dir / R.ENCODER_FILE))
    except Exception as err:  # safetensors raises its own error types for torn / foreign files
        raise CheckpointError(f"{run_dir / R.ENCODER_FILE}: corrupt or truncated safetensors file ({err})") from err
    expected = {k: v for k, v in model.state_dict().items() if not k.startswith(HEAD_PREFIXES)}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(state) & set(expected) if state[k].shape != expected[k].shape)
    if missing or unexpected or wrong:
        detail = "; ".join(
            f"{what}: {keys[:4]}"
            for what, keys in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", wrong))
            if keys
        )
        raise CheckpointError(f"{run_dir / R.ENCODER_FILE}: weights do not fit the classifier ({detail})")
    model.load_state_dict(state, strict=False)  # only head (and pooler) keep their fresh initialisation
    logger.info("initialised %d encoder tensors from %s; new %d-class head", len(state), run_dir, num_classes)
    return model, tokenizer
