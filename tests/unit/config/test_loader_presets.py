"""Every YAML under configs/ loads strictly and validates with its config class, and the presets
resolve by name from any folder."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from tfm_cls.config import ClassifierConfig, ConfigError, load_config, save_config, to_dict
from tfm_cls.pretrain import PretrainConfig

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"
ALL = sorted(CONFIGS.glob("**/*.yaml"))  # recursive: a nested folder is not skipped
CLS = sorted((CONFIGS / "cls").glob("*.yaml"))

# The config class of each folder, as "module:Class" (imported when used: a folder added by a
# feature whose module is not there yet is skipped with the reason, not an import error here).
# `finetune` holds overlays: each is validated on top of every cls config.
CLASSES = {
    "cls": "tfm_cls.config:ClassifierConfig",
    "pretrain": "tfm_cls.pretrain:PretrainConfig",
    "distill": "tfm_cls.distill:DistillConfig",
    "tune": "tfm_cls.tune:TuneConfig",
}
OVERLAYS = {"finetune"}


def config_class(path: Path) -> type:
    folder = path.relative_to(CONFIGS).parts[0] if len(path.relative_to(CONFIGS).parts) > 1 else ""
    if folder not in CLASSES:
        pytest.fail(
            f"{path.relative_to(ROOT)}: no config class for configs/{folder}/; map the folder in "
            f"tests/unit/config/test_loader_presets.py (CLASSES, or OVERLAYS for an overlay)"
        )
    module, name = CLASSES[folder].split(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        pytest.skip(f"configs/{folder}/ needs {CLASSES[folder]}, which cannot be imported here: {err}")


def assert_sets(given: dict, loaded: dict, where: str) -> None:
    for key, value in given.items():
        got = loaded[key]
        if isinstance(value, dict) and isinstance(got, dict):
            assert_sets(value, got, f"{where}: {key}")
        else:
            normal = list(got) if isinstance(got, tuple) else got
            assert normal == value, f"{where}: {key} is {got!r} after loading, the file says {value!r}"


def rel(path: Path) -> str:
    return path.relative_to(CONFIGS).as_posix()


@pytest.mark.parametrize("path", [p for p in ALL if p.relative_to(CONFIGS).parts[0] not in OVERLAYS], ids=rel)
def test_every_config_loads_and_round_trips(path, tmp_path):
    cls = config_class(path)
    cfg = load_config(cls, path)
    assert isinstance(cfg, cls) and cfg.name
    # Every value the file sets arrived in the config (nothing silently renamed or dropped).
    assert_sets(yaml.safe_load(path.read_text()) or {}, to_dict(cfg), rel(path))
    # Saved as a run directory saves it, the resolved config loads back the same.
    save_config(cfg, tmp_path / "config.yaml")
    assert load_config(cls, tmp_path / "config.yaml") == cfg


@pytest.mark.parametrize("overlay", sorted(p for folder in OVERLAYS for p in (CONFIGS / folder).glob("**/*.yaml")), ids=rel)
@pytest.mark.parametrize("base", CLS, ids=lambda p: p.stem)
def test_every_overlay_validates_on_every_cls_config(overlay, base):
    plain = load_config(ClassifierConfig, base)
    tuned = load_config(ClassifierConfig, [base, overlay])
    overlaid = yaml.safe_load(overlay.read_text())
    for section, values in overlaid.items():
        assert {key: getattr(getattr(tuned, section), key) for key in values} == pytest.approx(values)
    for section in {"data", "tokenizer", "model", "train"} - set(overlaid):
        assert getattr(tuned, section) == getattr(plain, section)  # only what the overlay sets changes


def test_no_two_presets_share_a_run_directory():
    names: dict[str, str] = {}
    for path in ALL:
        name = (yaml.safe_load(path.read_text()) or {}).get("name")
        if name is not None:
            assert name not in names, f"{rel(path)} and {names[name]} both write runs/{name}"
            names[name] = rel(path)


# ---- presets: by name, from any folder ------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,path", [(ClassifierConfig, p) for p in CLS] + [(PretrainConfig, p) for p in sorted((CONFIGS / "pretrain").glob("*.yaml"))],
    ids=lambda x: rel(x) if isinstance(x, Path) else "",
)
def test_a_preset_by_name_is_its_file(cls, path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the repository: the installed presets answer
    assert load_config(cls, path.stem) == load_config(cls, path)


def test_preset_spellings_from_another_folder(tmp_path, monkeypatch):
    trec, overlay = CONFIGS / "cls" / "trec.yaml", CONFIGS / "finetune" / "from-mlm.yaml"
    expected = load_config(ClassifierConfig, trec)
    tuned = load_config(ClassifierConfig, [trec, overlay], ["train.max_minutes=5"])
    assert tuned != expected
    monkeypatch.chdir(tmp_path)
    for spelling in ("trec", "trec.yaml", "configs/cls/trec.yaml", "cls/trec"):
        assert load_config(ClassifierConfig, spelling) == expected, spelling
    for spelling in ("trec,finetune/from-mlm", "configs/cls/trec.yaml,configs/finetune/from-mlm.yaml"):
        assert load_config(ClassifierConfig, spelling, ["train.max_minutes=5"]) == tuned, spelling
    assert load_config(PretrainConfig, "trec") == load_config(PretrainConfig, CONFIGS / "pretrain" / "trec.yaml")
    assert load_config(ClassifierConfig, "trec").name == "trec" and load_config(PretrainConfig, "trec").name == "pretrain-trec"


def test_a_local_file_wins_over_a_preset_of_the_same_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trec.yaml").write_text("name: my-trec\n")
    assert load_config(ClassifierConfig, "trec.yaml").name == "my-trec"
    assert load_config(ClassifierConfig, "trec").name == "trec"  # a bare name is the preset


@pytest.mark.parametrize("cls,folder", [(ClassifierConfig, "cls"), (PretrainConfig, "pretrain")])
def test_an_unknown_preset_lists_the_presets(cls, folder, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(cls, "no-such-preset")
    shipped = ", ".join(sorted(p.stem for p in (CONFIGS / folder).glob("*.yaml")))
    assert "no-such-preset" in str(info.value) and str(info.value).endswith(f"presets: {shipped}")
