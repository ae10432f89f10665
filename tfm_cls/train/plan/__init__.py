"""The planner of the train recipe, `tfm-cls train --data DIR` with no preset: it reads the data and
chooses the config.

    profile.py   what the data folder holds (task type, columns, labels and their counts, lengths in
                 the encoder's tokens, the share it reads as [UNK]); bad data refused here
    rules.py     the profile, the hardware and the time budget -> a ClassifierConfig, with the
                 reason for every choice (`--explain` prints them; config.yaml keeps the result)

    plan = plan_run(profile_data("data/my_set"), minutes=15)
    cfg = plan.config()

Torch-free: the CLI plans (and `--explain` prints) before torch loads. The encoder the plans start
from is tfm_cls.pretrained_encoder (suggest's too). docs/recipe.md describes the rules and where
they were measured.
"""

from tfm_cls.train.plan.profile import DataProfile, profile_data
from tfm_cls.train.plan.rules import Plan, plan_run

__all__ = ["DataProfile", "Plan", "plan_run", "profile_data"]
