"""TransformerClassifier: padding invariance, all-padding rows, options, config (the embedding
modules themselves: test_embeddings.py)."""

from __future__ import annotations

import json

import pytest
import torch

from tfm_cls.model import TransformerClassifier
from tfm_cls.model.classifier import pool

TINY = dict(vocab_size=50, num_classes=3, d_model=16, nhead=4, num_layers=2, dim_feedforward=32, dropout=0.0, max_len=32)
POOLINGS = ["mean", "cls", "max"]


def _model(**overrides) -> TransformerClassifier:
    torch.manual_seed(0)
    return TransformerClassifier(**{**TINY, **overrides}).eval()


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("pooling", POOLINGS)
def test_logits_do_not_depend_on_padding(pooling, norm_first):
    model = _model(pooling=pooling, norm_first=norm_first)
    ids = torch.randint(1, 50, (1, 5))
    alone = model(ids, torch.ones(1, 5, dtype=torch.long))

    # the same sequence in a batch padded further, with arbitrary ids under the padding
    batch_ids = torch.randint(1, 50, (3, 9))
    batch_ids[1, :5] = ids[0]
    mask = torch.zeros(3, 9, dtype=torch.long)
    mask[0, :9] = 1
    mask[1, :5] = 1
    mask[2, :2] = 1
    padded = model(batch_ids, mask)
    assert (padded[1] - alone[0]).abs().max() <= 1e-5

    changed = batch_ids.clone()
    changed[1, 5:] = torch.randint(1, 50, (4,))
    changed[2, 2:] = 0
    again = model(changed, mask)
    assert (again[1] - alone[0]).abs().max() <= 1e-5
    assert (again[2] - padded[2]).abs().max() <= 1e-5
    # and the model is not blind: changing a real token changes the logits
    changed[1, 1] = (changed[1, 1] % 49) + 1
    assert (model(changed, mask)[1] - alone[0]).abs().max() > 1e-4


@pytest.mark.parametrize("pooling", POOLINGS)
def test_empty_text_gives_finite_logits_and_zero_pooling(pooling):
    model = _model(pooling=pooling)
    ids = torch.randint(0, 50, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1] = 0  # nothing but padding
    for train in (False, True):
        model.train(train)
        logits = model(ids, mask)
        assert torch.isfinite(logits).all()
        hidden = model.encode(ids, mask)
        assert torch.isfinite(hidden).all()
        pooled = pool(hidden, mask != 0, pooling)
        assert torch.equal(pooled[1], torch.zeros(16))
        # the head sees zeros: the logits of an empty text are the head's bias
        if not train:
            torch.testing.assert_close(logits[1], model.head.bias)
    model.zero_grad()
    model.train()(ids, mask).sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_pooling_against_reference_loops():
    torch.manual_seed(1)
    hidden = torch.randn(3, 5, 4)
    keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    for b in range(3):
        n = int(keep[b].sum())
        torch.testing.assert_close(pool(hidden, keep, "mean")[b], hidden[b, :n].mean(0))
        torch.testing.assert_close(pool(hidden, keep, "max")[b], hidden[b, :n].max(0).values)
        torch.testing.assert_close(pool(hidden, keep, "cls")[b], hidden[b, 0])


def test_config_is_json_and_rebuilds_the_model():
    model = _model(pooling="cls", activation="relu", position_embedding="learned", type_vocab_size=2)
    config = json.loads(json.dumps(model.config))
    assert config["pooling"] == "cls" and config["type_vocab_size"] == 2
    clone = TransformerClassifier(**config).eval()
    clone.load_state_dict(model.state_dict(), strict=True)
    ids = torch.randint(1, 50, (2, 7))
    torch.testing.assert_close(clone(ids), model(ids))


def test_submodule_names_and_final_norm():
    pre = _model(norm_first=True)
    post = _model(norm_first=False)
    keys = set(pre.state_dict())
    assert "token_embedding.embedding.weight" in keys
    assert "encoder.layers.0.self_attn.in_proj_weight" in keys
    assert "encoder.norm.weight" in keys and "head.weight" in keys
    assert "encoder.norm.weight" not in set(post.state_dict())
    assert pre.encoder.layers[0].norm_first and not post.encoder.layers[0].norm_first


def test_bert_style_options():
    model = _model(
        norm_first=False,
        activation="gelu",
        layer_norm_eps=1e-12,
        scale_embedding=False,
        position_embedding="learned",
        type_vocab_size=2,
        embedding_layer_norm=True,
        pooler=True,
    )
    sd = model.state_dict()
    assert sd["positional_encoding.embedding.weight"].shape == (32, 16)
    assert sd["token_type_embedding.weight"].shape == (2, 16)
    assert "embedding_norm.weight" in sd and "pooler.dense.weight" in sd
    assert model.encoder.layers[0].norm1.eps == 1e-12

    # hidden states follow BERT's recipe: LayerNorm(tok + pos + type), then post-norm layers
    ids = torch.randint(1, 50, (2, 6))
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
    emb = (
        model.token_embedding.embedding.weight[ids]
        + model.positional_encoding.embedding.weight[:6]
        + model.token_type_embedding.weight[types]
    )
    expected = model.encoder(model.embedding_norm(emb))
    torch.testing.assert_close(model.encode(ids, token_type_ids=types), expected)
    # token_type_ids default to zeros
    torch.testing.assert_close(model.encode(ids), model.encode(ids, token_type_ids=torch.zeros_like(ids)))


def test_bad_constructor_arguments_are_named():
    with pytest.raises(ValueError, match=r"pooling must be one of \['mean', 'cls', 'max'\], got 'avg'"):
        TransformerClassifier(**{**TINY, "pooling": "avg"})
    with pytest.raises(ValueError, match=r"d_model must be divisible by nhead, got d_model=16, nhead=3"):
        TransformerClassifier(**{**TINY, "nhead": 3})
    with pytest.raises(ValueError, match="position_embedding"):
        TransformerClassifier(**{**TINY, "position_embedding": "rotary"})
    # the bag's skipped ids: token ids of the vocabulary, and only with the branch
    vocab = TINY["vocab_size"]
    for bad in ([vocab], [-1], ["[CLS]"], [True], "2"):
        with pytest.raises(ValueError, match=rf"wide_skip_ids must be a list of token ids below vocab_size \({vocab}\)"):
            TransformerClassifier(**{**TINY, "wide": True, "wide_skip_ids": bad})
    with pytest.raises(ValueError, match="wide_skip_ids .* needs wide=True"):
        TransformerClassifier(**{**TINY, "wide_skip_ids": [2]})
    assert TransformerClassifier(**{**TINY, "wide": True, "wide_skip_ids": [2, 3]}).wide.skip_ids == (2, 3)


def test_bad_inputs_are_named():
    model = _model()
    with pytest.raises(ValueError, match=r"input_ids must be 2-D \[batch, seq\], got shape \[7\]"):
        model(torch.ones(7, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids must be an integer tensor"):
        model(torch.ones(2, 7))
    with pytest.raises(ValueError, match=r"attention_mask must have the shape of input_ids \[2, 7\], got \[2, 6\]"):
        model(torch.ones(2, 7, dtype=torch.long), torch.ones(2, 6, dtype=torch.long))


def test_torch_export_with_dynamic_batch_and_sequence():
    """The length check and the padding-skipping encoder path must not block export: the graph
    is traced once and then reused on other shapes, with and without padding."""
    model = _model(num_layers=1, pooling="mean")
    ids = torch.randint(1, 50, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    batch = torch.export.Dim("batch")
    seq = torch.export.Dim("seq", max=TINY["max_len"])
    program = torch.export.export(model, (ids, mask), dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    exported = program.module()
    other_ids = torch.randint(1, 50, (3, 11))
    other_mask = torch.ones(3, 11, dtype=torch.long)
    other_mask[1, 5:] = 0
    other_mask[2] = 0
    assert (exported(other_ids, other_mask) - model(other_ids, other_mask)).abs().max() <= 1e-5
    with pytest.raises(Exception, match="32"):  # longer than max_len: rejected by the graph's guard
        exported(torch.randint(1, 50, (1, 40)), torch.ones(1, 40, dtype=torch.long))
