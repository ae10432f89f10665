"""Distillation of sentence-pair tasks (classification and regression): the pair transfer set
(augmented copies, neighbour pairs, the held-out guard), pair teachers (run and ONNX), a pair
student end to end, and the refusals."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from kits import tasks_tiny as T

from tfm_cls import runs as R
from tfm_cls.cli import main
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.data.tokenized import tokenize_dataset
from tfm_cls.distill import DistillConfig, distill
from tfm_cls.distill.config import TransferConfig
from tfm_cls.distill.labelling import CACHE_DIR
from tfm_cls.distill.teacher import open_teacher
from tfm_cls.distill.transfer import NO_LABEL, TransferSet, build_pair_transfer_set
from tfm_cls.errors import ConfigError, TeacherError
from tfm_cls.train import train

STUDENT = [*T.TINY, "name=tiny-pair-distill", "transfer.copies=2", "transfer.pair_neighbours=3", "teacher.chunk_size=64"]


@pytest.fixture(scope="module")
def pair_data(tmp_path_factory) -> Path:
    return T.pair_data(tmp_path_factory.mktemp("pair_data"))


def _teacher(tmp_path_factory, data: Path, name: str, *extra: str) -> Path:
    run = tmp_path_factory.mktemp(name) / "run"
    train(load_config(ClassifierConfig, None, T.overrides(data, run, *extra, "model.d_model=32", "model.dim_feedforward=64")))
    return run


@pytest.fixture(scope="module")
def pair_teacher(tmp_path_factory, pair_data) -> Path:
    return _teacher(tmp_path_factory, pair_data, "pair_teacher", *T.PAIRS)


@pytest.fixture(scope="module")
def reg_teacher(tmp_path_factory, pair_data) -> Path:
    return _teacher(tmp_path_factory, pair_data, "reg_teacher", *T.REGRESSION)


def _config(data: Path, teacher: Path, run_dir: Path, *extra: str) -> DistillConfig:
    return load_config(DistillConfig, None, [*STUDENT, f"data.path={data}", f"teacher.path={teacher}",
                                             f"run_dir={run_dir}", *extra])


# ---- the transfer set ---------------------------------------------------------------------------------------

FIRSTS = ["a man plays a guitar", "a woman cuts an onion", "two dogs run on grass"]
SECONDS = ["a man plays an instrument", "a woman cuts a potato", "two dogs sleep"]


def test_pair_transfer_set_keeps_gold_pairs_first_and_copies_both_sides_deterministically():
    cfg = TransferConfig(copies=4, mask_rate=0.3, replace_rate=0.3, ngram_rate=0.0)
    a = build_pair_transfer_set(FIRSTS, SECONDS, [0, 1, 2], [], cfg, seed=3)
    b = build_pair_transfer_set(FIRSTS, SECONDS, [0, 1, 2], [], cfg, seed=3)
    assert (a.texts, a.pairs) == (b.texts, b.pairs) and a.fingerprint() == b.fingerprint()
    assert a.texts[:3] == FIRSTS and a.pairs[:3] == SECONDS and a.labels[:3].tolist() == [0, 1, 2]
    assert (a.labels[3:] == NO_LABEL).all() and a.has_gold.tolist() == [True] * 3 + [False] * (len(a) - 3)
    assert len(a) == len(a.pairs) == 3 + a.report["augmented_pairs"] > 3
    assert len(set(zip(a.texts, a.pairs))) == len(a)  # no duplicate pair
    changed_first = sum(x != FIRSTS[i % 3] for i, x in enumerate(a.texts[3:]))
    changed_second = sum(x not in SECONDS for x in a.pairs[3:])
    assert changed_first and changed_second  # both sides are augmented


def test_neighbour_pairs_join_the_nearest_sentences_and_never_a_held_out_pair():
    firsts, seconds = ["the cat sat on the mat", "a red car drives fast"], ["a dog barks", "a red car drives slowly"]
    cfg = TransferConfig(copies=0, pair_neighbours=1)
    held_out = [("a red car drives slowly", "a red car drives fast")]  # the nearest pair of those two, reversed
    t = build_pair_transfer_set(firsts, seconds, [1, 0], held_out, cfg, seed=0)
    added = set(zip(t.texts[2:], t.pairs[2:]))
    # sorted sentences: "a dog barks" -> "a red car drives fast" (ties go to the lower index); "fast" -> "slowly"
    # is a training pair; "slowly" -> "fast" is held out; "the cat sat on the mat" shares no word -> "a dog barks",
    # again a training pair
    assert ("a red car drives fast", "a red car drives slowly") not in added  # an existing training pair
    assert ("a red car drives slowly", "a red car drives fast") not in added  # held out
    assert t.report["held_out_pairs_dropped"] == 1 and t.report["duplicates_dropped"] == 2
    assert added == {("a dog barks", "a red car drives fast")} and t.report["neighbour_pairs"] == 1


def test_regression_transfer_set_marks_pairs_without_a_gold_value_with_nan():
    t = build_pair_transfer_set(FIRSTS, SECONDS, [4.5, 3.0, 1.2], [], TransferConfig(copies=2), seed=0, regression=True)
    assert t.labels.dtype == np.float32 and t.labels[:3].tolist() == pytest.approx([4.5, 3.0, 1.2])
    assert np.isnan(t.labels[3:]).all() and t.has_gold.sum() == 3


def test_fingerprint_of_single_texts_is_unchanged_and_pairs_change_it():
    import hashlib

    single = TransferSet(texts=["x y", "z"], labels=np.asarray([1, NO_LABEL]), report={})
    expected = hashlib.sha256(b"1\tx y\0" + f"{NO_LABEL}\tz\0".encode()).hexdigest()
    assert single.fingerprint() == expected  # caches written before pairs existed stay valid
    paired = TransferSet(texts=["x y", "z"], labels=np.asarray([1, NO_LABEL]), report={}, pairs=["p", "q"])
    other = TransferSet(texts=["x y", "z"], labels=np.asarray([1, NO_LABEL]), report={}, pairs=["p", "r"])
    assert len({single.fingerprint(), paired.fingerprint(), other.fingerprint()}) == 3


# ---- pair teachers --------------------------------------------------------------------------------------------


def _reference_logits(run_dir: Path, texts: list[str], pairs: list[str]) -> np.ndarray:
    """The run's model on the pairs as training tokenizes them (tokenize_dataset), one at a time."""
    from datasets import Dataset

    run = R.load_run(run_dir)
    split = tokenize_dataset(Dataset.from_dict({"text": texts, "text_pair": pairs}), run.tokenizer, "ref")
    rows = []
    with torch.no_grad():
        for ids, types in zip(split.input_ids, split.token_type_ids):
            rows.append(run.model(torch.tensor([ids]), None, torch.tensor([types]))[0].numpy())
    return np.stack(rows)


@pytest.mark.parametrize("which", ["pair_teacher", "reg_teacher"])
def test_pair_teachers_read_both_texts_with_their_token_types(request, which, tmp_path):
    from tfm_cls.export.exporter import export_run

    run_dir = request.getfixturevalue(which)
    texts = ["red apple pie", "goal striker match win", "apple"]
    pairs = ["apple banana fruit salad sweet", "match", "striker goal"]
    run_teacher = open_teacher(run_dir)
    assert run_teacher.pair and run_teacher.head == ("regression" if which == "reg_teacher" else "single_label")
    got = run_teacher.logits(texts, batch_size=2, pairs=pairs)
    np.testing.assert_allclose(got, _reference_logits(run_dir, texts, pairs), rtol=1e-4, atol=1e-5)
    swapped = run_teacher.logits(pairs, batch_size=2, pairs=texts)
    assert not np.allclose(got, swapped)  # the order of the two texts matters: token types reach the model
    onnx_teacher = open_teacher(export_run(run_dir))
    assert onnx_teacher.pair and onnx_teacher.head == run_teacher.head
    np.testing.assert_allclose(onnx_teacher.logits(texts, 2, pairs), got, rtol=1e-3, atol=1e-4)
    for teacher in (run_teacher, onnx_teacher):
        with pytest.raises(TeacherError, match="reads sentence pairs"):
            teacher.logits(texts, 2)


# ---- students end to end --------------------------------------------------------------------------------------


def test_pair_student_is_an_ordinary_pair_run_and_exports_with_token_types(tmp_path, pair_data, pair_teacher):
    run_dir = tmp_path / "student"
    metrics = distill(_config(pair_data, pair_teacher, run_dir, *T.PAIRS))
    report = metrics["distillation"]["transfer_set"]
    assert report["train_pairs"] == 90 and report["neighbour_pairs"] > 0 and report["transfer_texts"] > 90
    run = R.load_run(run_dir)
    assert run.config.data.text_pair_column == "second" and run.model.config["type_vocab_size"] == 2
    assert 0.0 <= metrics["test"]["accuracy"] <= 1.0 and metrics["test"]["examples"] == 45
    chunks = sorted((run_dir / CACHE_DIR).glob("chunk-*.npy"))
    cached = np.concatenate([np.load(c) for c in chunks])
    assert cached.shape == (report["transfer_texts"], 2)
    assert main(["export", "--run", str(run_dir)]) == 0
    assert main(["verify-onnx", "--run", str(run_dir)]) == 0  # the one verify: random two-segment token types


def test_regression_student_learns_the_teachers_values(tmp_path, pair_data, reg_teacher):
    """gold_weight 0: the student sees only the teacher's values, and ends up predicting them on
    test pairs it never saw better than the mean does."""
    run_dir = tmp_path / "student"
    metrics = distill(_config(pair_data, reg_teacher, run_dir, *T.REGRESSION, "loss.gold_weight=0", "train.epochs=6",
                              "train.lr=3e-3"))
    assert set(metrics["test"]) >= {"pearson", "spearman", "mse"} and math.isfinite(metrics["test"]["mse"])
    assert metrics["distillation"]["teacher"]["train_agreement"] == pytest.approx(
        float(np.corrcoef(*_teacher_and_gold(reg_teacher, pair_data))[0, 1]), abs=1e-4
    )
    from tfm_cls.data.sources import load_data

    test = load_data(R.load_run(run_dir).config.data).splits["test"]
    texts, pairs = list(test["text"]), list(test["text_pair"])
    teacher_values = open_teacher(reg_teacher).logits(texts, 16, pairs)[:, 0]
    student_values = open_teacher(run_dir).logits(texts, 16, pairs)[:, 0]
    mse_student = float(np.mean((student_values - teacher_values) ** 2))
    mse_mean = float(np.mean((teacher_values.mean() - teacher_values) ** 2))
    assert mse_student < mse_mean


def _teacher_and_gold(teacher_dir: Path, data: Path) -> tuple[np.ndarray, np.ndarray]:
    from tfm_cls.data.sources import load_data

    train_split = load_data(R.load_run(teacher_dir).config.data).splits["train"]
    values = open_teacher(teacher_dir).logits(list(train_split["text"]), 16, list(train_split["text_pair"]))[:, 0]
    return values, np.asarray(train_split["label"], dtype=np.float64)


# ---- refusals ---------------------------------------------------------------------------------------------------


def test_teacher_and_data_must_agree_on_pairs_and_task(tmp_path, pair_data, pair_teacher, reg_teacher):
    with pytest.raises(TeacherError, match="reads sentence pairs, but the data has no data.text_pair_column"):
        distill(_config(pair_data, pair_teacher, tmp_path / "a", "data.text_columns=[first]", "transfer.pair_neighbours=0"))
    with pytest.raises(TeacherError, match="is a regression model, but data.task=single_label"):
        distill(_config(pair_data, reg_teacher, tmp_path / "b", *T.PAIRS))
    with pytest.raises(ConfigError, match="transfer.extra_text adds single texts"):
        distill(_config(pair_data, pair_teacher, tmp_path / "c", *T.PAIRS, f"transfer.extra_text.paths=[{pair_data}/train.jsonl]"))
    with pytest.raises(ConfigError, match="single_label and regression"):
        distill(_config(pair_data, pair_teacher, tmp_path / "d", *T.PAIRS, "data.task=multi_label"))
    assert not any((tmp_path / k).exists() for k in "abcd")  # refused before the run directory is made


def test_cli_refusals_are_one_line_and_exit_2(tmp_path, pair_data, pair_teacher, capsys):
    args = ["distill", "--config", "sick", f"data.path={pair_data}", "data.text_columns=[first]",
            "data.text_pair_column=null", "data.label_column=label", f"teacher.path={pair_teacher}", f"run_dir={tmp_path / 'r'}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "pair_neighbours applies to sentence pairs" in err[0]


def test_cli_distill_of_a_regression_task_prints_its_metrics(tmp_path, pair_data, reg_teacher, capsys):
    import json

    args = ["distill", "--config", "sick-relatedness", f"data.path={pair_data}", *STUDENT, *T.REGRESSION,
            "student.tokenizer=own", "student.embedding_init=random", f"teacher.path={reg_teacher}",
            f"run_dir={tmp_path / 'r'}", "train.epochs=1"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(summary["test"]) == {"pearson", "spearman", "mse", "loss"}
    assert summary["test"] == pytest.approx(
        {k: v for k, v in json.loads((tmp_path / "r" / "metrics.json").read_text())["test"].items() if k in summary["test"]}
    )
