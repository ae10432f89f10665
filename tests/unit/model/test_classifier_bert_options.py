"""The BERT-mapping options reproduce transformers' BertModel exactly (random tiny config), with the
weights converted by the library (tfm_cls.init_from.hf_weights)."""

from __future__ import annotations

import pytest
import torch

from tfm_cls.init_from.hf_weights import EncoderSpec, convert_state_dict
from tfm_cls.model import TransformerClassifier


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
    # The library's own conversion (what `model.init_from` of a BERT folder runs).
    spec = EncoderSpec(
        model_type="bert", vocab_size=60, d_model=32, n_layers=2, n_heads=4, d_ff=64, activation="gelu",
        layer_norm_eps=config.layer_norm_eps, max_positions=40, position_offset=0, type_vocab_size=2, pad_token_id=0,
    )
    weights, dropped = convert_state_dict(bert.state_dict(), spec)
    # BERT's pooler comes back apart; a [CLS]-pooling run keeps it, as BertForSequenceClassification.
    weights.update({name: dropped.pop(name) for name in ("pooler.dense.weight", "pooler.dense.bias")})
    assert set(dropped) <= {"embeddings.position_ids", "embeddings.token_type_ids"}  # buffers only
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
