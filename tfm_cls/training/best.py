"""Which of two validation scores is better: the one rule the engine's best checkpoint, the run's
choice among candidates (tfm_cls.bag.candidates) and the wide branch's warm start all use.
Here, below the task code, so the engine needs nothing of classification."""

from __future__ import annotations

HIGHER_IS_BETTER = {
    "accuracy": True, "macro_f1": True, "loss": False,
    "micro_f1": True, "subset_accuracy": True,  # multi-label
    "pearson": True, "spearman": True, "mse": False,  # regression
}


def is_better(metric: str, value: float, best: float | None) -> bool:
    """Whether `value` of `metric` beats `best` (None: anything does)."""
    if best is None:
        return True
    return value > best if HIGHER_IS_BETTER[metric] else value < best
