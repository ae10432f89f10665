"""The classical baselines as benchmark rows: the library's one implementation
(tfm_cls.classify.baseline: TF-IDF features, a model per grid value, the best on validation),
timed, its test metrics computed with the library's metric functions."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tfm_cls.classify.baseline import SYSTEMS, SelectedBaseline, Split, baseline_names, split_metrics

__all__ = ["SYSTEMS", "baseline_names", "baseline_row"]


def baseline_row(name: str, train: Split, validation: Split | None, test: Split,
                 tokenizer: Callable[[str], list[str]] | None = None,
                 system: str | None = None) -> tuple[dict[str, Any], SelectedBaseline]:
    """Fit baseline `name` (its grid value picked on `validation`) and score it on `test`: the
    row (the task's test metrics; `metric_name` / `metric`: the picking metric on test,
    `validation_metric` on validation; train_minutes: fitting and picking; predict_texts_per_s:
    features and decisions from raw test texts) and the fitted baseline. `system` names the row
    (default `name`)."""
    fitted = SelectedBaseline(name, tokenizer).fit(train, validation)
    start = time.perf_counter()
    predicted = fitted.predict(test.texts, test.pairs)
    seconds = time.perf_counter() - start
    spec = SYSTEMS[name]
    metrics = split_metrics(spec.task, test.targets, predicted)
    row = {"system": system or name, **metrics, "metric_name": spec.metric, "metric": metrics[spec.metric],
           "validation_metric": fitted.validation_score_, "train_minutes": fitted.fit_seconds_ / 60,
           "predict_texts_per_s": len(test.texts) / max(seconds, 1e-9), spec.param: fitted.param_}
    return row, fitted

