"""`tfm-cls train --data` (cli/train.py), the front door of issue 41: a budget that is not a finite
positive number is a usage error (exit 2); data training would refuse is refused at --explain time
and before a run, one `error:` line, exit 2, nothing printed or written; `--data` also takes a Hugging
Face dataset id, read through datasets.load_dataset (a stand-in returns the splits here, the hub being
unreachable), and an unreachable hub is one line. No test trains."""

from __future__ import annotations

import pytest
from kits.tiny_topics import CLASSES, make_texts, write_dataset

from tfm_cls import cli
from tfm_cls.cli import train as train_command
from tfm_cls.data import sources

NAMED = [{"text": r["text"], "label": CLASSES[r["label"]]} for r in make_texts(30, 0)]


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error:" in line]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/<name> would be written here
    return write_dataset(tmp_path / "topics", {"train": NAMED})


@pytest.mark.parametrize("minutes", ["nan", "NaN", "inf", "-inf", "0", "-5", "soon"])
def test_a_budget_that_is_not_a_finite_positive_number_is_a_usage_error(folder, minutes, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--data", str(folder), f"--minutes={minutes}", "--explain"])  # =: -inf is no option
    assert exit_.value.code == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert line == f"tfm-cls train: error: argument --minutes: expected a finite positive number, got {minutes!r}"


def test_a_finite_budget_reaches_the_plan(folder, capsys):
    assert cli.main(["train", "--data", str(folder), "--minutes", "2.5", "--explain"]) == 0
    assert "(2.5 minutes)" in capsys.readouterr().out


@pytest.mark.parametrize("split, rows, place, says", [
    ("train", [*NAMED[:2], {"text": "x", "label": None}, *NAMED[2:]], "train.jsonl, line 3", "no label (None)"),
    ("validation", [{"text": "x", "label": "weather"}], "validation.jsonl, line 1", "label 'weather' is not a class"),
])
@pytest.mark.parametrize("explain", [True, False])
def test_data_training_refuses_is_one_error_line_exit_2_and_nothing_written(folder, tmp_path, split, rows, place, says,
                                                                           explain, capsys):
    write_dataset(folder, {split: rows})
    assert cli.main(["train", "--data", str(folder), *(["--explain"] if explain else [])]) == 2
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith(f"error: {folder / place}: {says}")
    assert out == ""  # nothing of the plan printed before the refusal
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics"]  # no runs/ folder


def test_a_split_the_plan_cannot_carve_is_refused_at_explain_time(folder, capsys):
    # the profile passes (the columns and labels are fine); the planned carve of the validation
    # split from train is what training would stop on: 3 classes, 1 % of 30 texts
    assert cli.main(["train", "--data", str(folder), "--explain", "data.validation_fraction=0.01"]) == 2
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith(f"error: {folder}: cannot carve a stratified validation split") and out == ""


@pytest.fixture
def hub(monkeypatch):
    """datasets.load_dataset as sources calls it, answering for `someone/topics` (config `small`) with
    an in-memory DatasetDict of ClassLabel rows, as a hub dataset arrives; anything else goes to the
    real function (local files)."""
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    features = Features({"text": Value("string"), "label": ClassLabel(names=CLASSES)})
    rows = [{"text": r["text"], "label": r["label"]} for r in make_texts(60, 1)]
    splits = DatasetDict(train=Dataset.from_list(rows, features=features),
                         dev=Dataset.from_list(rows[:12], features=features),
                         test=Dataset.from_list(rows[12:24], features=features))
    asked: list[tuple[str, str | None]] = []
    real = sources.load_dataset

    def load_dataset(path, name=None, **kwargs):
        if path != "someone/topics":
            return real(path, name, **kwargs)
        asked.append((path, name))
        return splits

    monkeypatch.setattr(sources, "load_dataset", load_dataset)
    return asked


def test_a_hub_dataset_id_is_profiled_planned_and_loaded_with_its_config_and_splits(hub, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["train", "--data", "someone/topics", "--data-config", "small",
                                          "--data-splits", "validation=dev", "--explain"])
    cfg, data = train_command.resolve(args)
    assert hub == [("someone/topics", "small")] * 2  # the profile, then the data as training reads them
    assert cfg.data.path is None and cfg.data.name == "someone/topics" and cfg.data.config_name == "small"
    assert (cfg.data.train_split, cfg.data.validation_split, cfg.data.test_split) == ("train", "dev", "test")
    assert data.labels == CLASSES and {k: len(v) for k, v in data.splits.items()} == {"train": 60, "validation": 12,
                                                                                       "test": 12}
    assert cfg.name == "topics"
    out = capsys.readouterr().out
    assert "data someone/topics: train 60, validation 12, test 12 rows" in out and "Hugging Face dataset given" in out


def test_with_a_preset_a_hub_id_becomes_the_config_s_data_source(hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["train", "--config", "trec", "--data", "someone/topics",
                                          "--data-splits", "test=none"])
    cfg, data = train_command.resolve(args)
    assert data is None and hub == []  # training reads them
    assert cfg.data.path is None and cfg.data.name == "someone/topics" and cfg.data.test_split is None


def test_a_local_folder_wins_over_a_hub_id_of_the_same_name(hub, tmp_path, monkeypatch, capsys):
    write_dataset(tmp_path / "someone" / "topics", {"train": NAMED})
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--data", "someone/topics", "--explain"]) == 0
    assert hub == [] and "the folder given" in capsys.readouterr().out


def test_hub_options_without_a_hub_id_are_refused(folder, capsys):
    assert cli.main(["train", "--data", str(folder), "--data-config", "small", "--explain"]) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --data {folder} is a local path, and --data-config name a hub dataset's config and splits (a folder's "
        "splits are its files: train.*, validation.*, test.*)"]
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--data", "someone/topics", "--data-splits", "dev=validation"])
    assert exit_.value.code == 2
    assert "argument --data-splits: expected ROLE=SPLIT" in _error_lines(capsys.readouterr().err)[0]


def test_a_path_that_is_neither_a_folder_nor_a_hub_id_is_one_line(tmp_path, capsys):
    assert cli.main(["train", "--data", str(tmp_path / "no" / "such" / "folder"), "--explain"]) == 2
    assert _error_lines(capsys.readouterr().err) == [
        f"error: --data {tmp_path / 'no' / 'such' / 'folder'}: no such file or folder, and not a Hugging Face dataset "
        "id (e.g. ag_news or user/name)"]


def test_offline_the_hub_id_is_one_line_without_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the real datasets.load_dataset, which cannot reach the hub
    assert cli.main(["train", "--data", "someone/not-cached", "--explain"]) == 2
    out, err = capsys.readouterr()
    (line,) = err.splitlines()
    assert line.startswith("error: hub dataset 'someone/not-cached' could not be loaded from the Hugging Face hub "
                           "(offline?): offline mode (HF_HUB_OFFLINE)")
    assert "--data FOLDER" in line and out == "" and list(tmp_path.iterdir()) == []


def test_an_unreachable_hub_without_offline_mode_is_the_same_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "0")
    monkeypatch.setattr(sources, "hub_reachable", lambda timeout=3.0: True)  # DNS answers, the download fails

    def unreachable(path, name=None, **kwargs):
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(sources, "load_dataset", unreachable)
    assert cli.main(["train", "--data", "ag_news", "--data-config", "default", "--explain"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: hub dataset 'ag_news' (config 'default') could not be loaded from the Hugging Face "
                           "hub (offline?): Couldn't reach 'ag_news' on the Hub")


def test_explain_with_a_preset_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--config", "trec", "--explain"]) == 2  # it was exit 1, a bare SystemExit
    assert capsys.readouterr().err == ("error: --explain describes the recipe's choices: give --data DIR (or a hub "
                                       "dataset id) without --config\n")
