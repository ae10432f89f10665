"""Task-specific knowledge distillation: a teacher (e.g. the fine-tuned MiniLM) labels a transfer
set, and a small from-scratch TransformerClassifier learns from its soft targets.

    config.py      DistillConfig (configs/distill/*.yaml)
    transfer.py    the transfer set: training texts + augmented copies + extra text
    teacher.py     a teacher: a classification run directory or one of our ONNX files
    labelling.py   the teacher's outputs, computed once and cached in the run directory
    loss.py        soft-target loss (KL at temperature T, or MSE) mixed with gold cross-entropy
    cut.py         students cut from the teacher (a subset of its layers, its embeddings and head)
    compress.py    `tfm-cls compress`: a cut student's config from a finished teacher run
    recipe.py      the recipe: DistillTask (a ClassificationTask on the one engine) and distill(cfg)
"""

from tfm_cls.distill.config import DistillConfig
from tfm_cls.distill.recipe import distill

__all__ = ["DistillConfig", "distill"]
