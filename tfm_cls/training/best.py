"""Which of two validation scores is better: the one rule the engine's best checkpoint, the run's
choice among candidates (tfm_cls.bag.candidates) and the wide branch's warm start all use.
Here, below the task code, so the engine needs nothing of classification."""

from __future__ import annotations

HIGHER_IS_BETTER = {
    "accuracy": True, "macro_f1": True, "loss": False,
    "micro_f1": True, "subset_accuracy": True,  # multi-label
    "pearson": True, "spearman": True, "mse": False,  # regression
}


BEST_POSSIBLE = {"accuracy": 1.0, "macro_f1": 1.0, "micro_f1": 1.0, "subset_accuracy": 1.0, "pearson": 1.0,
                 "spearman": 1.0, "loss": 0.0, "mse": 0.0}
"""The value no other can beat: a loop whose best evaluation reached it has nothing left to find."""


def unbeatable(metric: str, value: float | None) -> bool:
    """Whether `value` of `metric` is the best it can be (BEST_POSSIBLE), so no later evaluation can beat it."""
    return value is not None and metric in BEST_POSSIBLE and (
        value >= BEST_POSSIBLE[metric] if HIGHER_IS_BETTER[metric] else value <= BEST_POSSIBLE[metric])


def is_better(metric: str, value: float, best: float | None) -> bool:
    """Whether `value` of `metric` beats `best` (None: anything does)."""
    if best is None:
        return True
    return value > best if HIGHER_IS_BETTER[metric] else value < best
