"""The classification recipe (`tfm-cls train`): a config (or a data folder planned into one) -> a
finished run directory. Its pieces of the classify/ library (the task, the heads, the finish) are
distill's too; what only this recipe uses lives here, and the bag of terms and the run's choice in bag/
(the few-label cross-validation: tfm_cls.bag.few_labels).

    recipe.py              train(cfg, data=None): data -> tokenizer -> model -> the engine -> finish_run
    contrastive.py         few labelled texts: SetFit's pairs (ContrastiveTask on the engine), then fit_head
    plan/                  the planner of `tfm-cls train --data DIR`: the data profiled, the config chosen,
                           torch-free

`from tfm_cls.train import train` loads recipe.py (and torch) on first use, so that the planner
(`tfm_cls.train.plan`) imports without torch: the CLI plans, and `--explain` prints, before torch
loads.
"""

from __future__ import annotations

from typing import Any

__all__ = ["train"]


def __getattr__(name: str) -> Any:
    if name == "train":
        from tfm_cls.train.recipe import train

        return train
    raise AttributeError(f"module 'tfm_cls.train' has no attribute {name!r}")
