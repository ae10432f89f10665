"""Numerical parity with torch.nn reference modules (weights copied via load_state_dict).

Outputs and gradients must agree within 1e-5 (float32) at every position that is not padding,
in train and eval mode, batch-first and sequence-first.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tfm_cls.model import (
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

ATOL = 1e-5


def _assert_close(ours: torch.Tensor, ref: torch.Tensor, what: str) -> None:
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} vs {tuple(ref.shape)}"
    diff = (ours - ref).abs().max().item()
    assert diff <= ATOL, f"{what}: max abs diff {diff:.3g} > {ATOL}"


def _lengths_mask(lengths: list[int], seq_len: int) -> torch.Tensor:
    """Key padding mask [B, T], True = padding, right padding."""
    return torch.arange(seq_len).unsqueeze(0) >= torch.tensor(lengths).unsqueeze(1)


def _valid(out: torch.Tensor, padding: torch.Tensor | None, batch_first: bool) -> torch.Tensor:
    """Rows of `out` at non-padded positions, as [N, D]."""
    if not batch_first:
        out = out.transpose(0, 1)
    if padding is None:
        return out.reshape(-1, out.size(-1))
    return out[~padding]


def _grads(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def _compare_grads(ours: nn.Module, ref: nn.Module) -> None:
    g_ours, g_ref = _grads(ours), _grads(ref)
    assert g_ours.keys() == g_ref.keys()
    assert g_ours, "no gradients were computed"
    for name in g_ref:
        _assert_close(g_ours[name], g_ref[name], f"grad {name}")


def _float_from_bool(mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.shape).masked_fill(mask, float("-inf"))


# ---------------------------------------------------------------------------------------------
# MultiheadAttention


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize(
    ("embed_dim", "num_heads", "mask_kind"),
    [
        (16, 1, "none"),
        (16, 4, "padding_bool"),
        (32, 8, "causal_bool"),
        (32, 2, "causal_float"),
        (64, 4, "per_head_bool"),
        (24, 4, "per_head_float+padding_float"),
        (16, 2, "padding_bool+causal_bool"),
    ],
)
def test_multihead_self_attention_matches_torch(batch_first, embed_dim, num_heads, mask_kind):
    torch.manual_seed(0)
    batch, seq = 3, 7
    ref = nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, batch_first=batch_first)
    ours = MultiheadAttention(embed_dim, num_heads, dropout=0.0, batch_first=batch_first)
    ours.load_state_dict(ref.state_dict(), strict=True)

    padding = _lengths_mask([7, 4, 1], seq)
    causal = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
    per_head = torch.rand(batch * num_heads, seq, seq) > 0.6
    per_head[:, :, 0] = False  # every query keeps at least one key
    kwargs: dict[str, torch.Tensor] = {}
    if "padding_bool" in mask_kind:
        kwargs["key_padding_mask"] = padding
    if "padding_float" in mask_kind:
        kwargs["key_padding_mask"] = _float_from_bool(padding)
    if "causal_bool" in mask_kind:
        kwargs["attn_mask"] = causal
    if "causal_float" in mask_kind:
        kwargs["attn_mask"] = _float_from_bool(causal)
    if "per_head_bool" in mask_kind:
        kwargs["attn_mask"] = per_head
    if "per_head_float" in mask_kind:
        kwargs["attn_mask"] = torch.randn(batch * num_heads, seq, seq)

    for train in (True, False):
        ours.train(train)
        ref.train(train)
        for average in (True, False):
            x = torch.randn(batch, seq, embed_dim) if batch_first else torch.randn(seq, batch, embed_dim)
            x_ref = x.clone().requires_grad_(True)
            x_ours = x.clone().requires_grad_(True)
            out_ref, w_ref = ref(x_ref, x_ref, x_ref, need_weights=True, average_attn_weights=average, **kwargs)
            out_ours, w_ours = ours(x_ours, x_ours, x_ours, need_weights=True, average_attn_weights=average, **kwargs)
            _assert_close(out_ours, out_ref, f"output ({mask_kind}, train={train})")
            _assert_close(w_ours, w_ref, f"weights (average={average})")

            ref.zero_grad()
            ours.zero_grad()
            probe = torch.randn_like(out_ref)
            (out_ref * probe).sum().backward()
            (out_ours * probe).sum().backward()
            _compare_grads(ours, ref)
            _assert_close(x_ours.grad, x_ref.grad, "input grad")

        # need_weights=False takes the fused kernel in both implementations.
        out_ref, _ = ref(x, x, x, need_weights=False, **kwargs)
        out_ours, w = ours(x, x, x, need_weights=False, **kwargs)
        assert w is None
        _assert_close(out_ours, out_ref, "output (need_weights=False)")


def test_multihead_cross_attention_matches_torch():
    """Query from one sequence, key = value from another (different lengths); padded memory."""
    torch.manual_seed(1)
    ref = nn.MultiheadAttention(32, 4, batch_first=True)
    ours = MultiheadAttention(32, 4)
    ours.load_state_dict(ref.state_dict(), strict=True)
    query = torch.randn(2, 5, 32, requires_grad=True)
    memory = torch.randn(2, 9, 32, requires_grad=True)
    padding = _lengths_mask([9, 3], 9)
    attn_mask = torch.rand(5, 9) > 0.7
    attn_mask[:, 0] = False
    for need_weights in (True, False):
        out_ref, w_ref = ref(query, memory, memory, key_padding_mask=padding, attn_mask=attn_mask, need_weights=need_weights)
        out_ours, w_ours = ours(query, memory, memory, key_padding_mask=padding, attn_mask=attn_mask, need_weights=need_weights)
        _assert_close(out_ours, out_ref, "cross-attention output")
        if need_weights:
            _assert_close(w_ours, w_ref, "cross-attention weights")
            # weights sum to one over the keys and are zero on padded keys
            torch.testing.assert_close(w_ours.sum(-1), torch.ones(2, 5))
            assert w_ours[1, :, 3:].abs().max() == 0
    ref.zero_grad()
    ours.zero_grad()
    grads = []
    for module in (ref, ours):
        q, m = query.detach().clone().requires_grad_(True), memory.detach().clone().requires_grad_(True)
        out, _ = module(q, m, m, key_padding_mask=padding)
        out.pow(2).mean().backward()
        grads.append((q.grad, m.grad))
    _compare_grads(ours, ref)
    _assert_close(grads[1][0], grads[0][0], "query grad")
    _assert_close(grads[1][1], grads[0][1], "memory grad")


def test_multihead_attention_distinct_key_value_and_no_bias():
    torch.manual_seed(2)
    ref = nn.MultiheadAttention(16, 2, bias=False, batch_first=True)
    ours = MultiheadAttention(16, 2, bias=False)
    assert set(ours.state_dict()) == set(ref.state_dict())
    ours.load_state_dict(ref.state_dict(), strict=True)
    q, k, v = torch.randn(2, 4, 16), torch.randn(2, 6, 16), torch.randn(2, 6, 16)
    _assert_close(ours(q, k, v)[0], ref(q, k, v)[0], "distinct q/k/v")


def test_multihead_attention_unbatched_matches_torch():
    torch.manual_seed(3)
    ref = nn.MultiheadAttention(16, 4, batch_first=True)
    ours = MultiheadAttention(16, 4)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(5, 16)
    out_ref, w_ref = ref(x, x, x)
    out_ours, w_ours = ours(x, x, x)
    _assert_close(out_ours, out_ref, "unbatched output")
    _assert_close(w_ours, w_ref, "unbatched weights")


def test_is_causal_without_mask_builds_causal_mask():
    torch.manual_seed(4)
    ours = MultiheadAttention(16, 4).eval()
    x = torch.randn(2, 6, 16)
    causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
    expected, _ = ours(x, x, x, attn_mask=causal, need_weights=False)
    for need_weights in (True, False):
        out, weights = ours(x, x, x, is_causal=True, need_weights=need_weights)
        _assert_close(out, expected, f"is_causal (need_weights={need_weights})")
    assert weights is None
    _, weights = ours(x, x, x, is_causal=True)
    assert weights.triu(diagonal=1).abs().max() == 0


# ---------------------------------------------------------------------------------------------
# Encoder / decoder / Transformer

LAYER_CONFIGS = [
    # d_model, nhead, dim_ff, activation, norm_first, batch_first
    (16, 4, 32, "relu", False, True),
    (32, 8, 64, "gelu", True, True),
    (64, 1, 48, "gelu", False, False),
    (24, 2, 40, "relu", True, False),
]


def _layer_kwargs(d, h, ff, act, norm_first, batch_first):
    return dict(
        d_model=d,
        nhead=h,
        dim_feedforward=ff,
        dropout=0.0,
        activation=act,
        norm_first=norm_first,
        batch_first=batch_first,
    )


def _make(batch_first: bool, batch: int, seq: int, d: int) -> torch.Tensor:
    return torch.randn(batch, seq, d) if batch_first else torch.randn(seq, batch, d)


@pytest.mark.parametrize(("d", "h", "ff", "act", "norm_first", "batch_first"), LAYER_CONFIGS)
@pytest.mark.parametrize("mask_kind", ["padding", "causal_float+padding", "none"])
def test_encoder_matches_torch(d, h, ff, act, norm_first, batch_first, mask_kind):
    torch.manual_seed(5)
    kwargs = _layer_kwargs(d, h, ff, act, norm_first, batch_first)
    ref = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(**kwargs), num_layers=2, norm=nn.LayerNorm(d), enable_nested_tensor=False
    )
    ours = TransformerEncoder(TransformerEncoderLayer(**kwargs), num_layers=2, norm=nn.LayerNorm(d))
    ours.load_state_dict(ref.state_dict(), strict=True)
    batch, seq = 3, 7
    padding = _lengths_mask([7, 5, 2], seq) if "padding" in mask_kind else None
    mask = _float_from_bool(torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1)) if "causal" in mask_kind else None

    for train in (True, False):
        ours.train(train)
        ref.train(train)
        x = _make(batch_first, batch, seq, d)
        x_ref, x_ours = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        out_ref = ref(x_ref, mask=mask, src_key_padding_mask=padding)
        out_ours = ours(x_ours, mask=mask, src_key_padding_mask=padding)
        valid_ref, valid_ours = _valid(out_ref, padding, batch_first), _valid(out_ours, padding, batch_first)
        _assert_close(valid_ours, valid_ref, f"encoder output (train={train})")
        ref.zero_grad()
        ours.zero_grad()
        probe = torch.randn_like(valid_ref)
        (valid_ref * probe).sum().backward()
        (valid_ours * probe).sum().backward()
        _compare_grads(ours, ref)
        _assert_close(_valid(x_ours.grad, padding, batch_first), _valid(x_ref.grad, padding, batch_first), "input grad")


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_matches_torch_fast_path(norm_first):
    """Eval + no_grad: torch takes its fused (and, post-norm, nested-tensor) fast path."""
    torch.manual_seed(6)
    kwargs = _layer_kwargs(32, 4, 64, "relu", norm_first, True)
    ref = nn.TransformerEncoder(nn.TransformerEncoderLayer(**kwargs), num_layers=2).eval()
    ours = TransformerEncoder(TransformerEncoderLayer(**kwargs), num_layers=2).eval()
    ours.load_state_dict(ref.state_dict(), strict=True)
    x = torch.randn(4, 9, 32)
    padding = _lengths_mask([9, 6, 3, 1], 9)
    with torch.no_grad():
        _assert_close(ours(x, src_key_padding_mask=padding)[~padding], ref(x, src_key_padding_mask=padding)[~padding], "fast path")


@pytest.mark.parametrize(("d", "h", "ff", "act", "norm_first", "batch_first"), LAYER_CONFIGS)
def test_decoder_matches_torch(d, h, ff, act, norm_first, batch_first):
    torch.manual_seed(7)
    kwargs = _layer_kwargs(d, h, ff, act, norm_first, batch_first)
    ref = nn.TransformerDecoder(nn.TransformerDecoderLayer(**kwargs), num_layers=2, norm=nn.LayerNorm(d))
    ours = TransformerDecoder(TransformerDecoderLayer(**kwargs), num_layers=2, norm=nn.LayerNorm(d))
    ours.load_state_dict(ref.state_dict(), strict=True)
    batch, tgt_len, src_len = 3, 6, 8
    tgt_padding = _lengths_mask([6, 4, 3], tgt_len)
    memory_padding = _lengths_mask([8, 2, 5], src_len)
    causal = torch.triu(torch.ones(tgt_len, tgt_len, dtype=torch.bool), 1)
    memory_mask = torch.rand(tgt_len, src_len) > 0.8
    memory_mask[:, 0] = False
    for train in (True, False):
        ours.train(train)
        ref.train(train)
        for tgt_mask, is_causal in ((causal, True), (_float_from_bool(causal), False)):
            tgt = _make(batch_first, batch, tgt_len, d)
            memory = _make(batch_first, batch, src_len, d)
            outs, inputs = [], []
            for module in (ref, ours):
                t, m = tgt.clone().requires_grad_(True), memory.clone().requires_grad_(True)
                out = module(
                    t,
                    m,
                    tgt_mask=tgt_mask,
                    memory_mask=memory_mask,
                    tgt_key_padding_mask=tgt_padding,
                    memory_key_padding_mask=memory_padding,
                    tgt_is_causal=is_causal,
                )
                outs.append(_valid(out, tgt_padding, batch_first))
                inputs.append((t, m))
            _assert_close(outs[1], outs[0], f"decoder output (train={train}, is_causal={is_causal})")
            ref.zero_grad()
            ours.zero_grad()
            probe = torch.randn_like(outs[0])
            for out in outs:
                (out * probe).sum().backward()
            _compare_grads(ours, ref)
            _assert_close(inputs[1][1].grad, inputs[0][1].grad, "memory grad")


@pytest.mark.parametrize(("d", "h", "ff", "act", "norm_first", "batch_first"), LAYER_CONFIGS[:3])
def test_transformer_matches_torch(d, h, ff, act, norm_first, batch_first):
    torch.manual_seed(8)
    kwargs = _layer_kwargs(d, h, ff, act, norm_first, batch_first)
    sizes = dict(num_encoder_layers=2, num_decoder_layers=1)
    ref = nn.Transformer(**kwargs, **sizes)
    ours = Transformer(**kwargs, **sizes)
    ours.load_state_dict(ref.state_dict(), strict=True)
    src_padding = _lengths_mask([8, 5], 8)
    tgt_padding = _lengths_mask([5, 3], 5)
    tgt_mask = Transformer.generate_square_subsequent_mask(5)
    for train in (True, False):
        ours.train(train)
        ref.train(train)
        src, tgt = _make(batch_first, 2, 8, d), _make(batch_first, 2, 5, d)
        args = dict(
            tgt_mask=tgt_mask,
            src_key_padding_mask=src_padding,
            tgt_key_padding_mask=tgt_padding,
            memory_key_padding_mask=src_padding,
        )
        outs = [_valid(m(src, tgt, **args), tgt_padding, batch_first) for m in (ref, ours)]
        _assert_close(outs[1], outs[0], f"transformer output (train={train})")
        ref.zero_grad()
        ours.zero_grad()
        for out in outs:
            out.square().mean().backward()
        _compare_grads(ours, ref)


def test_generate_square_subsequent_mask_masks_like_torch():
    ours = Transformer.generate_square_subsequent_mask(5)
    ref = nn.Transformer.generate_square_subsequent_mask(5)
    assert torch.equal(ours < 0, ref < 0)
    assert torch.isfinite(ours).all()
    assert torch.equal(ours[ref == 0], torch.zeros(15))


@pytest.mark.parametrize(
    ("ours_factory", "ref_factory"),
    [
        (lambda: MultiheadAttention(16, 4), lambda: nn.MultiheadAttention(16, 4, batch_first=True)),
        (
            lambda: TransformerEncoder(TransformerEncoderLayer(16, 4, 32), 2, nn.LayerNorm(16)),
            lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32), 2, nn.LayerNorm(16), enable_nested_tensor=False),
        ),
        (
            lambda: TransformerDecoder(TransformerDecoderLayer(16, 4, 32), 2, nn.LayerNorm(16)),
            lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, 32), 2, nn.LayerNorm(16)),
        ),
        (
            lambda: Transformer(16, 4, 2, 2, 32),
            lambda: nn.Transformer(16, 4, 2, 2, 32),
        ),
    ],
    ids=["mha", "encoder", "decoder", "transformer"],
)
def test_state_dict_round_trip_both_ways(ours_factory, ref_factory):
    torch.manual_seed(9)
    ours, ref = ours_factory(), ref_factory()
    sd_ours, sd_ref = ours.state_dict(), ref.state_dict()
    assert list(sd_ours) == list(sd_ref)
    assert {k: v.shape for k, v in sd_ours.items()} == {k: v.shape for k, v in sd_ref.items()}
    # torch -> ours
    ours.load_state_dict(sd_ref, strict=True)
    assert all(torch.equal(ours.state_dict()[k], v) for k, v in sd_ref.items())
    # ours -> torch
    fresh = ours_factory()
    ref.load_state_dict(fresh.state_dict(), strict=True)
    assert all(torch.equal(ref.state_dict()[k], v) for k, v in fresh.state_dict().items())


def test_transformer_init_is_xavier_uniform():
    torch.manual_seed(10)
    model = Transformer(64, 4, 1, 1, 128)
    w = model.encoder.layers[0].linear1.weight  # [128, 64]
    bound = (6.0 / (64 + 128)) ** 0.5
    assert w.abs().max() <= bound
    assert w.abs().max() > 0.9 * bound  # spread over the whole xavier range, not kaiming's smaller one


@pytest.mark.parametrize(("norm_first", "batch_first"), [(True, True), (False, False)])
def test_packed_and_dense_encoder_paths_agree(norm_first, batch_first):
    """The padding-skipping path (default with a boolean key padding mask) gives the dense
    path's outputs and gradients; both put zeros at padded positions."""
    torch.manual_seed(11)
    layer = TransformerEncoderLayer(32, 4, 64, dropout=0.0, norm_first=norm_first, batch_first=batch_first)
    packed = TransformerEncoder(layer, 2, nn.LayerNorm(32))
    dense = TransformerEncoder(layer, 2, nn.LayerNorm(32), enable_packing=False)
    dense.load_state_dict(packed.state_dict())
    padding = _lengths_mask([6, 3, 0, 1], 6)  # includes a row of nothing but padding
    x = _make(batch_first, 4, 6, 32)
    outs, inputs = [], []
    for module in (packed, dense):
        xi = x.clone().requires_grad_(True)
        out = module(xi, src_key_padding_mask=padding)
        outs.append(out)
        inputs.append(xi)
        (_valid(out, padding, batch_first) * torch.linspace(-1, 1, 32)).sum().backward()
    _assert_close(outs[0], outs[1], "packed vs dense output")
    pad_positions = padding if batch_first else padding.t()
    assert torch.equal(outs[0][pad_positions], torch.zeros(int(padding.sum()), 32))
    _compare_grads(packed, dense)
    _assert_close(inputs[0].grad, inputs[1].grad, "input grad")
    # a mask without any padding equals no mask at all
    no_pad = torch.zeros(4, 6, dtype=torch.bool)
    _assert_close(packed(x, src_key_padding_mask=no_pad), dense(x), "all-real mask")
