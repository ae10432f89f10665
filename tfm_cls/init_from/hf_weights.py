"""Rename a BERT-family checkpoint's weights into TransformerClassifier's state-dict names.

Pure tensor bookkeeping, no model and no files: `convert_state_dict` takes the checkpoint's
tensors and the architecture read from config.json, and returns the encoder's state dict, or
raises `WeightMismatchError` listing every missing and every unexpected weight.

BERT, RoBERTa, XLM-R and ELECTRA (discriminator, embedding_size == hidden_size) share one layout
(`embeddings.*`, `encoder.layer.N.attention.self.{query,key,value}`, ...), stored either bare (a
saved `BertModel`) or under the task model's prefix (`bert.`, `roberta.`, `electra.`).
"""

from __future__ import annotations

import dataclasses
import re

import torch

from tfm_cls.errors import WeightMismatchError

# Weights outside the encoder, returned apart (`dropped`, logged by the caller), so a
# `BertForMaskedLM` or `...ForSequenceClassification` checkpoint converts like a bare encoder.
# BERT's `pooler` (tanh dense over [CLS]) is among them: the caller (pretrained.hf) puts it back
# when the run pools by [CLS], as BertForSequenceClassification does, and drops it otherwise.
IGNORED_PREFIXES = (
    "pooler.",
    "cls.",  # BERT MLM / NSP heads
    "lm_head.",  # RoBERTa MLM head
    "classifier.",  # *ForSequenceClassification
    "qa_outputs.",
    "discriminator_predictions.",  # ELECTRA replaced-token head
    "generator_predictions.",
    "generator_lm_head.",
)
# Non-parameter buffers that some transformers versions save.
IGNORED_KEYS = ("embeddings.position_ids", "embeddings.token_type_ids")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EncoderSpec:
    """The architecture of a BERT-family encoder, as read from its config.json."""

    model_type: str
    """config.json `model_type`: 'bert', 'roberta', 'xlm-roberta' or 'electra'."""
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    activation: str
    """TransformerClassifier activation: 'gelu' (exact erf, BERT's) or 'relu'."""
    layer_norm_eps: float
    max_positions: int
    """Usable positions: `max_position_embeddings` less `position_offset`."""
    position_offset: int
    """RoBERTa numbers positions from pad_token_id + 1, so its first rows are never used."""
    type_vocab_size: int
    pad_token_id: int


def _strip_prefix(state: dict[str, torch.Tensor], model_type: str) -> dict[str, torch.Tensor]:
    """Drop the task model's `bert.` / `roberta.` / `electra.` prefix where there is one."""
    prefix = {"bert": "bert.", "roberta": "roberta.", "xlm-roberta": "roberta.", "electra": "electra."}[
        model_type
    ]
    if any(k.startswith(prefix + "embeddings.") for k in state):
        return {k.removeprefix(prefix): v for k, v in state.items()}
    return dict(state)


def _expected_shapes(spec: EncoderSpec) -> dict[str, tuple[int, ...]]:
    """Every checkpoint key this architecture needs, with its shape."""
    d, f = spec.d_model, spec.d_ff
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (spec.vocab_size, d),
        "embeddings.position_embeddings.weight": (spec.max_positions + spec.position_offset, d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
    }
    if spec.type_vocab_size > 0:
        shapes["embeddings.token_type_embeddings.weight"] = (spec.type_vocab_size, d)
    for i in range(spec.n_layers):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[f"{p}{name}.weight"] = (d, d)
            shapes[f"{p}{name}.bias"] = (d,)
        shapes[f"{p}intermediate.dense.weight"] = (f, d)
        shapes[f"{p}intermediate.dense.bias"] = (f,)
        shapes[f"{p}output.dense.weight"] = (d, f)
        shapes[f"{p}output.dense.bias"] = (d,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{p}{norm}.weight"] = (d,)
            shapes[f"{p}{norm}.bias"] = (d,)
    return shapes


def _ignored(key: str) -> bool:
    return key in IGNORED_KEYS or key.startswith(IGNORED_PREFIXES)


def _summarise(keys: list[str], limit: int = 12) -> str:
    """List keys, collapsing per-layer repeats: 'encoder.layer.{0..5}.output.dense.bias'."""
    groups: dict[str, list[int]] = {}
    for key in keys:
        m = re.match(r"(.*?\.layer\.)(\d+)(\..*)", key)
        pattern, index = (m.group(1) + "{}" + m.group(3), int(m.group(2))) if m else (key, -1)
        groups.setdefault(pattern, []).append(index)
    lines = []
    for pattern, indices in groups.items():
        if indices == [-1]:
            lines.append(pattern)
        else:
            lines.append(pattern.format("{" + ",".join(str(i) for i in sorted(indices)) + "}"))
    more = f"\n  ... and {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n  " + "\n  ".join(lines[:limit]) + more


def check_weights(
    state: dict[str, torch.Tensor], spec: EncoderSpec
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Strip the task prefix and check keys and shapes; return (encoder tensors, task-head tensors).

    Raises WeightMismatchError naming every missing key, unexpected key and shape mismatch.
    """
    state = _strip_prefix(state, spec.model_type)
    expected = _expected_shapes(spec)
    missing = sorted(k for k in expected if k not in state)
    dropped = {k: state[k] for k in sorted(state) if k not in expected and _ignored(k)}
    extra = sorted(k for k in state if k not in expected and not _ignored(k))
    wrong_shape = [
        f"{k}: checkpoint {tuple(state[k].shape)}, config.json implies {expected[k]}"
        for k in sorted(expected)
        if k in state and tuple(state[k].shape) != expected[k]
    ]
    problems = []
    if missing:
        problems.append(f"missing weights ({len(missing)}):{_summarise(missing)}")
    if extra:
        problems.append(f"unexpected weights ({len(extra)}), not part of a {spec.model_type} encoder:{_summarise(extra)}")
    if wrong_shape:
        problems.append("shape mismatches:\n  " + "\n  ".join(wrong_shape))
    if problems:
        raise WeightMismatchError("\n".join(problems))
    return {k: state[k] for k in expected}, dropped


def convert_state_dict(
    state: dict[str, torch.Tensor], spec: EncoderSpec
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Checkpoint tensors -> (TransformerClassifier encoder state dict in float32, the task-head
    tensors it does not use: BERT's pooler, MLM / classification heads).

    Query, key and value are stacked into torch's `in_proj_weight` [3 * d_model, d_model] in
    that order (the order nn.MultiheadAttention splits them). BERT is post-norm, so
    `attention.output.LayerNorm` is `norm1` and `output.LayerNorm` is `norm2`.
    """
    src, dropped = check_weights(state, spec)
    src = {k: v.detach().to(torch.float32) for k, v in src.items()}
    out = {
        "token_embedding.embedding.weight": src["embeddings.word_embeddings.weight"],
        # [max_positions, d_model]: RoBERTa's first `position_offset` rows belong to no real position.
        "positional_encoding.embedding.weight": src["embeddings.position_embeddings.weight"][
            spec.position_offset :
        ].clone(),
        "embedding_norm.weight": src["embeddings.LayerNorm.weight"],
        "embedding_norm.bias": src["embeddings.LayerNorm.bias"],
    }
    if spec.type_vocab_size > 0:
        out["token_type_embedding.weight"] = src["embeddings.token_type_embeddings.weight"]
    for i in range(spec.n_layers):
        p, q = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        qkv = ("attention.self.query", "attention.self.key", "attention.self.value")
        out[q + "self_attn.in_proj_weight"] = torch.cat([src[f"{p}{n}.weight"] for n in qkv])  # [3D, D]
        out[q + "self_attn.in_proj_bias"] = torch.cat([src[f"{p}{n}.bias"] for n in qkv])  # [3D]
        for ours, theirs in (
            ("self_attn.out_proj", "attention.output.dense"),
            ("norm1", "attention.output.LayerNorm"),
            ("linear1", "intermediate.dense"),
            ("linear2", "output.dense"),
            ("norm2", "output.LayerNorm"),
        ):
            out[f"{q}{ours}.weight"] = src[f"{p}{theirs}.weight"]
            out[f"{q}{ours}.bias"] = src[f"{p}{theirs}.bias"]
    return out, dropped
