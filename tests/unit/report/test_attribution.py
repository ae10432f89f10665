"""tfm_cls.report.attribution: integrated gradients satisfy completeness against the model."""

from __future__ import annotations

import pytest
import torch

from tfm_cls.model import TransformerClassifier
from tfm_cls.report.attribution import integrated_gradients


@pytest.mark.parametrize("pair", [False, True])
def test_attributions_sum_to_the_output_change_from_the_baseline(pair):
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=40, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32,
                                  max_len=16, dropout=0.1, type_vocab_size=2 if pair else 0).eval()
    ids = [2, 7, 11, 5, 30, 3]
    types = [0, 0, 0, 1, 1, 1] if pair else None
    target = 1
    attributions = integrated_gradients(model, ids, types, target, steps=64)

    def output(scale: float) -> float:
        handle = model.token_embedding.register_forward_hook(lambda m, i, o: o * scale)
        try:
            args = [torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long)]
            if pair:
                args.append(torch.tensor([types]))
            with torch.no_grad():
                return float(model(*args)[0, target])
        finally:
            handle.remove()

    assert attributions.shape == (len(ids),)
    # completeness (Sundararajan et al. 2017): sum = F(input) - F(baseline), up to the Riemann sum's error
    assert attributions.sum() == pytest.approx(output(1.0) - output(0.0), abs=2e-2)
    assert not model.training  # left in eval mode, weights untouched
    assert all(p.grad is None for p in model.parameters())


# chars: each token's character grams too (three grams per token from a table of 10 rows; token 30 has none)
@pytest.mark.parametrize("ngrams, chars", [(1, False), (2, False), (3, False), (2, True)])
def test_a_bags_attributions_sum_to_its_logit_and_a_skipped_marker_gets_none(ngrams, chars):
    from tfm_cls.model import BagOfTermsClassifier
    from tfm_cls.report.attribution import bag_attributions

    bag = BagOfTermsClassifier(40, 3, 0, 16, "tfidf", ngrams, 1024, wide_skip_ids=[2, 3],
                               wide_char_rows=10 if chars else 0, wide_char_slots=3 if chars else 0)
    if chars:
        table = torch.arange(40 * 3).reshape(40, 3) % 10
        table[30] = -1
        bag.wide.set_char_grams(table)
    with torch.no_grad():
        bag.wide.weight.normal_(generator=torch.Generator().manual_seed(0))
        bag.bias.fill_(0.5)
    ids = [2, 7, 11, 7, 30, 3]  # [CLS] ... [SEP]
    attributions = bag_attributions(bag, ids, 1)
    with torch.no_grad():
        logit = float(bag(torch.tensor([ids]))[0, 1] - bag.bias[1])
        alone = float(bag(torch.tensor([[7]]))[0, 1] - bag.bias[1])
    assert attributions.shape == (len(ids),) and attributions.sum() == pytest.approx(logit, abs=1e-6)
    assert attributions[0] == attributions[-1] == 0.0 and (attributions[1:-1] != 0).all()
    # a one-token text: no pair, no triple
    assert bag_attributions(bag, [7], 1).sum() == pytest.approx(alone, abs=1e-6)


def test_the_page_names_how_each_model_is_attributed():
    from tfm_cls.model import BagOfTermsClassifier
    from tfm_cls.report.attribution import method

    encoder = TransformerClassifier(vocab_size=40, num_classes=3, d_model=16, nhead=2, num_layers=1, dim_feedforward=32)
    assert method(encoder).startswith("integrated gradients")
    assert "exact" in method(BagOfTermsClassifier(40, 3)) and "integrated" not in method(BagOfTermsClassifier(40, 3))
