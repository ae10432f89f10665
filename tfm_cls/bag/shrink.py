"""A bag of terms that costs what it holds: its weights on an int8 grid, its weakest terms dropped, each
step kept only where the validation score holds.

    smaller, report = smallest_holding(bag, judge, before)   # judge(model) -> (validation, holds)
    # smaller.config["wide_int8"]: the exporter writes its weight table as int8 rows (export/exporter.py)

A linear bag's file is its table: one float per (term, class) for every term the training texts hold,
so 90 labels of long documents fill 2^18 hashed rows x 90 x 4 bytes (131 MB), and few of those rows
carry the decision. Two steps, as fastText's `quantize` takes them (`-cutoff`: keep the rows of the
largest norm; then int8 rows):

- `on_int8_grid`: each weight row rounded to 255 levels of its own scale (max |w| / 127), the table
  `tfm-cls quantize --embeddings` writes (export/quantize.quantize_embeddings). The run's model holds
  the rounded floats, so the int8 file computes the same logits (the verifier's check holds unchanged).
- `pruned`: only the `keep` terms of the largest weight norms; the others leave the bag altogether (IDF
  0: out of its vocabulary, as TfidfVectorizer's `max_features` leaves a term out), so the compacted
  export drops their rows (tfm_cls.model.wide.WideBranch.compacted).

`smallest_holding` takes the int8 grid where it holds the fitted bag's validation score, then halves
the terms while it still holds, down to MIN_TERMS. What holds is the caller's judge; the run's
(tfm_cls.bag.candidates.smaller_bag): the int8 grid by the choice's own rule (the fitted bag leads it by
no more than one paired standard error, one text more where the metric counts texts, and by INT8_GATE
at most), fewer terms only with no validation score lost.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn

logger = logging.getLogger(__name__)

INT8_GATE = 0.005
"""The most a smaller bag may ever lose of the validation metric (a share: 0.5 point of accuracy), the
gate `tfm-cls quantize` holds an int8 file to (export/quantize.DEFAULT_THRESHOLD, in points)."""
MIN_TERMS = 1_000
"""Fewer terms than this are not tried (a bag of a few hundred terms is a keyword list)."""


@dataclasses.dataclass
class ShrinkReport:
    """What `smallest_holding` tried and kept (metrics.json `bag_tables`)."""

    terms_before: int
    terms_kept: int
    int8: bool
    validation_before: float
    validation_after: float
    tried: list[dict[str, float]]

    def line(self) -> str:
        if not self.tried:
            return "the bag's tables stay float32 (no time left to score a smaller one)"
        if not self.int8:
            return (f"the bag's tables stay float32: on the int8 grid it did not hold its validation score "
                    f"({self.validation_before:.4f} -> {self.tried[0]['validation']:.4f})")
        tried = ", ".join(f"{t['terms']:,.0f} ({t['validation']:.4f})" for t in self.tried)
        return (f"the bag's tables: int8 rows, {self.terms_kept:,} of its {self.terms_before:,} terms (those of the largest "
                f"weights), validation {self.validation_before:.4f} -> {self.validation_after:.4f}; terms tried "
                f"(validation): {tried}")


@torch.no_grad()
def on_int8_grid(weight: Tensor) -> Tensor:
    """weight [R, C] -> [R, C]: each row rounded to its nearest of 255 levels k * scale, k in -127..127,
    scale = max |row| / 127: the grid of export/quantize.int8_rows, which the exporter writes (a zero row
    stays zero)."""
    from tfm_cls.export.quantize import int8_rows

    rows, scale = int8_rows(weight.detach().cpu().float().numpy())  # [R, C] int8, [R, 1]
    return torch.from_numpy(rows.astype(np.float32) * scale).to(weight)  # [R, C]


def held_terms(bag: nn.Module) -> Tensor:
    """[rows] bool: the terms the bag counts (IDF above 0)."""
    return bag.wide.idf > 0


@torch.no_grad()
def pruned(bag: nn.Module, keep: int | None = None) -> nn.Module:
    """A copy of a `tfidf` bag of terms on the int8 grid holding only its `keep` terms of the largest weight
    norms (None: all it holds); the others get IDF 0 and no weights. Marked `wide_int8` in its config."""
    out = copy.deepcopy(bag)
    wide = out.wide
    held = held_terms(out)  # [rows]
    if keep is not None and keep < int(held.sum()):
        norm = torch.where(held, wide.weight.norm(dim=1), torch.full_like(wide.idf, -1.0))  # [rows]
        top = torch.topk(norm, keep).indices
        held = torch.zeros_like(held)
        held[top] = True
        wide.idf.mul_(held)
    wide.weight.copy_(on_int8_grid(wide.weight * held.unsqueeze(1)))
    out.config["wide_int8"] = True
    return out


def smallest_holding(bag: nn.Module, judge: Callable[[nn.Module], tuple[float, bool]], before: float,
                     affords: Callable[[float], bool] = lambda seconds: True,
                     estimate: float = 0.0) -> tuple[nn.Module, ShrinkReport]:
    """The smallest of: the bag on the int8 grid with all its terms, then half of them, a quarter, ...
    (`pruned`, down to MIN_TERMS) that `judge` says holds the fitted bag's score (`judge(model)`: its
    validation value and whether it holds; `before`: the fitted bag's value); the bag itself where even
    the int8 grid does not hold. Stops at the first size that does not, or when `affords(seconds)` says no
    time is left for another try expected to take `seconds`: the last try's, timed (the first: `estimate`)."""
    terms = int(held_terms(bag).sum())
    best, kept, after, tried = None, terms, before, []
    size: int | None = None
    last = estimate
    while affords(last):
        started = time.monotonic()
        candidate = pruned(bag, size)
        value, holds = judge(candidate)
        last = time.monotonic() - started
        tried.append({"terms": float(min(size or terms, terms)), "validation": value})
        if not holds:
            break
        best, kept, after = candidate, min(size or terms, terms), value
        size = kept // 2
        if size < MIN_TERMS:
            break
    report = ShrinkReport(terms, kept, best is not None, before, after, tried)
    logger.info("%s", report.line())
    return (best if best is not None else bag), report
