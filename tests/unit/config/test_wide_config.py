"""The `wide:` section (tfm_cls.config.wide): its checks, the model's arguments it gives,
and the keys it took over from `model:` and `train:`, which keep working in files, overrides and
the config.yaml of older run directories, each source with one deprecation line."""

import pytest
import yaml

from tfm_cls.config import ClassifierConfig, ConfigError, WideConfig, load_config, save_config, to_dict

OLD = {"model": {"d_model": 32, "wide": True, "encoder_length": 8, "wide_weighting": "tfidf", "wide_ngrams": 2,
                 "wide_buckets": 64},
       "train": {"epochs": 3, "wide_lr": 0.05, "wide_warm_start": True, "wide_loss": "head"}}
NEW = {"model": {"d_model": 32}, "train": {"epochs": 3},
       "wide": {"enabled": True, "encoder_length": 8, "weighting": "tfidf", "ngrams": 2, "buckets": 64, "lr": 0.05,
                "warm_start": True, "loss": "head"}}
RENAMED = ("model.wide -> wide.enabled", "model.encoder_length -> wide.encoder_length",
           "model.wide_weighting -> wide.weighting", "model.wide_ngrams -> wide.ngrams",
           "model.wide_buckets -> wide.buckets", "train.wide_lr -> wide.lr", "train.wide_warm_start -> wide.warm_start",
           "train.wide_loss -> wide.loss")
OLD_OVERRIDES = ["model.wide=true", "model.encoder_length=8", "model.wide_weighting=tfidf", "model.wide_ngrams=2",
                 "model.wide_buckets=64", "train.wide_lr=0.05", "train.wide_warm_start=true", "train.wide_loss=head"]
NEW_OVERRIDES = ["wide.enabled=true", "wide.encoder_length=8", "wide.weighting=tfidf", "wide.ngrams=2",
                 "wide.buckets=64", "wide.lr=0.05", "wide.warm_start=true", "wide.loss=head"]


def _deprecations(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "deprecated" in r.getMessage()]


def test_the_section_gives_the_models_arguments_under_their_flat_names():
    assert WideConfig().model_kwargs() == {}  # a model without the branch: its config stays as it was
    assert WideConfig(enabled=True, encoder_length=8, weighting="tfidf", ngrams=2, buckets=64, lr=0.1,
                      warm_start=True).model_kwargs() == {
        "wide": True, "encoder_length": 8, "wide_weighting": "tfidf", "wide_ngrams": 2, "wide_buckets": 64}
    assert WideConfig(enabled=True, buckets=64).model_kwargs() == {"wide": True}  # buckets only with pairs


@pytest.mark.parametrize("kwargs, message", [
    ({"encoder_length": 8}, "wide.encoder_length=8: needs wide.enabled: true"),
    ({"enabled": True, "encoder_length": 1}, "and a length >= 2"),
    ({"enabled": True, "ngrams": 4}, "wide.ngrams=4: expected 1, 2 or 3"),
    ({"enabled": True, "buckets": 0}, "wide.buckets: expected 1 to 2\\^31"),
    ({"enabled": True, "lr": -1.0}, "wide.lr: expected > 0"),
    ({"enabled": True, "loss": "squared_hinge"}, "it needs wide.warm_start: true"),
    ({"enabled": True, "second_bag_ngrams": 3}, "wide.second_bag_ngrams=3: .*needs wide.warm_start: true"),
    ({"enabled": True, "warm_start": True, "second_bag_ngrams": 4}, "wide.second_bag_ngrams=4: expected 0, 2 or 3"),
    ({"enabled": True, "warm_start": True, "second_bag_ngrams": 3, "second_bag_buckets": 2**32},
     "wide.second_bag_buckets: expected 1 to 2\\^31"),
    ({"char_grams": True}, "wide.char_grams: needs wide.enabled: true"),
])
def test_the_section_checks_itself(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WideConfig(**kwargs)


def test_old_wide_keys_in_a_file_load_as_the_section_with_one_deprecation_line(tmp_path, caplog):
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(yaml.safe_dump(OLD))
    new.write_text(yaml.safe_dump(NEW))
    expected = load_config(ClassifierConfig, new)
    assert _deprecations(caplog) == [] and expected.wide.enabled and expected.wide.lr == 0.05
    assert load_config(ClassifierConfig, old) == expected
    (line,) = _deprecations(caplog)  # one line for the file, naming every old key and its new place
    assert line.startswith(f"{old}: deprecated keys ") and all(pair in line for pair in RENAMED)
    save_config(load_config(ClassifierConfig, old), tmp_path / "saved.yaml")  # saved: the new keys only
    saved = yaml.safe_load((tmp_path / "saved.yaml").read_text())
    defaults = {"second_bag_ngrams": 0, "second_bag_buckets": 2**20, "count_special_tokens": False,
                "char_grams": False}  # keys the old names never had
    assert saved["wide"] == {**NEW["wide"], **defaults} and not {"wide", "encoder_length"} & set(saved["model"])
    assert "wide_lr" not in saved["train"]


def test_old_wide_keys_on_the_command_line_with_one_deprecation_line(caplog):
    cfg = load_config(ClassifierConfig, None, OLD_OVERRIDES)
    (line,) = _deprecations(caplog)
    assert line.startswith("command line: deprecated keys model.wide -> wide.enabled")
    assert all(pair in line for pair in RENAMED)
    assert cfg == load_config(ClassifierConfig, None, NEW_OVERRIDES)
    assert len(_deprecations(caplog)) == 1


def test_a_wide_key_under_its_old_and_its_new_name_is_an_error(tmp_path):
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump({"model": {"wide": True}, "wide": {"enabled": False}}))
    with pytest.raises(ConfigError, match=r"both\.yaml: model\.wide is the deprecated name of wide\.enabled"):
        load_config(ClassifierConfig, both)
    with pytest.raises(ConfigError, match=r"command line: train\.wide_lr is the deprecated name of wide\.lr"):
        load_config(ClassifierConfig, None, ["wide.lr=0.1", "train.wide_lr=0.2"])
    # an old name on the command line over a file's new one overrides it (a preset in the new layout)
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(NEW))
    cfg = load_config(ClassifierConfig, new, ["model.wide_weighting=count", "train.wide_warm_start=false"])
    assert (cfg.wide.weighting, cfg.wide.warm_start, cfg.wide.enabled) == ("count", False, True)


def test_an_old_run_directory_of_a_wide_run_loads_and_is_the_same_run(tmp_path, caplog):
    """config.yaml as runs saved it before the `wide:` section (every key written out)."""
    from tfm_cls import runs as R

    run_dir = tmp_path / "run"
    cfg = load_config(ClassifierConfig, None, [*NEW_OVERRIDES, f"run_dir={run_dir}"])
    saved = to_dict(cfg)
    wide = saved.pop("wide")
    saved["model"].update(wide=wide["enabled"], encoder_length=wide["encoder_length"], wide_weighting=wide["weighting"],
                          wide_ngrams=wide["ngrams"], wide_buckets=wide["buckets"])
    saved["train"].update(wide_lr=wide["lr"], wide_warm_start=wide["warm_start"], wide_loss=wide["loss"])
    run_dir.mkdir()
    (run_dir / R.CONFIG_FILE).write_text(yaml.safe_dump(saved, sort_keys=False))
    assert load_config(ClassifierConfig, run_dir / R.CONFIG_FILE) == cfg
    (line,) = _deprecations(caplog)
    assert line.startswith(f"{run_dir / R.CONFIG_FILE}: deprecated keys ") and all(pair in line for pair in RENAMED)
    # the resume and rerun checks compare it key by key: the same run
    assert R.config_differences(R.read_saved_config(run_dir / R.CONFIG_FILE, ClassifierConfig), to_dict(cfg)) == []
    (run_dir / R.LAST_CHECKPOINT).write_bytes(b"")
    assert R.prepare_run_dir(cfg, config_file=R.CONFIG_FILE, run_files=[], kind="", resume=True,
                             overwrite=False) == run_dir
    (run_dir / R.METRICS_FILE).write_text("{}")
    with pytest.raises(R.RunDirError, match="holds a finished run of this config"):
        R.prepare_run_dir(cfg, config_file=R.CONFIG_FILE, run_files=[], kind="", resume=False, overwrite=False)
    other = load_config(ClassifierConfig, None, [*NEW_OVERRIDES, "wide.buckets=128", f"run_dir={run_dir}"])
    with pytest.raises(R.RunDirError, match=r"holds a different run \(wide.buckets: 64 -> 128\)"):
        R.prepare_run_dir(other, config_file=R.CONFIG_FILE, run_files=[], kind="", resume=True, overwrite=False)


def test_distill_reads_the_old_wide_keys_and_pretraining_drops_them(tmp_path, caplog):
    from tfm_cls.distill import DistillConfig
    from tfm_cls.pretrain import PretrainConfig

    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"teacher": {"path": "t.onnx"}, "model": {"wide": True, "wide_weighting": "tfidf"},
                                   "train": {"wide_lr": 0.05}}))
    distill = load_config(DistillConfig, old)
    assert distill.wide == WideConfig(enabled=True, weighting="tfidf", lr=0.05)
    assert distill.student_config().wide == distill.wide  # the student's config.yaml has the section
    # pretraining never had a branch: its older pretrain_config.yaml (every key written out) loads without them
    saved = to_dict(PretrainConfig())
    saved["model"].update(wide=False, encoder_length=None, wide_weighting="count", wide_ngrams=1, wide_buckets=2**18)
    saved["train"].update(wide_lr=None, wide_warm_start=False, wide_loss="head")
    old.write_text(yaml.safe_dump(saved))
    assert load_config(PretrainConfig, old) == PretrainConfig()
    assert _deprecations(caplog)[-1] == (
        f"{old}: deprecated keys model.wide, model.encoder_length, model.wide_weighting, model.wide_ngrams, "
        "model.wide_buckets, train.wide_lr, train.wide_warm_start, train.wide_loss (no longer read here: remove them)"
    )


def test_the_bag_skips_the_tokenizers_markers_unless_asked_to_count_them():
    markers = [101, 102]
    assert WideConfig(enabled=True).model_kwargs(markers)["wide_skip_ids"] == markers
    assert "wide_skip_ids" not in WideConfig(enabled=True, count_special_tokens=True).model_kwargs(markers)
    assert "wide_skip_ids" not in WideConfig().model_kwargs(markers)  # no branch, nothing to skip
    assert "wide_skip_ids" not in WideConfig(enabled=True).model_kwargs()  # no tokenizer known yet
    # the few-label bag reads the same rule without a branch of the model's
    assert WideConfig().skip_ids(markers) == markers and WideConfig(count_special_tokens=True).skip_ids(markers) == []
