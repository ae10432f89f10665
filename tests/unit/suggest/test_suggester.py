"""Suggester on a toy encoder (a seeded random vector per word, summed): the cold start covers the
pool and guesses from the names; with labels it picks uncertain texts, never labelled ones nor
near-copies of them; unreadable texts are set aside or refused."""

import hashlib
import json

import numpy as np
import pytest

from tfm_cls.errors import InputError
from tfm_cls.suggest import Settings, Suggester
from tfm_cls.suggest.names import parse_labels
from tfm_cls.suggest.pool import collect
from tfm_cls.suggest.store import read_folder
from tfm_cls.suggest.suggester import check_labels, write_suggestions


class WordVectors:
    """Sum of a fixed random vector per word; words in CAPS are 'another script' ([UNK])."""

    name = "toy"
    unk_id = 0

    def vector(self, word):
        seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
        return np.random.default_rng(seed).standard_normal(32)

    def unknown_share(self, texts):
        return np.array([np.mean([w.isupper() for w in t.split()]) for t in texts])

    def __call__(self, texts):
        x = np.stack([sum(self.vector(w) for w in t.lower().split()) for t in texts])
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


TOPICS = {"cat": ["cat", "kitten", "purr"], "car": ["car", "engine", "wheel"], "rain": ["rain", "cloud", "wet"]}


def pool_texts(n=60, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        topic = list(TOPICS)[i % 3]
        words = [*rng.choice(TOPICS[topic], 3), *rng.choice(["the", "a", "is", "very", "today"], 2), f"w{i}"]
        out.append(" ".join(words))
    return out


def folder(tmp_path, rows):
    (tmp_path / "labels.json").write_text(json.dumps({"cat": "cat kitten purr", "car": "car engine wheel",
                                                      "rain": "rain cloud wet"}))
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_folder(tmp_path)


def test_cold_start_covers_the_pool_and_guesses_from_the_names():
    texts = pool_texts()
    names = parse_labels({"cat": "cat kitten purr", "car": "car engine wheel", "rain": "rain cloud wet"}, "x")
    s = Suggester(collect(enumerate(texts, 1)), WordVectors(), names)
    got = s.suggest(6)
    assert len(got) == 6 and len({g.text for g in got}) == 6
    assert all("cold start" in g.reason and g.guess["from"].startswith("label names") for g in got)
    right = sum(g.guess["label"] == list(TOPICS)[(g.line - 1) % 3] for g in got)
    assert right >= 5


def test_with_labels_no_labelled_text_nor_a_near_copy_is_suggested(tmp_path):
    texts = pool_texts()
    labelled = folder(tmp_path, [{"text": texts[0], "label": "cat"}, {"text": texts[1], "label": "car"},
                                 {"text": texts[2], "label": "rain"}])
    copy = texts[1].upper().lower() + " "  # the same words: a near-duplicate (cosine 1)
    s = Suggester(collect(enumerate([*texts, copy], 1), labelled=labelled.keys), WordVectors(), labelled.names)
    got = s.suggest(10, labelled)
    chosen = {g.text for g in got}
    assert len(got) == 10 and not chosen & set(texts[:3]) and copy not in chosen
    assert all(g.uncertainty is not None and "uncertain" in g.reason and "label" in g.guess for g in got)
    rows = [g.row(i) for i, g in enumerate(got, 1)]
    assert [r["rank"] for r in rows] == list(range(1, 11))


def test_top_and_entropy_settings_and_a_bad_setting():
    texts = pool_texts()
    s = Suggester(collect(enumerate(texts, 1)), WordVectors(), None, Settings(strategy="top", uncertainty="entropy"))
    assert s.settings.strategy == "top"
    with pytest.raises(ValueError, match="strategy"):
        Settings(strategy="best")


def test_unreadable_texts_are_set_aside_and_a_pool_of_them_refused():
    texts = pool_texts(12)
    s = Suggester(collect(enumerate([*texts, "ЖЖЖ ЩЩЩ"], 1)), WordVectors())
    assert len(s.texts) == 12
    with pytest.raises(InputError, match="reads none"):
        Suggester(collect(enumerate(["ЖЖЖ ЩЩЩ", "ЯЯ ЮЮ"], 1)), WordVectors())


def test_everything_labelled_or_near_is_an_input_error(tmp_path):
    texts = pool_texts(3)
    labelled = folder(tmp_path, [{"text": t, "label": "cat"} for t in texts])
    s = Suggester(collect(enumerate([t + " " for t in texts] + [" ".join(reversed(texts[0].split()))], 1)), WordVectors())
    with pytest.raises(InputError):
        s.suggest(2, labelled)
    with pytest.raises(InputError, match="at least 1"):
        s.suggest(0)


def test_the_run_and_the_folder_must_name_the_same_labels():
    check_labels(["a", "b"], ["a", "b"], "run", "dir")
    with pytest.raises(InputError, match="retrain"):
        check_labels(["a", "b"], ["b", "a"], "run", "dir")


def test_output_is_written_whole(tmp_path):
    s = Suggester(collect(enumerate(pool_texts(9), 1)), WordVectors())
    out = tmp_path / "to_label.jsonl"
    write_suggestions(str(out), s.suggest(3))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["rank"] for r in rows] == [1, 2, 3] and all(r["guess"] is None for r in rows)


def test_multi_label_uncertainty_names_the_label_nearest_its_threshold(tmp_path):
    texts = pool_texts()
    labelled = folder(tmp_path, [{"text": texts[0], "labels": ["cat"]}, {"text": texts[1], "labels": ["car"]},
                                 {"text": texts[2], "labels": ["rain", "cat"]}, {"text": texts[4], "labels": []}])
    assert labelled.multi_label
    s = Suggester(collect(enumerate(texts, 1), labelled=labelled.keys), WordVectors(), labelled.names)
    got = s.suggest(4, labelled)
    assert len(got) == 4 and all("nearest its threshold" in g.reason for g in got)
    assert all(set(g.guess) == {"labels", "scores"} and set(g.guess["scores"]) == {"cat", "car", "rain"} for g in got)
