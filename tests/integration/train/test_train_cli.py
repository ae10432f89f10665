"""`tfm-cls train | eval | predict` through the CLI entry point: outputs and one-line errors."""

import io
import json

import pytest
from kits.tiny_topics import CLASSES, tiny_overrides

from tfm_cls.cli import main


@pytest.fixture
def trained_run(tiny_data, tmp_path):
    run_dir = tmp_path / "run"
    assert main(["train", *tiny_overrides(tiny_data, run_dir, "train.epochs=4")]) == 0
    return run_dir


def test_predict_txt_jsonl_csv_and_stdin(trained_run, tmp_path, monkeypatch, capsys):
    texts = ["cat dog horse", "bread cheese soup", "tennis golf rugby", ""]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"body": t}) + "\n" for t in texts))
    (tmp_path / "in.csv").write_text("id,body\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts)))
    outputs = {}
    for name, extra in (("in.txt", []), ("in.jsonl", ["--text-field", "body"]), ("in.csv", ["--column", "body"])):  # --column: the old name
        out = tmp_path / f"{name}.out.jsonl"
        assert main(["predict", "--run", str(trained_run), "--input", str(tmp_path / name), "--output", str(out), *extra]) == 0
        outputs[name] = [json.loads(line) for line in out.read_text().splitlines()]
    def content(rows):  # the formats number their rows differently (id, line)
        return [{k: v for k, v in r.items() if k not in ("id", "line")} for r in rows]

    assert content(outputs["in.txt"]) == content(outputs["in.jsonl"]) == content(outputs["in.csv"])
    records = outputs["in.txt"]
    assert len(records) == 4 and [r["line"] for r in records] == [1, 2, 3, 4]
    assert [r["label"] for r in records[:3]] == CLASSES  # the topic words decide
    assert records[3]["empty"] is True and records[3]["label"] is None  # an empty line: a row, no guess
    for r in records[:3]:
        assert set(r["probabilities"]) == set(CLASSES)
        assert r["score"] == max(r["probabilities"].values()) == r["probabilities"][r["label"]]
        assert sum(r["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
    # stdin -> stdout
    monkeypatch.setattr("sys.stdin", io.StringIO((tmp_path / "in.txt").read_text()))
    capsys.readouterr()
    assert main(["predict", "--run", str(trained_run), "--input", "-", "--output", "-"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == records


def test_predict_bad_input_names_the_column(trained_run, tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text(json.dumps({"body": "cat"}) + "\n")
    code = main(["predict", "--run", str(trained_run), "--input", str(tmp_path / "in.jsonl"), "--output", "-"])
    assert code == 2
    assert "in.jsonl, line 1: expected an object with key 'text', got ['body']; pass --text-field" in capsys.readouterr().err


def test_predict_and_eval_take_auto_and_refuse_an_unknown_device(trained_run, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("cat\n")
    assert main(["predict", "--run", str(trained_run), "--input", str(tmp_path / "in.txt"), "--device", "auto"]) == 0
    capsys.readouterr()
    assert main(["predict", "--run", str(trained_run), "--input", str(tmp_path / "in.txt"), "--device", "gpu0"]) == 2
    assert "'gpu0': expected auto, cpu, cuda or cuda:N" in capsys.readouterr().err
    assert main(["eval", "--run", str(trained_run), "--device", "gpu0"]) == 2
    assert "'gpu0': expected auto, cpu, cuda or cuda:N" in capsys.readouterr().err


def test_eval_on_a_data_folder_and_on_the_runs_own_test(trained_run, tiny_data, tmp_path, capsys):
    metrics = json.loads((trained_run / "metrics.json").read_text())
    capsys.readouterr()
    assert main(["eval", "--run", str(trained_run)]) == 0
    own = json.loads(capsys.readouterr().out)
    assert own["accuracy"] == metrics["test"]["accuracy"]
    # The same test file with string labels in another order of columns: same result.
    rows = [json.loads(line) for line in (tiny_data / "test.jsonl").read_text().splitlines()]
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"label": CLASSES[r["label"]], "text": r["text"]}) + "\n" for r in rows))
    out = tmp_path / "eval.json"
    assert main(["eval", "--run", str(trained_run), "--data", str(other), "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["accuracy"] == metrics["test"]["accuracy"] and result["examples"] == len(rows)
    assert result["macro_f1"] == pytest.approx(metrics["test"]["macro_f1"])


def test_config_errors_are_one_line(tiny_data, tmp_path, capsys):
    base = tiny_overrides(tiny_data, tmp_path / "run")
    assert main(["train", *base, "train.learning_rate=1e-3"]) == 2
    assert "unknown key 'learning_rate' under train" in capsys.readouterr().err
    assert main(["train", *base, "train.epochs=three"]) == 2
    assert "train.epochs: expected an integer, got 'three'" in capsys.readouterr().err
    assert main(["train", *base, "data.label_column=category"]) == 2
    err = capsys.readouterr().err
    assert "['category'] not found; the columns are ['text', 'label']" in err and "Traceback" not in err
    assert main(["train", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml does not exist" in capsys.readouterr().err
