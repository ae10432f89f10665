"""The MLM model: the classifier's encoder with BERT's prediction head (tied to the embedding)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfm_cls.model import TransformerClassifier
from tfm_cls.pretrain.masking import IGNORE_INDEX


class MLMHead(nn.Module):
    """BERT's prediction head: dense + GELU + LayerNorm, then the output projection, whose matrix
    is the token embedding table (tied) and which has its own bias."""

    def __init__(self, d_model: int, vocab_size: int, layer_norm_eps: float = 1e-5) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: Tensor, embedding_weight: Tensor) -> Tensor:
        """hidden [..., D], embedding_weight [V, D] -> logits [..., V]."""
        x = self.norm(F.gelu(self.dense(hidden)))  # [..., D]
        return F.linear(x, embedding_weight, self.bias)  # [..., V]


class MaskedLanguageModel(TransformerClassifier):
    """The classifier's encoder (same sub-modules, same state-dict keys) with an MLM head.

    It *is* a TransformerClassifier whose `head` and `pooler` are removed, so `encode` is the very
    code fine-tuning runs and `encoder_state_dict()` loads into a classifier key for key.
    """

    def __init__(self, **encoder_config: Any) -> None:
        encoder_config.pop("num_classes", None)
        super().__init__(num_classes=1, **encoder_config)
        self.head = None  # no classification head (and no pooler): every parameter gets a gradient
        self.pooler = None
        self.config.pop("num_classes")
        self.mlm_head = MLMHead(self.config["d_model"], self.config["vocab_size"], self.config["layer_norm_eps"])

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, target_mask: Tensor | None = None) -> Tensor:
        """input_ids, attention_mask [B, T] -> logits [B, T, V]; with target_mask [B, T] (bool) only
        the N selected positions: [N, V] (the projection onto the vocabulary is the costly part)."""
        hidden = self.encode(input_ids, attention_mask)  # [B, T, D]
        if target_mask is not None:
            hidden = hidden[target_mask]  # [N, D]
        return self.mlm_head(hidden, self.token_embedding.embedding.weight)

    def encoder_state_dict(self) -> dict[str, Tensor]:
        """Everything but the MLM head: exactly the keys of a TransformerClassifier minus head/pooler."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith("mlm_head.")}


def mlm_loss(model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """Mean cross-entropy over the target tokens [], the MLM logits there [N, V] and their labels [N]."""
    labels = batch["labels"]  # [B, T]
    targets = labels != IGNORE_INDEX  # [B, T]
    logits = model(batch["input_ids"], batch["attention_mask"], targets)  # [N, V]
    gold = labels[targets]  # [N]
    if gold.numel() == 0:  # possible for a tiny batch: a zero loss that still touches every parameter
        return logits.sum() * 0.0, logits, gold
    return F.cross_entropy(logits.float(), gold), logits, gold
