"""Seq2SeqTransformer: causality, greedy decoding against a step-by-step reference, config."""

from __future__ import annotations

import json

import torch

from tfm_cls.model import Seq2SeqTransformer

PAD, BOS, EOS = 0, 1, 2


def _model(**overrides) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    args = dict(
        src_vocab_size=20,
        tgt_vocab_size=12,
        d_model=16,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        max_len=40,
        pad_token_id=PAD,
    )
    return Seq2SeqTransformer(**{**args, **overrides}).eval()


def _reference_greedy(model, src, src_mask, max_len):
    """The obvious loop: call forward on the whole prefix, take argmax of the last position."""
    rows = []
    for b in range(src.size(0)):
        out = [BOS]
        while len(out) < max_len:
            logits = model(src[b : b + 1], torch.tensor([out]), src_mask[b : b + 1])
            token = int(logits[0, -1].argmax())
            out.append(token)
            if token == EOS:
                break
        rows.append(out)
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


def test_forward_shapes_and_causality():
    model = _model()
    src = torch.randint(3, 20, (2, 7))
    tgt = torch.randint(3, 12, (2, 5))
    logits = model(src, tgt)
    assert logits.shape == (2, 5, 12)
    changed = tgt.clone()
    changed[:, 3] = (changed[:, 3] + 1) % 12
    again = model(src, changed)
    assert (again[:, :3] - logits[:, :3]).abs().max() <= 1e-6  # earlier positions unaffected
    assert (again[:, 3:] - logits[:, 3:]).abs().max() > 1e-4  # later ones do change


def test_causality_holds_with_target_padding():
    model = _model(norm_first=False)
    src = torch.randint(3, 20, (2, 6))
    tgt = torch.randint(3, 12, (2, 5))
    tgt_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    logits = model(src, tgt, tgt_attention_mask=tgt_mask)
    changed = tgt.clone()
    changed[:, 2] = (changed[:, 2] + 1) % 12
    assert (model(src, changed, tgt_attention_mask=tgt_mask)[:, :2] - logits[:, :2]).abs().max() <= 1e-6


def test_encode_decode_equals_forward():
    model = _model()
    src = torch.randint(3, 20, (2, 7))
    src_mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    tgt = torch.randint(3, 12, (2, 4))
    memory = model.encode(src, src_mask)
    torch.testing.assert_close(model.decode(tgt, memory, memory_attention_mask=src_mask), model(src, tgt, src_mask))


def test_source_padding_is_ignored():
    model = _model()
    src = torch.randint(3, 20, (1, 4))
    tgt = torch.randint(3, 12, (1, 3))
    alone = model(src, tgt)
    padded = torch.cat([src, torch.randint(3, 20, (1, 3))], dim=1)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0, 0]])
    assert (model(padded, tgt, mask) - alone).abs().max() <= 1e-5


def test_greedy_decode_matches_step_by_step_reference():
    model = _model()
    # Make EOS likely so that some rows finish early and get padded.
    with torch.no_grad():
        model.output_projection.bias[EOS] += 2.0
    torch.manual_seed(3)
    src = torch.randint(3, 20, (4, 6))
    src_mask = torch.ones(4, 6, dtype=torch.long)
    src_mask[1, 3:] = 0
    src_mask[3, 5:] = 0
    out = model.greedy_decode(src, src_mask, max_len=8, bos_id=BOS, eos_id=EOS)
    expected = _reference_greedy(model, src, src_mask, max_len=8)
    assert out.dtype == torch.long
    assert out.shape[1] <= 8
    assert torch.equal(out, expected)
    assert (out[:, 0] == BOS).all()


def test_greedy_decode_pads_after_eos_and_stops_when_all_finished():
    model = _model()
    with torch.no_grad():
        model.output_projection.bias[EOS] += 100.0  # every row ends immediately
    out = model.greedy_decode(torch.randint(3, 20, (3, 5)), max_len=10, bos_id=BOS, eos_id=EOS)
    assert torch.equal(out, torch.tensor([[BOS, EOS]] * 3))


def test_config_rebuilds():
    model = _model(norm_first=False)
    clone = Seq2SeqTransformer(**json.loads(json.dumps(model.config))).eval()
    clone.load_state_dict(model.state_dict(), strict=True)
    src, tgt = torch.randint(3, 20, (2, 5)), torch.randint(3, 12, (2, 4))
    torch.testing.assert_close(clone(src, tgt), model(src, tgt))
