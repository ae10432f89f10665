"""Token-level attributions of one prediction: integrated gradients through the PyTorch model.

    integrated_gradients(model, ids, types, target, steps)  ->  attribution per token [T]

Sundararajan et al. 2017: the token embeddings are scaled from a zero baseline (what a padding
token embeds to) to their real values in `steps` midpoint steps, and each token's attribution is
its embedding times the mean gradient of the target output along that path, summed over the
embedding dimensions. Positions, token types and [CLS] / [SEP] stay as they are, so the baseline
is "the same sequence with every token's meaning removed". The target is the logit of the shown
label (single- and multi-label) or the value (regression); the attributions of a row sum to about
target(input) - target(baseline) (the completeness axiom), which the tests check.
"""

from __future__ import annotations

import numpy as np
import torch


def method(model: torch.nn.Module) -> str:
    """How `integrated_gradients` attributes this model's outputs, in the report page's words."""
    if getattr(model, "token_embedding", None) is None:
        return ("each term's weight times its share of the bag (a model without an encoder is linear: exact), "
                "a pair's half and a triple's third to each of its tokens")
    return "integrated gradients (24 steps from a zero token-embedding baseline) through the PyTorch model"


def integrated_gradients(
    model: torch.nn.Module, ids: list[int], types: list[int] | None, target: int, steps: int = 24,
) -> np.ndarray:
    """Attributions [len(ids)] of output column `target` for one row of token ids (and token types
    for pairs), through `model` (a TransformerClassifier, in eval mode; its weights untouched)."""
    if getattr(model, "token_embedding", None) is None:  # a model without an encoder is linear: exact shares
        return bag_attributions(model, ids, target)
    alphas = (torch.arange(steps, dtype=torch.float32) + 0.5) / steps  # [S] midpoints of (0, 1]
    input_ids = torch.tensor([ids] * steps, dtype=torch.long)  # [S, T]
    mask = torch.ones_like(input_ids)
    args = [input_ids, mask] + ([torch.tensor([types] * steps, dtype=torch.long)] if types is not None else [])
    captured: dict[str, torch.Tensor] = {}

    def scale(module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        captured["embedded"] = output  # [S, T, D], the real embeddings (every row the same)
        scaled = output * alphas.to(output.dtype)[:, None, None]  # [S, T, D]
        captured["scaled"] = scaled
        return scaled

    was_training = model.training
    model.eval()
    handle = model.token_embedding.register_forward_hook(scale)
    try:
        with torch.enable_grad():
            logits = model(*args)  # [S, C]
            grads = torch.autograd.grad(logits[:, target].sum(), captured["scaled"])[0]  # [S, T, D]
    finally:
        handle.remove()
        model.train(was_training)
    embedded = captured["embedded"][0].detach()  # [T, D]
    return (embedded * grads.mean(dim=0)).sum(dim=-1).double().numpy()  # [T]


@torch.no_grad()
def bag_attributions(model: torch.nn.Module, ids: list[int], target: int) -> np.ndarray:
    """Attributions [len(ids)] of a bag-of-terms model (tfm_cls.model.bag): its logit is a sum over
    the text's terms of weight x share, so each token gets its own term's part, half of each pair
    and a third of each triple it is in, and its character grams' parts (a token the bag does not
    count, [CLS] / [SEP], gets 0); they sum to the logit minus the bias (the empty text's), exactly."""
    branch = model.wide
    input_ids = torch.tensor([ids], dtype=torch.long)  # [1, T]
    terms, keep = branch.terms(input_ids, torch.ones_like(input_ids))  # [1, N]
    parts = (branch.weight[terms[0], target] * branch.shares(terms, keep)[0]).double()  # [N]
    t = len(ids)
    out = parts[:t].clone()  # the tokens themselves
    if branch.char_rows:  # the character view's T x K grams come last: each token gets its own grams' parts
        out += parts[-t * branch.char_slots:].reshape(t, branch.char_slots).sum(dim=1)
        parts = parts[:-t * branch.char_slots]
    # WideBranch.terms' order: T tokens, then T - 1 pairs (i, i + 1), then T - 2 triples (i, i + 1, i + 2)
    for order, grams in ((2, parts[t:2 * t - 1]), (3, parts[2 * t - 1:])):
        for offset in range(order if grams.numel() else 0):
            out[offset:offset + grams.numel()] += grams / order
    return out.numpy()
