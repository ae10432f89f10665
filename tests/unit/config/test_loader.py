"""Config files: several merged in order (an experiment plus an overlay such as configs/finetune/from-mlm.yaml);
YAML the safe loader refuses; the deprecated spellings of moved keys.
The shipped configs and presets are tested in tests/unit/config/test_loader_presets.py."""

import pytest
import yaml

from tfm_cls.config import ClassifierConfig, ConfigError, load_config, save_config, to_dict


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


def test_typed_values_come_after_the_files_and_before_the_overrides_and_are_never_parsed(tmp_path):
    """`values` (a planner's choices, by dotted key) are set as they are: a string stays a string
    where YAML would read a number; they are type-checked where they land, and the command line's
    overrides still win."""
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"name": "exp", "train": {"lr": 1e-3, "epochs": 7}}))
    values = {"name": "2024", "train.lr": 5e-5, "data.text_columns": ["title"]}
    cfg = load_config(ClassifierConfig, base, ["train.lr=3e-4"], values=values)
    assert (cfg.name, cfg.train.epochs, cfg.data.text_columns, cfg.train.lr) == ("2024", 7, ["title"], 3e-4)
    assert load_config(ClassifierConfig, base, values=values).train.lr == 5e-5
    with pytest.raises(ConfigError, match="unknown key 'nosuch' under train"):
        load_config(ClassifierConfig, None, values={"train.nosuch": 1})
    with pytest.raises(ConfigError, match="expected a number"):
        load_config(ClassifierConfig, None, values={"train.lr": "fast"})


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


# ---- the long-text keys that left the tokenizer section: old spellings keep working ---------------------

OLD = {"tokenizer": {"max_length": 64, "stride": 8, "chunk": True, "aggregate": "max",
                     "aggregate_scores": "probabilities", "train_window": "random"}}
NEW = {"tokenizer": {"max_length": 64, "stride": 8},
       "inference": {"chunk": True, "aggregate": "max", "aggregate_scores": "probabilities"},
       "train": {"window": "random"}}


def _deprecations(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "deprecated" in r.getMessage()]


def test_old_long_text_keys_in_a_file_load_as_the_new_ones_with_one_warning(tmp_path, caplog):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump(OLD))
    new.write_text(yaml.safe_dump(NEW))
    expected = load_config(ClassifierConfig, new)
    assert _deprecations(caplog) == []
    assert (expected.inference.chunk, expected.inference.aggregate, expected.train.window) == (True, "max", "random")
    assert load_config(ClassifierConfig, old, ["train.epochs=3"]) == load_config(ClassifierConfig, new, ["train.epochs=3"])
    (warning,) = _deprecations(caplog)  # one warning for the file, naming every old key and its new place
    assert warning.startswith(f"{old}: deprecated keys ")
    for line in ("tokenizer.chunk -> inference.chunk", "tokenizer.aggregate -> inference.aggregate",
                 "tokenizer.aggregate_scores -> inference.aggregate_scores", "tokenizer.train_window -> train.window"):
        assert line in warning
    save_config(load_config(ClassifierConfig, old), tmp_path / "saved.yaml")  # saved: the new keys only
    assert "train_window" not in (tmp_path / "saved.yaml").read_text()


def test_old_long_text_keys_on_the_command_line(caplog):
    old = load_config(ClassifierConfig, None, ["tokenizer.chunk=true", "tokenizer.train_window=random"])
    (warning,) = _deprecations(caplog)
    assert warning.startswith("command line: deprecated keys tokenizer.chunk -> inference.chunk")
    assert old == load_config(ClassifierConfig, None, ["inference.chunk=true", "train.window=random"])


def test_a_key_given_under_its_old_and_its_new_name_is_an_error(tmp_path):
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump({"tokenizer": {"chunk": True}, "inference": {"chunk": False}}))
    with pytest.raises(ConfigError, match=r"both\.yaml: tokenizer\.chunk is the deprecated name of inference\.chunk"):
        load_config(ClassifierConfig, both)
    with pytest.raises(ConfigError, match=r"command line: tokenizer\.chunk is the deprecated name of inference\.chunk"):
        load_config(ClassifierConfig, None, ["inference.chunk=false", "tokenizer.chunk=true"])
    # An override of the old name over a file's new one is an override (the command line wins), not both.
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(NEW))
    assert load_config(ClassifierConfig, new, ["tokenizer.chunk=false"]).inference.chunk is False


def test_an_old_run_directory_still_loads_and_is_the_same_run(tmp_path, caplog):
    """config.yaml as runs saved it before the inference section (every key written out)."""
    from tfm_cls import runs as R

    cfg = load_config(ClassifierConfig, None, ["inference.chunk=true", f"run_dir={tmp_path / 'run'}"])
    saved = to_dict(cfg)
    saved["tokenizer"].update(saved.pop("inference"), train_window=saved["train"].pop("window"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / R.CONFIG_FILE).write_text(yaml.safe_dump(saved, sort_keys=False))
    (run_dir / R.METRICS_FILE).write_text("{}")
    assert load_config(ClassifierConfig, run_dir / R.CONFIG_FILE) == cfg
    assert str(run_dir / R.CONFIG_FILE) in _deprecations(caplog)[0]
    # the rerun check compares it key by key: the same run (a finished one, so refused as such)
    with pytest.raises(R.RunDirError, match="holds a finished run of this config"):
        R.prepare_run_dir(cfg, config_file=R.CONFIG_FILE, run_files=[], kind="", resume=False, overwrite=False)


def test_distill_and_pretrain_configs_read_the_old_keys_too(tmp_path, caplog):
    from tfm_cls.distill import DistillConfig
    from tfm_cls.pretrain import PretrainConfig

    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"teacher": {"path": "t.onnx"}, "tokenizer": {"chunk": True, "aggregate": "max"}}))
    distill = load_config(DistillConfig, old)
    assert distill.inference.chunk and distill.student_config().inference == distill.inference
    # Pretraining never read them (it has no inference): dropped, with the warning saying so.
    saved = to_dict(PretrainConfig())
    saved["tokenizer"].update(chunk=False, stride=None, aggregate="mean", aggregate_scores="logits",
                              train_window="truncate")
    del saved["train"]["window"]
    old.write_text(yaml.safe_dump(saved))
    assert load_config(PretrainConfig, old) == PretrainConfig()
    assert _deprecations(caplog)[-1] == (
        f"{old}: deprecated keys tokenizer.chunk, tokenizer.aggregate, tokenizer.aggregate_scores, "
        "tokenizer.train_window (no longer read here: remove them)"
    )

