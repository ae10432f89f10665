"""MLM pretraining of the classifier's encoder on in-domain text (`tfm-cls pretrain`).

    config.py    PretrainConfig (extra text, masking, the classifier's sections)
    corpus.py    the corpus: training texts + extra text, and the evaluation-overlap guard
    masking.py   tokenise, pack, and mask (token / whole-word / span) reproducibly
    model.py     MaskedLanguageModel: the classifier's encoder + BERT's tied MLM head
    recipe.py    the recipe: MLMTask on the one training engine, and `pretrain(cfg)`
"""

from tfm_cls.pretrain.config import ExtraTextConfig, MLMConfig, PretrainConfig
from tfm_cls.pretrain.recipe import pretrain

__all__ = ["ExtraTextConfig", "MLMConfig", "PretrainConfig", "pretrain"]
