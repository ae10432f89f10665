"""benchmarks/front.py and peers/fasttext_peer.py: seeds grouped into one point, every system timed
in turns, the table's ratios, the figure, and the fastText peer on a tiny task."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks import front as bench_front
from benchmarks.harness.data import Split


def test_runs_named_twice_are_the_seeds_of_one_point():
    assert bench_front.grouped(["cut3=a", "cut2=b", "cut3=c"]) == {"cut3": [Path("a"), Path("c")], "cut2": [Path("b")]}
    with pytest.raises(SystemExit, match="expected NAME=RUN"):
        bench_front.grouped(["cut3"])


def test_systems_are_timed_in_turns_and_compared_with_the_int8_teacher(tmp_path):
    calls: list[str] = []

    def slow(name, seconds):
        def predict(texts):
            calls.append(name)
            time.sleep(seconds * len(texts) / 100)
            return np.zeros(len(texts), int)
        return predict

    points = [
        {"system": "teacher MiniLM (int8)", "kind": "teacher", "accuracy": 0.96, "size_mb": 22.6, "predictor": slow("t", 0.2)},
        {"system": "cut2 (int8)", "kind": "cut", "accuracy": 0.9, "accuracy_std": 0.01, "seeds": 3, "size_mb": 18.0,
         "predictor": slow("c", 0.05)},
        {"system": "fastText", "kind": "classical", "skipped": "not installed"},
    ]
    bench_front.time_in_turns(points, ["a text"] * 100, repeats=3)
    assert calls == ["t", "c"] + ["t", "c"] * 3  # warm-up, then one pass of each per round
    assert all("predictor" not in p for p in points)
    ratio = points[1]["texts_per_s"] / points[0]["texts_per_s"]
    assert 2.5 < ratio < 4.5  # 4x less work; sleep overshoot on a loaded machine
    table = bench_front.format_table(points)
    assert "| cut2 (int8) | 90.0 | 1.0 (3) | 18.0 |" in table and f"{ratio:.1f}x" in table
    assert "| fastText | skipped: not installed |" in table
    figure = bench_front.plot_front(points, "tiny", tmp_path / "front.png")
    assert figure.stat().st_size > 10_000


def test_fasttext_peer_learns_a_tiny_task_end_to_end(tmp_path):
    from benchmarks.peers import fasttext_peer

    if fasttext_peer.available():
        pytest.skip(fasttext_peer.available())
    texts = [f"the {w} and the {v}!" for w, v in zip(["cat", "dog", "horse"] * 20, ["bird", "fish", "tiger"] * 20)]
    texts += [f"some {w} with {v}." for w, v in zip(["soup", "rice", "bread"] * 20, ["apple", "pasta", "cheese"] * 20)]
    labels = np.array([0] * 60 + [1] * 60)
    split = Split(texts, labels)
    model = fasttext_peer.train_fasttext(split, split, tmp_path)
    predicted = model["predictor"](["The CAT, and a fish?", "rice; with pasta"])
    assert predicted.tolist() == [0, 1]
    assert Path(model["model_path"]).is_file() and model["system"] == "fastText bigrams"
    assert fasttext_peer.normalise("What's it?\nYes") == "what's it ?  yes"


def test_fasttext_is_fitted_in_a_process_of_its_own_and_its_error_comes_back_as_one_line(tmp_path):
    from benchmarks.peers import fasttext_peer

    if fasttext_peer.available():
        pytest.skip(fasttext_peer.available())
    path = tmp_path / "m.bin"
    train_file = fasttext_peer.write_split(tmp_path / "train.txt", ["cat dog", "soup rice"] * 10, [0, 1] * 10)
    fasttext_peer._fit_in_child(train_file, path, dict(fasttext_peer.BIGRAMS), 0)
    assert path.is_file()
    with pytest.raises(RuntimeError, match="missing.txt cannot be opened for training"):
        fasttext_peer._fit_in_child(tmp_path / "missing.txt", path, dict(fasttext_peer.BIGRAMS), 0)


def test_runs_are_found_by_their_names(tmp_path):
    for name in ("trec-minilm", "trec", "trec-distill", "trec-distill-seed7", "trec-minilm-cut3", "trec-minilm-cut3-seed7",
                 "trec-minilm-cut2", "trec-minilm-cut9", "sst2-minilm"):
        (tmp_path / name).mkdir()
        if name != "trec-minilm-cut9":  # unfinished: no metrics.json
            (tmp_path / name / "metrics.json").write_text("{}")
    found = bench_front.discovered(tmp_path, "trec")
    assert found["teacher"] == [str(tmp_path / "trec-minilm")] and found["supervised"] == [str(tmp_path / "trec")]
    assert found["student"] == [str(tmp_path / "trec-distill"), str(tmp_path / "trec-distill-seed7")]
    assert bench_front.grouped(found["cut"]) == {
        "cut2": [tmp_path / "trec-minilm-cut2"], "cut3": [tmp_path / "trec-minilm-cut3", tmp_path / "trec-minilm-cut3-seed7"]}
