"""`tfm-cls suggest` end to end (in this process, the packaged MiniLM loaded once): the cold start
from label descriptions, suggestions after some labels, a run's guesses, and each bad input as one
`error:` line and exit 2."""

import json

import pytest
from kits.tiny_topics import CLASSES

from tfm_cls.cli import main

from .conftest import label_some


def rows_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_cold_start_covers_the_pool_with_zero_shot_guesses(with_minilm, pool_file, data_dir, tmp_path, capsys):
    out = tmp_path / "to_label.jsonl"
    assert main(["suggest", "--pool", str(pool_file), "--data", str(data_dir), "-n", "6", "-o", str(out)]) == 0
    rows = rows_of(out)
    assert [r["rank"] for r in rows] == list(range(1, 7))
    assert len({r["text"].lower() for r in rows}) == 6
    assert all("cold start" in r["reason"] and r["guess"]["label"] in CLASSES for r in rows)
    # the descriptions say what the labels mean: the zero-shot guesses mostly right on these texts
    words = {"animals": ("cat", "dog", "horse", "tiger", "bird", "fish"),
             "food": ("bread", "apple", "cheese", "pasta", "soup", "rice")}
    checked = [r for r in rows if any(w in r["text"].split() for ws in words.values() for w in ws)]
    right = [r for r in checked if any(w in r["text"].split() for w in words.get(r["guess"]["label"], ()))]
    assert len(right) >= len(checked) // 2
    assert "6 suggestions" in capsys.readouterr().out


def test_with_labels_labelled_texts_are_never_suggested(with_minilm, pool_file, data_dir, tmp_path):
    labelled = label_some(data_dir)
    pool = pool_file.read_text().splitlines()
    pool_file.write_text("\n".join([*pool, labelled[0]["text"], labelled[1]["text"] + " "]) + "\n")
    out = tmp_path / "to_label.jsonl"
    assert main(["suggest", "--pool", str(pool_file), "--data", str(data_dir), "-n", "5", "-o", str(out)]) == 0
    rows = rows_of(out)
    taken = {r["text"].strip() for r in labelled}
    assert len(rows) == 5 and not {r["text"].strip() for r in rows} & taken
    assert all(0 <= r["uncertainty"] <= 1 and "uncertain" in r["reason"] for r in rows)


def test_a_runs_calibrated_guesses(with_minilm, tiny_run, pool_file, tmp_path):
    out = tmp_path / "to_label.jsonl"
    assert main(["suggest", "--pool", str(pool_file), "--run", str(tiny_run), "-n", "4", "-o", str(out)]) == 0
    rows = rows_of(out)
    assert len(rows) == 4 and all(r["guess"]["label"] in CLASSES and 0 < r["guess"]["score"] <= 1 for r in rows)


def test_bad_inputs_are_one_error_line_and_exit_2(with_minilm, tiny_run, pool_file, data_dir, tmp_path, capsys):
    out = tmp_path / "o.jsonl"

    def fails(*argv, says):
        capsys.readouterr()
        assert main(["suggest", *argv, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err
        assert not out.exists()

    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    fails("--pool", str(empty), says="the pool is empty")
    fails("--pool", str(tmp_path / "missing.txt"), says="not found")
    unreadable = tmp_path / "script.txt"
    unreadable.write_text("ሰላም ለዓለም\nእንዴት ነህ\n", encoding="utf-8")  # Ge'ez: not in MiniLM's vocabulary
    fails("--pool", str(unreadable), says="reads none")
    label_some(data_dir, per_class=12)
    labelled_only = tmp_path / "labelled.txt"
    labelled_only.write_text("\n".join(json.loads(line)["text"] for line in (data_dir / "train.jsonl").read_text().splitlines()))
    fails("--pool", str(labelled_only), "--data", str(data_dir), says="labelled already")
    (data_dir / "labels.json").write_text(json.dumps(["sports", "food", "animals"]))
    fails("--pool", str(pool_file), "--data", str(data_dir), "--run", str(tiny_run), says="retrain")
    fails("--pool", str(pool_file), "--data", str(tmp_path / "nowhere"), says="no such folder")
    with pytest.raises(SystemExit) as exit_:  # argparse's usage error
        main(["suggest", "--pool", str(pool_file), "-n", "0", "-o", str(out)])
    assert exit_.value.code == 2 and "expected a positive integer" in capsys.readouterr().err


def test_the_python_api(with_minilm, tiny_run):
    from tfm_cls import TextClassifier

    clf = TextClassifier.load(tiny_run)
    pool = ["a cat and a dog", "some bread with cheese", "tennis and golf", "the cat with soup", "A cat and a dog"]
    rows = clf.suggest(pool, 3, exclude=["tennis and golf"])
    assert len(rows) == 3 and all(r["text"] != "tennis and golf" for r in rows)
    assert len({r["text"].lower() for r in rows}) == 3
