"""Config files: several merged in order (an experiment plus an overlay such as a fine-tuning recipe);
YAML the safe loader refuses.
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


# ---- YAML the safe loader refuses: a config error (exit 2), not an internal failure --------------------


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "internal failure" not in lines[0], lines
    return lines[0]


def test_an_unsafe_yaml_tag_is_a_config_error_naming_the_file_and_line(tmp_path, capsys):
    from tfm_cls import cli

    marker = tmp_path / "ran"
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"name: exp\ntrain:\n  lr: !!python/object/apply:os.system ['touch {marker}']\n")
    assert cli.main(["train", "--config", str(bad)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"error: {bad}: line 3, column 7: ") and "python/object/apply:os.system" in line
    assert "safe loader" in line and not marker.exists()  # refused, never run
    assert cli.main(["train", "--config", "trec", "train.lr=!!python/object/apply:os.system [ls]"]) == 2
    assert "override 'train.lr=!!python/object/apply:os.system [ls]'" in _one_error_line(capsys)


def test_a_file_that_is_not_yaml_is_a_config_error(tmp_path, capsys):
    from tfm_cls import cli

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: exp\ntrain: [1, 2\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: line \d+, column \d+: "):
        load_config(ClassifierConfig, bad)
    assert cli.main(["train", "--config", str(bad)]) == 2
    assert str(bad) in _one_error_line(capsys)

