"""Bad input: clear errors that say what was expected and what came; no NaN on empty rows."""

from __future__ import annotations

import pytest
import torch

from tfm_cls.model import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer


def test_embed_dim_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"embed_dim must be divisible by num_heads, got embed_dim=10, num_heads=4"):
        MultiheadAttention(10, 4)


def test_embed_dim_mismatch():
    mha = MultiheadAttention(16, 4)
    with pytest.raises(ValueError, match=r"query must have last dimension embed_dim=16, got shape \[2, 5, 12\]"):
        mha(torch.randn(2, 5, 12), torch.randn(2, 5, 16), torch.randn(2, 5, 16))
    with pytest.raises(ValueError, match=r"key must have last dimension embed_dim=16, got shape \[2, 5, 8\]"):
        mha(torch.randn(2, 5, 16), torch.randn(2, 5, 8), torch.randn(2, 5, 8))


def test_key_value_and_batch_mismatch():
    mha = MultiheadAttention(16, 4)
    with pytest.raises(ValueError, match=r"key and value must have the same batch and sequence sizes"):
        mha(torch.randn(2, 5, 16), torch.randn(2, 6, 16), torch.randn(2, 7, 16))
    with pytest.raises(ValueError, match=r"same batch size"):
        mha(torch.randn(2, 5, 16), torch.randn(3, 6, 16), torch.randn(3, 6, 16))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attn_mask": torch.zeros(5, 4, dtype=torch.bool)}, r"2-D attn_mask must have shape \[target_len, source_len\] = \[5, 6\], got \[5, 4\]"),
        ({"attn_mask": torch.zeros(3, 5, 6, dtype=torch.bool)}, r"3-D attn_mask must have shape \[batch \* num_heads, target_len, source_len\] = \[8, 5, 6\], got \[3, 5, 6\]"),
        ({"attn_mask": torch.zeros(1, 1, 5, 6)}, r"attn_mask must be 2-D .* got 4-D \[1, 1, 5, 6\]"),
        ({"attn_mask": torch.zeros(5, 6, dtype=torch.long)}, r"attn_mask must be a bool tensor .* got dtype torch.int64"),
        ({"key_padding_mask": torch.zeros(2, 5, dtype=torch.bool)}, r"key_padding_mask must have shape \[batch, source_len\] = \[2, 6\], got \[2, 5\]"),
        ({"key_padding_mask": torch.ones(2, 6, dtype=torch.long)}, r"key_padding_mask must be a bool tensor .* got dtype torch.int64 .*attention_mask == 0"),
    ],
)
def test_bad_masks(kwargs, message):
    mha = MultiheadAttention(16, 4)
    with pytest.raises(ValueError, match=message):
        mha(torch.randn(2, 5, 16), torch.randn(2, 6, 16), torch.randn(2, 6, 16), **kwargs)


@pytest.mark.parametrize("need_weights", [True, False])
def test_fully_masked_rows_stay_finite_in_attention(need_weights):
    torch.manual_seed(0)
    mha = MultiheadAttention(16, 4)
    x = torch.randn(2, 5, 16, requires_grad=True)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1] = True  # a row with nothing to attend to
    blocked = torch.ones(5, 5, dtype=torch.bool)  # and the same mask also blocks everything
    float_mask = torch.full((5, 5), float("-inf"))  # -inf from the user is clamped too
    for kwargs in ({"key_padding_mask": padding}, {"key_padding_mask": padding, "attn_mask": blocked}, {"attn_mask": float_mask}):
        out, weights = mha(x, x, x, need_weights=need_weights, **kwargs)
        assert torch.isfinite(out).all(), kwargs
        if need_weights:
            assert torch.isfinite(weights).all()
        out.sum().backward()
        assert torch.isfinite(x.grad).all()
        x.grad = None


@pytest.mark.parametrize("norm_first", [True, False])
def test_fully_padded_row_stays_finite_in_encoder(norm_first):
    torch.manual_seed(1)
    encoder = TransformerEncoder(TransformerEncoderLayer(16, 4, 32, dropout=0.0, norm_first=norm_first), 2)
    x = torch.randn(2, 5, 16)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[0] = True
    for train in (True, False):
        encoder.train(train)
        assert torch.isfinite(encoder(x, src_key_padding_mask=padding)).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fully_padded_row_stays_finite_under_autocast(dtype):
    from tfm_cls.model import TransformerClassifier

    torch.manual_seed(2)
    mha = MultiheadAttention(16, 4)
    x = torch.randn(2, 5, 16) * 30  # large scores: min + score must not overflow
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1] = True
    for need_weights in (True, False):
        with torch.autocast("cpu", dtype=dtype):
            out, _ = mha(x, x, x, key_padding_mask=padding, need_weights=need_weights)
        assert torch.isfinite(out).all()
    model = TransformerClassifier(50, 3, d_model=16, nhead=4, num_layers=2, dim_feedforward=32)
    ids = torch.randint(1, 50, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1] = 0
    with torch.autocast("cpu", dtype=dtype):
        logits = model(ids, mask)
    logits.float().sum().backward()
    assert torch.isfinite(logits).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
