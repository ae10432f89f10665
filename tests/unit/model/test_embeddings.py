"""TokenEmbedding, PositionalEncoding (sinusoidal) and LearnedPositionalEncoding."""

from __future__ import annotations

import math

import pytest
import torch

from tfm_cls.model import LearnedPositionalEncoding, PositionalEncoding, TokenEmbedding


def test_token_embedding_scaling():
    torch.manual_seed(2)
    emb = TokenEmbedding(10, 16, padding_idx=0)
    ids = torch.tensor([[3, 0]])
    torch.testing.assert_close(emb(ids)[0, 0], emb.embedding.weight[3] * 4.0)
    assert torch.equal(emb(ids)[0, 1], torch.zeros(16))
    unscaled = TokenEmbedding(10, 16, scale=False)
    torch.testing.assert_close(unscaled(ids)[0, 0], unscaled.embedding.weight[3])


def test_sinusoidal_encoding_matches_formula():
    pe = PositionalEncoding(6, dropout=0.0, max_len=10)
    out = pe(torch.zeros(1, 4, 6))[0]
    for pos in range(4):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert out[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert out[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    odd = PositionalEncoding(5, dropout=0.0, max_len=4)(torch.zeros(1, 4, 5))
    assert odd.shape == (1, 4, 5)
    assert "pe" not in pe.state_dict()


@pytest.mark.parametrize("cls", [PositionalEncoding, LearnedPositionalEncoding])
def test_too_long_sequence_names_both_lengths(cls):
    module = cls(8, 0.0, max_len=5)
    module(torch.zeros(1, 5, 8))  # exactly max_len is fine
    with pytest.raises(ValueError, match=r"sequence length 6 exceeds max_len=5"):
        module(torch.zeros(1, 6, 8))
