"""What the end of the run scores, sized to the budget: validation and test as a seeded sample where
scoring them whole with the model the end scores does not fit its share (`budget.END_SHARE`).

    cfg, data, splits = scored_in_budget(cfg, data, splits, clock, seconds_per_example)

Decided once, before the stage that scores them, from a probe of that model on the texts at hand (the
encoder before its loop, which evaluates validation too; the few-label path's chosen model after its
cross-validation): the cap is `data.max_eval_samples`, kept in the run's config (a resume draws the same
examples: tfm_cls.data.sources.eval_rows), applied to the texts (the report's rows, the baseline) and to
their tokens alike, said in the clock's `shrunk` (metrics.json) and the log.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from datasets import DatasetDict

from tfm_cls.data.sources import ClassificationData, eval_rows
from tfm_cls.data.tokenized import take_examples
from tfm_cls.training import budget
from tfm_cls.training.clock import WallClock

logger = logging.getLogger(__name__)

SCORED = ("validation", "test")


def eval_cap(sizes: list[int], seconds_per_example: float, seconds: float) -> int | None:
    """The largest number k of examples a split such that scoring min(n, k) of each split of `sizes` at
    `seconds_per_example` fits in `seconds`, at least END_MIN_EXAMPLES; None where every example fits."""
    if seconds_per_example * sum(sizes) <= seconds:
        return None
    affordable = seconds / max(seconds_per_example, 1e-12)  # examples in all
    cap, left = 0, sorted(sizes)
    while left:  # water-filling: a split smaller than an even share keeps all, the rest share what it leaves
        even = affordable / len(left)
        if left[0] > even:
            cap = int(even)
            break
        affordable -= left.pop(0)
        cap = int(affordable)
    return max(cap, budget.END_MIN_EXAMPLES)


def scored_in_budget(cfg: Any, data: ClassificationData, splits: dict[str, Any], clock: WallClock,
                     seconds_per_example: float) -> tuple[Any, ClassificationData, dict[str, Any]]:
    """(cfg, data, splits) with validation and test capped at `data.max_eval_samples` where the end's share
    (END_SHARE of the budget, or what is left past FIXED_SECONDS where less) does not hold them whole at
    `seconds_per_example` (a probe of the model the end scores); as they were without a budget, where they
    fit, or where the config already names a cap."""
    if clock.budget is None or cfg.data.max_eval_samples is not None:
        return cfg, data, splits
    sizes = [len(splits[name]) for name in SCORED if name in splits]
    # the share, or what is left past the end's fixed seconds where that is less (a few-label run decides
    # after its cross-validation)
    share = min(clock.share(budget.END_SHARE), max(clock.left() - budget.FIXED_SECONDS, 0.0))
    cap = eval_cap(sizes, seconds_per_example, share)
    if cap is None or cap >= max(sizes, default=0):
        return cfg, data, splits
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, max_eval_samples=cap))
    texts, tokens = dict(data.splits), dict(splits)
    for name in SCORED:
        rows = eval_rows(len(splits[name]), cap, cfg.data.split_seed) if name in splits else None
        if rows is not None:
            texts[name], tokens[name] = texts[name].select(rows), take_examples(splits[name], rows)
    whole = seconds_per_example * sum(sizes)
    clock.shrink(f"validation and test scored on a seeded sample of at most {cap} examples each (of "
                 f"{' and '.join(str(n) for n in sizes)}): scoring them whole was measured to need ~{whole:.0f} s, "
                 f"the end's share of the budget is {share:.0f} s (data.max_eval_samples)")
    return cfg, dataclasses.replace(data, splits=DatasetDict(texts)), tokens
