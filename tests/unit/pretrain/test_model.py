"""MaskedLanguageModel: the classifier's encoder keys and a tied output projection."""


import torch

from tfm_cls.model import TransformerClassifier
from tfm_cls.pretrain.model import MaskedLanguageModel

ARCH = dict(vocab_size=50, d_model=16, nhead=4, num_layers=2, dim_feedforward=32, dropout=0.0, max_len=32)


def test_mlm_model_has_the_classifier_encoder_keys_and_a_tied_output_projection():
    torch.manual_seed(0)
    mlm = MaskedLanguageModel(**ARCH)
    clf = TransformerClassifier(num_classes=3, **ARCH)
    encoder_keys = set(mlm.encoder_state_dict())
    assert encoder_keys == {k for k in clf.state_dict() if not k.startswith("head.")}
    assert all(k.startswith("mlm_head.") for k in set(mlm.state_dict()) - encoder_keys)
    assert "num_classes" not in mlm.config

    # Tied: the logits are hidden @ embedding^T + bias, and the head owns no [V, D] matrix.
    ids = torch.randint(5, 50, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    logits = mlm(ids, mask)  # [2, 7, 50]
    hidden = mlm.encode(ids, mask)
    x = mlm.mlm_head.norm(torch.nn.functional.gelu(mlm.mlm_head.dense(hidden)))
    expected = x @ mlm.token_embedding.embedding.weight.T + mlm.mlm_head.bias
    torch.testing.assert_close(logits, expected)
    assert not any(p.shape == (50, 16) for n, p in mlm.named_parameters() if n.startswith("mlm_head"))
    # A gradient through the output projection reaches the embedding table even for unseen tokens.
    targets = torch.zeros(2, 7, dtype=torch.bool)
    targets[0, 2] = True
    out = mlm(ids, mask, targets)  # [1, 50]
    assert out.shape == (1, 50)
    out[0, 0].backward()  # token 0 = [PAD] never appears in the input
    assert mlm.token_embedding.embedding.weight.grad[0].abs().sum() > 0
    # Every parameter takes part (DDP needs no find_unused_parameters).
    out = mlm(ids, mask, targets)
    out.sum().backward()
    assert all(p.grad is not None for p in mlm.parameters())
