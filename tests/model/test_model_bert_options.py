"""The BERT-mapping options reproduce transformers' BertModel exactly (random tiny config)."""

from __future__ import annotations

import pytest
import torch

from tfm_cls.model import TransformerClassifier


def _bert_to_ours(sd: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    renamed = {
        "token_embedding.embedding.weight": sd["embeddings.word_embeddings.weight"],
        "positional_encoding.embedding.weight": sd["embeddings.position_embeddings.weight"],
        "token_type_embedding.weight": sd["embeddings.token_type_embeddings.weight"],
        "embedding_norm.weight": sd["embeddings.LayerNorm.weight"],
        "embedding_norm.bias": sd["embeddings.LayerNorm.bias"],
        "pooler.dense.weight": sd["pooler.dense.weight"],
        "pooler.dense.bias": sd["pooler.dense.bias"],
    }
    for i in range(num_layers):
        src, dst = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            renamed[f"{dst}self_attn.in_proj_{kind}"] = torch.cat(
                [sd[f"{src}attention.self.{name}.{kind}"] for name in ("query", "key", "value")]
            )
            renamed[f"{dst}self_attn.out_proj.{kind}"] = sd[f"{src}attention.output.dense.{kind}"]
            renamed[f"{dst}norm1.{kind}"] = sd[f"{src}attention.output.LayerNorm.{kind}"]
            renamed[f"{dst}linear1.{kind}"] = sd[f"{src}intermediate.dense.{kind}"]
            renamed[f"{dst}linear2.{kind}"] = sd[f"{src}output.dense.{kind}"]
            renamed[f"{dst}norm2.{kind}"] = sd[f"{src}output.LayerNorm.{kind}"]
    return renamed


@pytest.mark.slow  # importing transformers takes ~10 s
def test_bert_options_reproduce_bert_model():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=60,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    bert = transformers.BertModel(config).eval()
    ours = TransformerClassifier(
        vocab_size=60,
        num_classes=2,
        d_model=32,
        nhead=4,
        num_layers=2,
        dim_feedforward=64,
        dropout=0.0,
        max_len=40,
        pooling="cls",
        norm_first=False,
        activation="gelu",
        layer_norm_eps=config.layer_norm_eps,
        scale_embedding=False,
        position_embedding="learned",
        type_vocab_size=2,
        embedding_layer_norm=True,
        pooler=True,
    ).eval()
    weights = _bert_to_ours(bert.state_dict(), 2)
    weights.update({"head.weight": ours.head.weight.detach(), "head.bias": ours.head.bias.detach()})
    ours.load_state_dict(weights, strict=True)

    ids = torch.randint(1, 60, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 5:] = 0
    types = torch.zeros_like(ids)
    types[:, 4:] = 1
    with torch.no_grad():
        expected = bert(input_ids=ids, attention_mask=mask, token_type_ids=types)
        hidden = ours.encode(ids, mask, types)
        logits = ours(ids, mask, types)
    assert (hidden - expected.last_hidden_state)[mask.bool()].abs().max() <= 1e-5
    torch.testing.assert_close(logits, ours.head(expected.pooler_output), atol=1e-5, rtol=0)
