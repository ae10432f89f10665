"""Nothing the user has is lost: `suggest -o` naming an input (the pool however spelt, a file of the
labelled folder, the run), `label` appending to the pool, a pool with invalid UTF-8 (training's policy:
an error naming the line unless --invalid-utf8 replace) — each one `error:` line, exit 2, and every
file as it was. No model is loaded: each refusal comes before the pool's vectors."""

from __future__ import annotations

import json
import os
import socket

import pytest

from tfm_cls.cli import main

from .test_label_http import WordVectors


@pytest.fixture
def files(tmp_path):
    pool = tmp_path / "pool.txt"
    pool.write_text("a film about cats\nbread and soup\na tennis match\n", encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    (data / "labels.json").write_text(json.dumps(["animals", "food", "sports"]))
    (data / "train.jsonl").write_text(json.dumps({"text": "a dog", "label": "animals"}) + "\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text("{}")
    return pool, data, run


def snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def word_vectors(monkeypatch):
    import tfm_cls.suggest.vectors as vectors

    monkeypatch.setattr(vectors, "default_vectorizer", lambda **kwargs: WordVectors())


def refused(argv, capsys, says: str, root) -> None:
    before = snapshot(root)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err
    assert snapshot(root) == before  # nothing written, nothing removed


def test_suggest_output_naming_an_input_is_refused_before_reading(files, tmp_path, capsys):
    pool, data, run = files
    os.symlink(pool, tmp_path / "link.txt")
    os.link(pool, tmp_path / "hard.txt")
    (tmp_path / "sub").mkdir()
    spellings = [str(pool), str(tmp_path / "sub" / ".." / "pool.txt"), str(tmp_path / "link.txt"),
                 str(tmp_path / "hard.txt"), os.path.relpath(pool)]
    for out in spellings:
        refused(["suggest", "--pool", str(pool), "-o", out], capsys, "is the pool", tmp_path)
    for out in [data / "train.jsonl", data / "labels.json", data / "validation.jsonl", data / ".." / "data" / "test.csv"]:
        refused(["suggest", "--pool", str(pool), "--data", str(data), "-o", str(out)], capsys, "labelled folder",
                tmp_path)
    refused(["suggest", "--pool", str(pool), "--run", str(run), "-o", str(run / "to_label.jsonl")], capsys,
            "the run", tmp_path)
    refused(["suggest", "--pool", str(pool), "--run", str(run), "-o", str(run)], capsys, "the run", tmp_path)
    refused(["suggest", "--pool", str(pool), "-o", str(data)], capsys, "is a folder", tmp_path)
    refused(["suggest", "--pool", str(pool), "-o", str(pool / "x.jsonl")], capsys, "is a file, not a folder", tmp_path)


def test_a_pool_with_invalid_utf8_follows_trainings_policy(files, tmp_path, capsys, word_vectors):
    pool, data, _ = files
    pool.write_bytes(b"a film about cats\nbread and caf\xe9 soup\na tennis match\n")
    out = tmp_path / "to_label.jsonl"
    refused(["suggest", "--pool", str(pool), "-n", "2", "-o", str(out)], capsys, "line 2: invalid UTF-8", tmp_path)
    capsys.readouterr()
    assert main(["suggest", "--pool", str(pool), "-n", "3", "--invalid-utf8", "replace", "-o", str(out)]) == 0
    texts = {json.loads(line)["text"] for line in out.read_text(encoding="utf-8").split("\n") if line}
    assert "bread and caf\ufffd soup" in texts


def test_label_refusals(files, tmp_path, capsys):
    pool, data, _ = files
    refused(["label", "--pool", str(pool)], capsys, "needs --data", tmp_path)
    refused(["label", "--pool", str(data / "train.jsonl"), "--data", str(data), "--port", "0"], capsys,
            "is the pool", tmp_path)
    refused(["label", "--pool", str(pool), "--data", str(pool), "--port", "0"], capsys, "is a file", tmp_path)
    pool.write_bytes(b"caf\xe9\n")
    refused(["label", "--pool", str(pool), "--data", str(data), "--port", "0"], capsys, "line 1: invalid UTF-8",
            tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        refused(["label", "--pool", str(pool), "--data", str(data), "--port", str(taken.getsockname()[1])], capsys,
                "cannot listen on 127.0.0.1", tmp_path)
