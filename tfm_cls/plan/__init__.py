"""The recipe that reads the data: `tfm-cls train --data DIR` with no preset.

    profile.py   what the data folder holds (task type, columns, labels and their counts, lengths in
                 the encoder's tokens, the share it reads as [UNK]); bad data refused here
    pretrained_encoder.py  the pretrained encoder the recipe starts from (the packaged all-MiniLM-L6-v2)
    rules.py     the profile, the hardware and the time budget -> a ClassifierConfig, with the
                 reason for every choice (`--explain` prints them; config.yaml keeps the result)

    plan = plan_run(profile_data("data/my_set"), minutes=15)
    cfg = plan.config()

Torch-free: the CLI plans (and `--explain` prints) before torch loads. docs/recipe.md describes the
rules and where they were measured.
"""

from tfm_cls.plan.profile import DataProfile, profile_data
from tfm_cls.plan.rules import Plan, plan_run

__all__ = ["DataProfile", "Plan", "plan_run", "profile_data"]
