"""A classifier without an encoder: the wide branch alone plus a bias, a linear bag-of-terms model.

    model = BagOfTermsClassifier(vocab_size, num_classes, weighting="tfidf", ngrams=2, buckets=2**18)
    logits = model(input_ids, attention_mask)     # [B, C] = WideBranch(input_ids, attention_mask) + bias

What a run ships when its encoder adds nothing measurable (tfm_cls.bag.candidates): the TF-IDF +
linear model fitted over the runtime's own tokens (the warm start of tfm_cls.bag.warm_start), so
the exported graph is ids -> hashed bag -> one product -> scores, with the tokenizer, labels and
decision rule in the same .onnx as every other export (`infer`, `serve`, `batch` read it unchanged).

Its config (model_config.json) names the architecture (`architecture: bag_of_terms`, which
tfm_cls.runs.build_model dispatches on) and the branch's keys as TransformerClassifier records them;
state-dict keys are `wide.weight`, `wide.idf` (tfidf) and `bias`. It has no positions, so it reads
texts of any length (tfm_cls.model.wide.token_limit: None).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from tfm_cls.model.wide import BUCKETS, WideBranch, check_config

ARCHITECTURE = "bag_of_terms"
"""model_config.json's `architecture` of this model (a TransformerClassifier records none)."""


class BagOfTermsClassifier(nn.Module):
    """input_ids [B, T] (+ attention_mask [B, T]) -> logits [B, num_classes]: a linear bag of terms."""

    def __init__(self, vocab_size: int, num_classes: int, pad_token_id: int | None = 0, max_len: int = 512,
                 wide_weighting: str = "tfidf", wide_ngrams: int = 2, wide_buckets: int = BUCKETS,
                 architecture: str = ARCHITECTURE, wide: bool = True, type_vocab_size: int = 0,
                 wide_skip_ids: list[int] | tuple[int, ...] = (), wide_char_rows: int = 0,
                 wide_char_slots: int = 0, wide_int8: bool = False) -> None:
        super().__init__()
        if architecture != ARCHITECTURE or not wide or type_vocab_size:
            raise ValueError(f"BagOfTermsClassifier: a config of architecture {ARCHITECTURE!r} with wide=true and "
                             f"no token types, got architecture={architecture!r}, wide={wide!r}, "
                             f"type_vocab_size={type_vocab_size!r}")
        for key, value in (("vocab_size", vocab_size), ("num_classes", num_classes), ("max_len", max_len)):
            if int(value) <= 0:
                raise ValueError(f"BagOfTermsClassifier: {key} must be positive, got {value!r}")
        self.config: dict[str, Any] = dict(
            architecture=ARCHITECTURE, vocab_size=vocab_size, num_classes=num_classes, pad_token_id=pad_token_id,
            max_len=max_len, wide=True, wide_weighting=wide_weighting, wide_ngrams=wide_ngrams,
            wide_buckets=wide_buckets, type_vocab_size=0,
        )
        # recorded only when set: configs written before the keys load unchanged
        if wide_skip_ids:
            self.config["wide_skip_ids"] = list(wide_skip_ids)
        if wide_char_rows or wide_char_slots:
            self.config.update(wide_char_rows=wide_char_rows, wide_char_slots=wide_char_slots)
        if wide_int8:  # its weights lie on an int8 grid (tfm_cls.bag.shrink): the export stores them as int8 rows
            self.config["wide_int8"] = True
        check_config(self.config)
        self.wide = WideBranch(vocab_size, num_classes, pad_token_id, wide_weighting, wide_ngrams, wide_buckets,
                               wide_skip_ids, wide_char_rows, wide_char_slots)
        self.bias = nn.Parameter(torch.zeros(num_classes))  # [C]

    @classmethod
    def from_wide_and_deep(cls, model: nn.Module, max_len: int, bias: Tensor | None = None) -> BagOfTermsClassifier:
        """The wide branch of a TransformerClassifier (its weights, its IDF table) and `bias` [C], the
        bias fitted with the branch (default: the head's, the model's logits with the encoder's
        contribution taken out). `max_len`: the tokens its tokenizer reads (recorded for the
        verifier's longest case)."""
        config, branch = model.config, model.wide
        if branch is None:
            raise ValueError("the model has no wide branch to keep")
        bag = cls(config["vocab_size"], config["num_classes"], config.get("pad_token_id"), max_len,
                  branch.weighting, branch.ngrams, branch.buckets or BUCKETS, wide_skip_ids=branch.skip_ids,
                  wide_char_rows=branch.char_rows, wide_char_slots=branch.char_slots)
        bag.wide.load_state_dict(branch.state_dict())
        with torch.no_grad():
            bag.bias.copy_(model.head.bias.detach() if bias is None else bias.to(bag.bias))
        return bag.to(branch.weight.device)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None) -> Tensor:
        """input_ids [B, T] int64, attention_mask [B, T] (1 = token, 0 = padding) -> logits [B, C]."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be 2-D [batch, seq], got shape {list(input_ids.shape)}")
        return self.wide(input_ids, attention_mask) + self.bias  # [B, C]

    def compacted(self) -> BagOfTermsClassifier:
        """A copy for inference whose branch holds only the rows its training texts reach
        (WideBranch.compacted): the same logits, a file the size of what the data holds. Not saved as a
        run's weights (its tables have another shape); the exporter writes it."""
        import copy

        out = copy.deepcopy(self)
        out.wide = self.wide.compacted()
        out.config = ({**self.config, "wide_char_rows": out.wide.char_rows, "wide_char_slots": out.wide.char_slots}
                      if self.wide.char_rows else dict(self.config))
        return out

    def branch_keys(self) -> list[str]:
        return [f"wide.{key}" for key in self.wide.state_dict()]

    def extra_repr(self) -> str:
        return "no encoder: the wide branch and a bias"
