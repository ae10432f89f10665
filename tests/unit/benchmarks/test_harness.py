"""benchmarks/harness: paired rounds and their ratios, the results writer, the data readers and
the CPU accounting every benchmark uses."""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks.harness.cpu import CpuClock, descendants, process_stats, tree_cpu_seconds
from benchmarks.harness.data import read_folder, read_labelled, read_rows, read_texts, speed_sample
from benchmarks.harness.results import Results, write_results
from benchmarks.harness.timing import median_seconds, paired_rounds


def test_paired_rounds_run_every_system_once_per_round_in_turn_after_the_warm_up():
    calls: list[str] = []

    def system(name, seconds):
        def run():
            calls.append(name)
            time.sleep(seconds)
            return name.upper()
        return run

    rounds = paired_rounds({"slow": system("slow", 0.02), "fast": system("fast", 0.005)}, 3, warmup=2)
    assert calls == ["slow", "fast"] * 5  # two warm-up rounds, then three timed ones
    assert {k: len(v) for k, v in rounds.wall.items()} == {"slow": 3, "fast": 3}
    assert rounds.outputs == {"slow": "SLOW", "fast": "FAST"}
    assert rounds.median("slow") >= 0.02 and rounds.median("fast") >= 0.005
    assert rounds.ratio("fast", "slow") > 1.5  # fast is faster than the reference by ~4x (sleep overshoot aside)
    assert rounds.ratio("slow", "slow") == 1.0
    assert rounds.median("fast", "cpu") < rounds.median("fast")  # sleeping costs no CPU


def test_paired_rounds_go_on_until_min_seconds_but_not_past_max_rounds():
    rounds = paired_rounds({"a": lambda: time.sleep(0.01)}, 2, warmup=0, min_seconds=0.08, max_rounds=5)
    assert 5 >= len(rounds.wall["a"]) >= 4  # 8 x 10 ms wanted, capped at 5 rounds
    assert len(paired_rounds({"a": lambda: None}, 3, warmup=0, min_seconds=10.0, max_rounds=3).wall["a"]) == 3
    seconds, last = median_seconds(lambda: 7, 3)
    assert last == 7 and seconds >= 0


def test_results_are_named_by_time_and_quick_runs_apart(tmp_path):
    path = write_results(tmp_path / "out", "inference", {"a": 1, "nan": float("nan"), "where": Path("x"),
                                                          "array": np.array([1.5, np.inf]), "n": np.int64(3)},
                         "| table |")
    assert path.parent == tmp_path / "out" and path.name.startswith("inference-") and path.suffix == ".json"
    stamp = path.stem.removeprefix("inference-")
    assert len(stamp) == 15 and stamp[8] == "-" and stamp.replace("-", "").isdigit()  # YYYYmmdd-HHMMSS
    assert json.loads(path.read_text()) == {"a": 1, "nan": None, "where": "x", "array": [1.5, None], "n": 3}
    assert path.with_suffix(".md").read_text() == "| table |\n"
    quick = Results(tmp_path, "inference", quick=True)
    assert quick.json.name.endswith("-quick.json") and quick.beside(".png").name.endswith("-quick.png")
    quick.write({"rows": [1]})
    quick.write({"rows": [1, 2]})  # a long benchmark rewrites its one file after every row
    assert json.loads(quick.json.read_text()) == {"rows": [1, 2]} and not quick.beside(".md").exists()


def test_the_readers_give_rows_texts_and_labelled_splits(tmp_path):
    (tmp_path / "test.jsonl").write_text('{"text": "a", "label": 1}\n\n{"text": "b", "label": 0}\n'
                                         '{"text": "c", "label": 2}\n')
    (tmp_path / "lines.txt").write_text("  first line \n\nsecond\n")
    assert [r["text"] for r in read_rows(tmp_path / "test.jsonl")] == ["a", "b", "c"]  # blank lines skipped
    assert read_texts(tmp_path / "test.jsonl", limit=2) == ["a", "b"]
    assert read_texts(tmp_path / "lines.txt") == ["first line", "second"]
    split = read_labelled(tmp_path / "test.jsonl")
    assert split.texts == ["a", "b", "c"] and split.targets.tolist() == [1, 0, 2] and split.pairs is None
    capped = read_labelled(tmp_path / "test.jsonl", cap=2, seed=0)
    assert len(capped.texts) == 2 and capped.texts == sorted(capped.texts)  # a sample, in file order
    assert speed_sample(split, 2) == ["a", "b"] and speed_sample(split, 0) == ["a", "b", "c"]


def test_a_multi_label_folder_becomes_multi_hot_targets(tmp_path):
    (tmp_path / "labels.json").write_text('["x", "y", "z"]')
    (tmp_path / "train.jsonl").write_text('{"text": "one", "labels": [0, 2]}\n{"text": "two", "labels": [1]}\n')
    splits = read_folder(tmp_path, ["train"])
    assert splits["train"].targets.tolist() == [[1, 0, 1], [0, 1, 0]]


def test_cpu_time_of_this_process_and_of_a_process_tree():
    clock = CpuClock()
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    assert clock.seconds >= 0.05 and math.isclose(clock.minutes, clock.seconds / 60, rel_tol=0.1)
    if not os.path.isdir("/proc"):
        pytest.skip("no /proc")
    me = process_stats(os.getpid())
    assert me.peak_kib >= me.rss_kib > 0 and me.cpu_seconds > 0 and "python" in me.command
    assert descendants(os.getpid())[0] == os.getpid()
    assert tree_cpu_seconds(os.getpid()) >= me.cpu_seconds
    assert process_stats(2**22 + 12345) is None  # no such process
