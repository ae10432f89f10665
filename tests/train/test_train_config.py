"""Config files: several merged in order (an experiment plus an overlay such as a fine-tuning recipe).
The shipped configs and presets are tested in tests/test_configs.py."""

import pytest
import yaml

from tfm_cls.config import ClassifierConfig, ConfigError, load_config


def test_an_overlay_replaces_only_the_keys_it_sets(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"name": "exp", "train": {"lr": 1e-3, "epochs": 7}, "model": {"d_model": 64}}))
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"train": {"lr": 3e-4, "head_only_steps": 5}}))
    cfg = load_config(ClassifierConfig, f"{base},{overlay}", ["train.head_only_steps=9"])
    assert (cfg.name, cfg.model.d_model, cfg.train.epochs) == ("exp", 64, 7)  # from the base
    assert cfg.train.lr == 3e-4  # the overlay wins over the base
    assert cfg.train.head_only_steps == 9  # command-line overrides win over both
    # The order is the precedence: the base last undoes the overlay.
    assert load_config(ClassifierConfig, [overlay, base]).train.lr == 1e-3


def test_an_error_in_an_overlay_names_the_files(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("name: exp\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  learning_rate: 0.1\n")
    with pytest.raises(ConfigError, match=r"base.yaml \+ .*bad.yaml.*learning_rate"):
        load_config(ClassifierConfig, [base, bad])
    with pytest.raises(ConfigError, match="nothere.yaml does not exist"):
        load_config(ClassifierConfig, f"{base},{tmp_path / 'nothere.yaml'}")
