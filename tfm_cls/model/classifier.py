"""Sequence classifier: embeddings -> Transformer encoder -> pooling -> linear head.

Sub-module names are an interface other code relies on (weight converters, MLM pretraining,
ONNX export): `token_embedding`, `token_type_embedding`, `positional_encoding`, `embedding_norm`,
`encoder`, `pooler`, `head`, and `wide` (the optional bag-of-tokens branch, tfm_cls.model.wide).
See docs/model.md.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfm_cls.model.embeddings import LearnedPositionalEncoding, PositionalEncoding, TokenEmbedding
from tfm_cls.model.encoder import ACTIVATIONS, TransformerEncoder, TransformerEncoderLayer
from tfm_cls.model.wide import (
    BUCKETS,
    GRAM_NAMES,
    WideBranch,
    check_config,
    config_entries,
    upgrade_state_dict,
)
from tfm_cls.model.wide import token_limit as token_limit  # re-exported: the classifier's reading limit

POOLINGS = ("mean", "cls", "max")
POSITION_EMBEDDINGS = ("sinusoidal", "learned")


class Pooler(nn.Module):
    """BERT's pooler: dense + tanh over the pooled vector."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(self.dense(x))


def pool(hidden: Tensor, keep: Tensor, pooling: str) -> Tensor:
    """hidden [B, T, D], keep [B, T] bool (True = token) -> [B, D]. Padding is ignored; a row
    with no token pools to zeros."""
    keep3 = keep.unsqueeze(-1)  # [B, T, 1]
    if pooling == "cls":
        return torch.where(keep3[:, 0], hidden[:, 0], 0.0)  # [B, D]
    if pooling == "mean":
        summed = torch.where(keep3, hidden, 0.0).sum(dim=1)  # [B, D]
        count = keep3.sum(dim=1).clamp_min(1).to(hidden.dtype)  # [B, 1]
        return summed / count
    # max
    lowest = torch.finfo(hidden.dtype).min
    pooled = torch.where(keep3, hidden, lowest).amax(dim=1)  # [B, D]
    return torch.where(keep.any(dim=1, keepdim=True), pooled, 0.0)


class TransformerClassifier(nn.Module):
    """Text classifier over token ids.

    Defaults are those of our from-scratch models (pre-norm, GELU, sinusoidal positions, scaled
    embeddings). The extra options (`activation`, `layer_norm_eps`, `scale_embedding`,
    `position_embedding='learned'`, `type_vocab_size`, `embedding_layer_norm`, `pooler`,
    `norm_first=False`) let BERT-family checkpoints map onto this same module.

    `type_vocab_size=2` is the segment embedding of sentence pairs (token_type_ids 0 for the
    first text, 1 for the second; docs/tasks.md); 0, the default, adds no parameter.

    `config` holds the constructor arguments as a plain JSON-serialisable dict;
    `TransformerClassifier(**model.config)` rebuilds the architecture.
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        d_model: int = 256,
        nhead: int = 4,
        num_layers: int = 4,
        dim_feedforward: int = 1024,
        dropout: float = 0.1,
        max_len: int = 512,
        pooling: str = "mean",
        norm_first: bool = True,
        pad_token_id: int | None = 0,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
        scale_embedding: bool = True,
        position_embedding: str = "sinusoidal",
        type_vocab_size: int = 0,
        embedding_layer_norm: bool = False,
        pooler: bool = False,
        wide: bool = False,
        encoder_length: int | None = None,
        wide_weighting: str = "count",
        wide_ngrams: int = 1,
        wide_buckets: int = BUCKETS,
        wide_skip_ids: list[int] | tuple[int, ...] = (),
        wide_char_rows: int = 0,
        wide_char_slots: int = 0,
        normalize: bool = False,
    ) -> None:
        super().__init__()
        self.config: dict[str, Any] = dict(
            vocab_size=vocab_size, num_classes=num_classes, d_model=d_model, nhead=nhead, num_layers=num_layers,
            dim_feedforward=dim_feedforward, dropout=dropout, max_len=max_len, pooling=pooling, norm_first=norm_first,
            pad_token_id=pad_token_id, activation=activation, layer_norm_eps=layer_norm_eps,
            scale_embedding=scale_embedding, position_embedding=position_embedding, type_vocab_size=type_vocab_size,
            embedding_layer_norm=embedding_layer_norm, pooler=pooler,
        )
        # the wide branch's keys, recorded only when not their defaults (tfm_cls.model.wide)
        self.config.update(config_entries(wide, encoder_length, wide_weighting, wide_ngrams, wide_buckets,
                                          wide_skip_ids, wide_char_rows, wide_char_slots))
        if normalize:  # recorded only when on: configs written before the option load unchanged
            self.config["normalize"] = True
        self.normalize = normalize
        self.encoder_length = self.config.get("encoder_length")
        _validate(self.config)
        self.pooling = pooling

        self.token_embedding = TokenEmbedding(vocab_size, d_model, padding_idx=pad_token_id, scale=scale_embedding)
        self.token_type_embedding = nn.Embedding(type_vocab_size, d_model) if type_vocab_size > 0 else None
        if self.token_type_embedding is not None:
            nn.init.normal_(self.token_type_embedding.weight, std=0.02)
        # BERT order: sum(token, position, type) -> LayerNorm -> dropout. Then the dropout moves
        # after the norm, out of the positional encoding.
        position_dropout = 0.0 if embedding_layer_norm else dropout
        if position_embedding == "learned":
            self.positional_encoding = LearnedPositionalEncoding(d_model, position_dropout, max_len)
        else:
            self.positional_encoding = PositionalEncoding(d_model, position_dropout, max_len)
        self.embedding_norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if embedding_layer_norm else None
        self.embedding_dropout = nn.Dropout(dropout) if embedding_layer_norm else None

        layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation=activation,
                                        layer_norm_eps=layer_norm_eps, batch_first=True, norm_first=norm_first)
        # Pre-norm stacks end un-normalised, so they get a final LayerNorm; post-norm ones do not.
        final_norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else None
        self.encoder = TransformerEncoder(layer, num_layers, final_norm)

        self.pooler = Pooler(d_model) if pooler else None
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)
        # The wide branch (None without it): a linear bag of the text's terms summed into the logits.
        self.wide = WideBranch.from_config(self.config)
        # state dicts saved before the branch was a module of its own load too (`wide_idf`)
        self.register_load_state_dict_pre_hook(upgrade_state_dict)

    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """input_ids [B, T] int64; attention_mask [B, T] (1 = token, 0 = padding; None = no
        padding); token_type_ids [B, T] (None = zeros) -> hidden states [B, T, d_model]."""
        self._check_inputs(input_ids, attention_mask, token_type_ids)
        x = self.token_embedding(input_ids)  # [B, T, D]
        if self.token_type_embedding is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embedding(token_type_ids)
        x = self.positional_encoding(x)
        if self.embedding_norm is not None:
            x = self.embedding_dropout(self.embedding_norm(x))
        padding_mask = None if attention_mask is None else attention_mask == 0  # [B, T], True = pad
        return self.encoder(x, src_key_padding_mask=padding_mask)  # [B, T, D]

    def features(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """The pooled text vector the head reads: input_ids [B, T] -> [B, d_model]. With
        `encoder_length`, the encoder reads the first encoder_length tokens only (the wide branch
        reads them all)."""
        if self.encoder_length is not None:
            k = self.encoder_length
            input_ids = input_ids[:, :k]
            attention_mask = None if attention_mask is None else attention_mask[:, :k]
            token_type_ids = None if token_type_ids is None else token_type_ids[:, :k]
        hidden = self.encode(input_ids, attention_mask, token_type_ids)  # [B, T, D]
        keep = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask != 0
        pooled = pool(hidden, keep, self.pooling)  # [B, D]
        pooled = pooled if self.pooler is None else self.pooler(pooled)
        # `normalize`: unit vectors, what a contrastive fine-tuning shapes and its head was fitted on
        return F.normalize(pooled, dim=-1) if self.normalize else pooled  # [B, D]

    def logits_and_features(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The forward pass, keeping the pooled vector: (logits [B, num_classes], features [B, d_model])."""
        pooled = self.features(input_ids, attention_mask, token_type_ids)  # [B, D]
        logits = self.head(self.dropout(pooled))  # [B, C]
        if self.wide is not None:
            logits = logits + self.wide(input_ids, attention_mask)  # [B, C]
        return logits, pooled

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """input_ids [B, T] int64, attention_mask [B, T] (1 = token, 0 = padding) -> logits
        [B, num_classes]."""
        return self.logits_and_features(input_ids, attention_mask, token_type_ids)[0]  # [B, C]

    def branch_keys(self) -> list[str]:
        """The state-dict keys of the wide branch (none without it): no pretrained encoder has them,
        they are fitted or trained here (tfm_cls.init_from)."""
        return [] if self.wide is None else [f"wide.{key}" for key in self.wide.state_dict()]

    def _check_inputs(self, input_ids: Tensor, attention_mask: Tensor | None, token_type_ids: Tensor | None) -> None:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be 2-D [batch, seq], got shape {list(input_ids.shape)}")
        if input_ids.is_floating_point() or input_ids.dtype == torch.bool:
            raise ValueError(f"input_ids must be an integer tensor (int64), got dtype {input_ids.dtype}")
        for name, t in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
            if t is not None and t.shape != input_ids.shape:
                raise ValueError(
                    f"{name} must have the shape of input_ids {list(input_ids.shape)}, got {list(t.shape)}"
                )


def describe_config(config: dict[str, Any]) -> str:
    """What a classifier of this config is, in one phrase (the model card, the report page): the
    encoder's shape, or a model without one (tfm_cls.model.bag)."""
    from tfm_cls.model.bag import ARCHITECTURE

    if config.get("architecture") == ARCHITECTURE:
        grams = GRAM_NAMES.get(config.get("wide_ngrams", 1))
        pairs = f" and hashed {grams} of adjacent tokens ({config['wide_buckets']} buckets)" if grams else ""
        chars = (f", beside a bag of each token's character 2-5-grams ({config['wide_char_rows']} grams)"
                 if config.get("wide_char_rows") else "")
        return (f"no encoder: a linear model over a {config.get('wide_weighting', 'count')} bag of the text's "
                f"{config['vocab_size']} vocabulary tokens{pairs}{chars}")
    return (f"{config['num_layers']} layers, d_model {config['d_model']}, {config['nhead']} attention heads, "
            f"feed-forward {config['dim_feedforward']}, {config.get('pooling', 'mean')} pooling, "
            f"{config.get('position_embedding', 'sinusoidal')} positions"
            + (", plus a bag-of-terms branch" if config.get("wide") else ""))


def _validate(config: dict[str, Any]) -> None:
    for key in ("vocab_size", "num_classes", "d_model", "nhead", "num_layers", "dim_feedforward", "max_len"):
        if int(config[key]) <= 0:
            raise ValueError(f"TransformerClassifier: {key} must be positive, got {config[key]!r}")
    if config["d_model"] % config["nhead"] != 0:
        raise ValueError(
            f"TransformerClassifier: d_model must be divisible by nhead, got d_model={config['d_model']}, "
            f"nhead={config['nhead']}"
        )
    choices = {"pooling": POOLINGS, "activation": tuple(ACTIVATIONS), "position_embedding": POSITION_EMBEDDINGS}
    for key, allowed in choices.items():
        if config[key] not in allowed:
            raise ValueError(f"TransformerClassifier: {key} must be one of {list(allowed)}, got {config[key]!r}")
    if not 0.0 <= config["dropout"] < 1.0:
        raise ValueError(f"TransformerClassifier: dropout must be in [0, 1), got {config['dropout']!r}")
    check_config(config)  # the wide branch's keys
    if config["type_vocab_size"] < 0:
        raise ValueError(f"TransformerClassifier: type_vocab_size must be >= 0, got {config['type_vocab_size']!r}")
    pad = config["pad_token_id"]
    if pad is not None and not 0 <= pad < config["vocab_size"]:
        raise ValueError(
            f"TransformerClassifier: pad_token_id must be in [0, vocab_size={config['vocab_size']}), got {pad!r}"
        )
