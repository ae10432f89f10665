"""Sequence classifier: embeddings -> Transformer encoder -> pooling -> linear head.

Sub-module names are an interface other code relies on (weight converters, MLM pretraining,
ONNX export): `token_embedding`, `token_type_embedding`, `positional_encoding`, `embedding_norm`,
`encoder`, `pooler`, `head`, and `wide` (the optional bag-of-tokens branch). See docs/model.md.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from tfm_cls.model.embeddings import LearnedPositionalEncoding, PositionalEncoding, TokenEmbedding
from tfm_cls.model.encoder import ACTIVATIONS, TransformerEncoder, TransformerEncoderLayer

POOLINGS = ("mean", "cls", "max")
WIDE_WEIGHTINGS = ("count", "tfidf")
WIDE_NGRAMS = (1, 2)
WIDE_BUCKETS = 2**18
"""Rows the pairs of adjacent tokens are hashed into with `wide_ngrams=2` (fastText's hashed word
n-grams; 2^18 measured as good as 2^20 on many-label documents, docs/tasks.md)."""
PAIR_HASH = 2_654_435_761
"""A pair (a, b) of token ids goes to bucket (a * PAIR_HASH + b) mod buckets: Knuth's multiplicative
hash constant (a prime near 2^32 / golden ratio), so (a, b) and (b, a) differ and neighbouring ids
spread over the buckets; in int64 without overflow for vocabularies under 3e9."""
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
        wide_buckets: int = WIDE_BUCKETS,
    ) -> None:
        super().__init__()
        self.config: dict[str, Any] = dict(
            vocab_size=vocab_size,
            num_classes=num_classes,
            d_model=d_model,
            nhead=nhead,
            num_layers=num_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            max_len=max_len,
            pooling=pooling,
            norm_first=norm_first,
            pad_token_id=pad_token_id,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            scale_embedding=scale_embedding,
            position_embedding=position_embedding,
            type_vocab_size=type_vocab_size,
            embedding_layer_norm=embedding_layer_norm,
            pooler=pooler,
        )
        if wide:  # recorded only when on: the configs of every earlier model stay as they were
            self.config["wide"] = True
        if wide_weighting != "count":
            self.config["wide_weighting"] = wide_weighting
        if encoder_length is not None:
            self.config["encoder_length"] = int(encoder_length)
        if wide_ngrams != 1:
            self.config["wide_ngrams"] = int(wide_ngrams)
            self.config["wide_buckets"] = int(wide_buckets)
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

        layer = TransformerEncoderLayer(
            d_model,
            nhead,
            dim_feedforward,
            dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=True,
            norm_first=norm_first,
        )
        # Pre-norm stacks end un-normalised, so they get a final LayerNorm; post-norm ones do not.
        final_norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else None
        self.encoder = TransformerEncoder(layer, num_layers, final_norm)

        self.pooler = Pooler(d_model) if pooler else None
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)
        # The wide branch: one weight per (token, class), a linear bag-of-tokens model summed into
        # the logits (Wide & Deep, Cheng et al. 2016). Zero at the start: the model begins as
        # the encoder alone. Padding's row stays zero (padding_idx) and is masked out anyway.
        # With wide_ngrams=2 the table has a row per hash bucket of adjacent-token pairs after the
        # vocabulary's rows (`wide_terms`).
        self.wide_ngrams = self.config.get("wide_ngrams", 1)
        self.wide_buckets = self.config.get("wide_buckets", 0)
        self.wide_rows = vocab_size + (self.wide_buckets if self.wide_ngrams == 2 else 0)
        self.wide = nn.Embedding(self.wide_rows, num_classes, padding_idx=pad_token_id) if wide else None
        if self.wide is not None:
            nn.init.zeros_(self.wide.weight)
        # `tfidf` weighting: each term's inverse document frequency in the training texts, set
        # before training (tfm_cls.classify.wide.set_idf); 0 for a term never seen there, which then adds
        # nothing to a text's bag, as a word outside a TF-IDF vocabulary.
        self.wide_weighting = self.config.get("wide_weighting", "count")
        if self.wide_weighting == "tfidf":
            self.register_buffer("wide_idf", torch.ones(self.wide_rows))

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
        return pooled if self.pooler is None else self.pooler(pooled)

    def logits_and_features(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """The forward pass, keeping the pooled vector: (logits [B, num_classes], features [B, d_model])."""
        pooled = self.features(input_ids, attention_mask, token_type_ids)  # [B, D]
        logits = self.head(self.dropout(pooled))  # [B, C]
        if self.wide is not None:
            logits = logits + self.wide_logits(input_ids, attention_mask)
        return logits, pooled

    def wide_logits(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """The bag-of-tokens branch: input_ids [B, T] -> [B, num_classes], the sum over the text's
        terms (`wide_terms`) of each term's class weights times its share of the bag (`wide_shares`)."""
        terms, keep = self.wide_terms(input_ids, attention_mask)  # [B, N]
        weights = self.wide(terms)  # [B, N, C]
        share = self.wide_shares(terms, keep)  # [B, N]
        return (weights * share.unsqueeze(-1)).sum(dim=1)  # [B, C]

    def wide_terms(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """What the bag counts: input_ids [B, T] -> (terms [B, N] int64, keep [B, N] bool, False at
        padding). The tokens (N = T) and, with wide_ngrams=2, also each pair of adjacent tokens,
        hashed into one of wide_buckets rows after the vocabulary's (N = 2T - 1): the word
        bigrams of a TF-IDF n-gram model, in fastText's hashed form."""
        keep = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask != 0
        if self.wide_ngrams == 1:
            return input_ids, keep
        pairs = (input_ids[:, :-1] * PAIR_HASH + input_ids[:, 1:]) % self.wide_buckets  # [B, T-1]
        terms = torch.cat([input_ids, pairs + self.config["vocab_size"]], dim=1)  # [B, 2T-1]
        return terms, torch.cat([keep, keep[:, :-1] & keep[:, 1:]], dim=1)

    def wide_shares(self, terms: Tensor, keep: Tensor) -> Tensor:
        """What each term position adds to the text's bag, terms / keep [B, N] (`wide_terms`) ->
        [B, N] (0 where not kept); the shares of a term's positions sum to its value in the bag.
        `count`: 1 / sqrt(the number of terms), an L2-normalised bag of one-hot terms.
        `tfidf`: scikit-learn's TfidfVectorizer(sublinear_tf=True) over the terms, the value of a
        term (1 + log tf) * idf, the bag L2-normalised; a position holds 1 / tf of its term's
        value. The term frequencies are counted by a scatter-add into a [B, rows] table (ONNX
        ScatterElements): linear in the length, where comparing every position with every other
        cost 40x more at 1,000 tokens."""
        keep_f = keep.to(self.wide.weight.dtype)  # [B, N]
        if self.wide_weighting == "count":
            return keep_f / keep_f.sum(dim=1, keepdim=True).clamp_min(1.0).sqrt()
        counts = torch.zeros(terms.shape[0], self.wide_rows, dtype=keep_f.dtype, device=terms.device)  # [B, rows]
        tf = counts.scatter_add(1, terms, keep_f).gather(1, terms).clamp_min(1.0)  # [B, N] this position's term count
        value = (1.0 + torch.log(tf)) * self.wide_idf[terms] * keep_f  # [B, N] the term's value
        norm = (value * value / tf).sum(dim=1, keepdim=True).sqrt().clamp_min(1e-12)  # [B, 1] the bag's L2 norm
        return value / tf / norm  # [B, N]

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """input_ids [B, T] int64, attention_mask [B, T] (1 = token, 0 = padding) -> logits
        [B, num_classes]."""
        return self.logits_and_features(input_ids, attention_mask, token_type_ids)[0]  # [B, C]

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


def token_limit(config: dict[str, Any]) -> int | None:
    """The most tokens a model of this config can read: its positional encoding's size, or None
    (no limit) when the encoder reads only the first `encoder_length` tokens and the wide branch,
    which has no positions, the rest."""
    return None if config.get("encoder_length") is not None else int(config["max_len"])


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
    if not isinstance(config.get("wide", False), bool):
        raise ValueError(f"TransformerClassifier: wide must be true or false, got {config['wide']!r}")
    weighting = config.get("wide_weighting", "count")
    if weighting not in WIDE_WEIGHTINGS or (weighting != "count" and not config.get("wide")):
        raise ValueError(f"TransformerClassifier: wide_weighting must be one of {list(WIDE_WEIGHTINGS)} (and needs "
                         f"wide=True), got {weighting!r}")
    ngrams = config.get("wide_ngrams", 1)
    if ngrams not in WIDE_NGRAMS or (ngrams != 1 and not config.get("wide")):
        raise ValueError(f"TransformerClassifier: wide_ngrams must be one of {list(WIDE_NGRAMS)} (and needs wide=True), "
                         f"got {ngrams!r}")
    if ngrams == 2 and not (isinstance(config.get("wide_buckets"), int) and config["wide_buckets"] >= 1):
        raise ValueError(f"TransformerClassifier: wide_buckets must be a positive integer, got {config.get('wide_buckets')!r}")
    length = config.get("encoder_length")
    if length is not None and not (config.get("wide") and 2 <= int(length) <= int(config["max_len"])):
        raise ValueError(
            f"TransformerClassifier: encoder_length={length} needs wide=True and 2 <= encoder_length <= max_len "
            f"({config['max_len']}): the tokens past it are read by the wide branch only"
        )
    if config["type_vocab_size"] < 0:
        raise ValueError(f"TransformerClassifier: type_vocab_size must be >= 0, got {config['type_vocab_size']!r}")
    pad = config["pad_token_id"]
    if pad is not None and not 0 <= pad < config["vocab_size"]:
        raise ValueError(
            f"TransformerClassifier: pad_token_id must be in [0, vocab_size={config['vocab_size']}), got {pad!r}"
        )
