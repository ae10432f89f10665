"""benchmarks.growth: its sets are built as asked, a bad --source is one usage error, and no folder it
writes may be the source; the log-gap reader."""

import json

import pytest

from benchmarks import growth
from benchmarks.harness.growth_sets import long_documents, short_reviews


def _source(folder):
    folder.mkdir()
    for split in ("train", "validation", "test"):
        rows = [{"text": f"sentence {i} of {split} {'good' if i % 2 else 'bad'}", "label": i % 2} for i in range(20)]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_sets_hold_the_rows_asked_for_and_keep_their_labels(tmp_path):
    source = _source(tmp_path / "src")
    short = short_reviews(source, tmp_path / "short", 250, evaluation=30)
    rows = [json.loads(line) for line in (short / "train.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 250 and {r["label"] for r in rows} == {0, 1}
    assert all(("good" in r["text"]) == (r["label"] == 1) for r in rows)  # three sentences of one label
    long = long_documents(source, tmp_path / "long", 40, labels=5, words=60, evaluation=10)
    assert len(json.loads((long / "labels.json").read_text())) == 5
    assert sum(1 for _ in (long / "test.jsonl").open()) == 10


def test_a_bad_source_or_a_set_over_it_is_one_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        growth.main(["--short", "10", "--source", str(tmp_path / "none")])
    assert stop.value.code == 2 and "no train.jsonl" in capsys.readouterr().err
    source = _source(tmp_path / "short-10")
    before = (source / "train.jsonl").read_bytes()
    with pytest.raises(SystemExit) as stop:
        growth.main(["--short", "10", "--source", str(source), "--sets", str(tmp_path)])
    assert stop.value.code == 2 and (source / "train.jsonl").read_bytes() == before


def test_the_longest_gap_reads_the_log_stamps():
    assert growth.longest_gap(["23:59:50 a", "x", "00:00:20 b", "00:00:25 c"]) == 30.0
