"""A tiny teacher -> student distillation end to end (both teacher kinds), the student run used by
eval / export / verify / quantize / infer unchanged, and each bad input refused before work starts."""

import json
import logging
import shutil

import numpy as np
import pytest
import yaml
from kits.distill_tiny import distill_config, train_teacher, write_data

from tfm_cls import runs as R
from tfm_cls.cli import main
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.distill import DistillConfig, distill
from tfm_cls.distill.labelling import CACHE_DIR
from tfm_cls.distill.recipe import DISTILL_CONFIG_FILE
from tfm_cls.distill.teacher import file_sha256
from tfm_cls.errors import ConfigError, RunDirError, TeacherError


@pytest.fixture(scope="module")
def student(tmp_path_factory, tiny_data, teacher_run):
    run_dir = tmp_path_factory.mktemp("student") / "run"
    metrics = distill(distill_config(tiny_data, teacher_run, run_dir))
    return run_dir, metrics


def test_student_run_is_an_ordinary_classification_run_that_records_its_teacher(student, teacher_run):
    run_dir, metrics = student
    run = R.load_run(run_dir)  # config.yaml is the student's ClassifierConfig
    assert isinstance(run.config, ClassifierConfig) and run.labels == json.loads((teacher_run / "labels.json").read_text())
    assert run.model.config["d_model"] == 16 and run.model.config["vocab_size"] <= 120
    saved = load_config(DistillConfig, run_dir / DISTILL_CONFIG_FILE)
    assert saved.teacher.path == str(teacher_run)
    assert saved.teacher.sha256 == file_sha256(teacher_run / R.WEIGHTS_FILE) == metrics["distillation"]["teacher"]["sha256"]
    report = metrics["distillation"]
    assert report["transfer_set"]["train_texts"] == 120 and report["transfer_set"]["augmented_texts"] > 200
    assert metrics["data"]["train_examples"] == report["transfer_set"]["transfer_texts"]
    assert metrics["test"]["accuracy"] >= 0.8  # the synthetic task is easy; a broken loss would not learn it
    assert json.loads((run_dir / R.METRICS_FILE).read_text())["distillation"]["teacher"]["kind"] == "run"


def test_export_verify_quantize_and_infer_on_the_student(student, tiny_data, tmp_path, capsys):
    run_dir, metrics = student
    assert main(["export", "--run", str(run_dir)]) == 0
    assert "PASSED" in capsys.readouterr().out
    assert main(["verify-onnx", "--run", str(run_dir)]) == 0
    assert main(["eval", "--run", str(run_dir), "--output", str(tmp_path / "eval.json")]) == 0
    assert json.loads((tmp_path / "eval.json").read_text())["accuracy"] == pytest.approx(metrics["test"]["accuracy"])
    texts = [json.loads(line)["text"] for line in (tiny_data / "test.jsonl").read_text().splitlines()]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["infer", "--model", str(run_dir / "model.onnx"), "--input", str(tmp_path / "in.txt"),
                 "--output", str(out), "--no-progress"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    gold = [json.loads(line)["label"] for line in (tiny_data / "test.jsonl").read_text().splitlines()]
    labels = R.load_run(run_dir).labels
    accuracy = np.mean([labels.index(r["label"]) == g for r, g in zip(rows, gold)])
    assert accuracy == pytest.approx(metrics["test"]["accuracy"])  # the ONNX path predicts as PyTorch did


def test_onnx_teacher_and_teacher_tokenizer_with_pca_embeddings(tmp_path, tiny_data, teacher_onnx, teacher_run):
    from tfm_cls.distill.teacher import open_teacher

    metrics = distill(distill_config(
        tiny_data, teacher_onnx, tmp_path / "run", "student.tokenizer=teacher", "student.embedding_init=teacher_pca",
        "model.d_model=32", "model.dim_feedforward=64", "train.epochs=1",
    ))
    assert metrics["distillation"]["teacher"]["kind"] == "onnx"
    assert metrics["distillation"]["teacher"]["sha256"] == file_sha256(teacher_onnx)
    run = R.load_run(tmp_path / "run")
    assert run.tokenizer.get_vocab() == open_teacher(teacher_run).tokenizer().get_vocab()
    # d_model equals the teacher's width: the PCA is a rotation, so the initial embeddings keep the
    # teacher's pairwise distances up to one scale. Re-build the initial student to check.
    from tfm_cls.distill.recipe import build_student

    cfg = distill_config(tiny_data, teacher_onnx, tmp_path / "x", "student.tokenizer=teacher",
                         "student.embedding_init=teacher_pca", "model.d_model=32", "model.dim_feedforward=64")
    init = build_student(cfg, run.tokenizer, 3, open_teacher(teacher_onnx)).token_embedding.embedding.weight.detach().numpy()
    teacher_emb = open_teacher(teacher_run).token_embeddings()
    keep = np.arange(1, len(init))  # the [PAD] row is zeroed
    d_student = np.linalg.norm(init[keep, None] - init[None, keep], axis=-1)
    d_teacher = np.linalg.norm(teacher_emb[keep, None] - teacher_emb[None, keep], axis=-1)
    ratio = d_student[d_teacher > 0] / d_teacher[d_teacher > 0]
    assert ratio.std() / ratio.mean() < 1e-4


def test_teacher_output_pca_starts_the_student_from_the_teachers_single_token_outputs(tmp_path, tiny_data, teacher_onnx, teacher_run):
    import torch

    from tfm_cls.distill.recipe import build_student
    from tfm_cls.distill.teacher import open_teacher

    teacher = open_teacher(teacher_run)
    outputs = teacher.token_outputs(batch_size=7)  # batches that do not divide the vocabulary
    run = R.load_run(teacher_run)
    assert outputs.shape == (run.model.config["vocab_size"], run.model.config["d_model"])
    # Row v is what the head reads for a text that is token v alone, in the tokenizer's own template.
    words = [w for w in ("cat", "soup", "golf", "very") if run.tokenizer.token_to_id(w) is not None]
    assert words, "the tiny teacher's vocabulary should hold whole words"
    for word in words:
        encoding = run.tokenizer.encode(word)
        with torch.no_grad():
            direct = run.model.features(torch.tensor([encoding.ids]), torch.tensor([encoding.attention_mask]))[0]
        np.testing.assert_allclose(outputs[run.tokenizer.token_to_id(word)], direct.numpy(), atol=1e-5)
    assert not np.allclose(outputs, teacher.token_embeddings(), atol=1e-3)  # outputs, not the input embeddings
    # The ONNX teacher inside its run directory gives the same rows; d_model = the teacher's width
    # keeps the rows' pairwise distances up to one scale (PCA is a rotation).
    np.testing.assert_allclose(open_teacher(teacher_onnx).token_outputs(), outputs, atol=1e-6)
    cfg = distill_config(tiny_data, teacher_onnx, tmp_path / "x", "student.tokenizer=teacher",
                         "student.embedding_init=teacher_output_pca", "model.d_model=32", "model.dim_feedforward=64")
    init = build_student(cfg, run.tokenizer, 3, open_teacher(teacher_onnx)).token_embedding.embedding.weight.detach().numpy()
    keep = np.arange(1, len(init))  # the [PAD] row is zeroed
    d_student = np.linalg.norm(init[keep, None] - init[None, keep], axis=-1)
    d_teacher = np.linalg.norm(outputs[keep, None] - outputs[None, keep], axis=-1)
    ratio = d_student[d_teacher > 0] / d_teacher[d_teacher > 0]
    assert ratio.std() / ratio.mean() < 1e-4


def test_teacher_output_pca_needs_the_teachers_weights(tmp_path, tiny_data, teacher_onnx):
    lone = tmp_path / "lone.onnx"
    shutil.copy(teacher_onnx, lone)  # no run directory around it
    with pytest.raises(TeacherError, match="embedding_init=teacher_output_pca: the ONNX teacher .* outside its run directory"):
        distill(distill_config(tiny_data, lone, tmp_path / "run", "student.tokenizer=teacher",
                               "student.embedding_init=teacher_output_pca", "model.d_model=32", "model.dim_feedforward=64"))
    with pytest.raises(ConfigError, match="teacher_output_pca needs student.tokenizer=teacher"):
        distill_config(tiny_data, lone, tmp_path / "run", "student.embedding_init=teacher_output_pca")


def test_feature_hint_run_caches_the_pooled_vectors_and_trains_the_student(tmp_path, monkeypatch, tiny_data, teacher_run,
                                                                           teacher_onnx):
    from tfm_cls.distill.labelling import _chunk_path
    from tfm_cls.distill.recipe import DistillTask

    seen = {}
    original = DistillTask.loss

    def spy(self, model, batch):  # the hint's targets reach the loss: the PCA of the teacher's pooled vectors
        seen["targets"] = self.feature_targets
        seen["batch"] = batch["teacher_features"].shape
        return original(self, model, batch)

    monkeypatch.setattr(DistillTask, "loss", spy)
    metrics = distill(distill_config(tiny_data, teacher_run, tmp_path / "run", "loss.feature_weight=1.0"))
    chunk = np.load(_chunk_path(tmp_path / "run" / CACHE_DIR, 0))
    assert chunk.shape[1] == 3 + 32  # logits, then the teacher's pooled vector
    assert seen["targets"].shape == (metrics["data"]["train_examples"], 16) and seen["batch"][1] == 16
    assert seen["targets"].std() == pytest.approx(1.0, rel=1e-3)
    assert metrics["test"]["accuracy"] >= 0.8
    # Refused before any work: an ONNX teacher has no pooled output; a student wider than the teacher.
    with pytest.raises(ConfigError, match="feature_weight=1.0 needs the teacher's pooled vectors"):
        distill(distill_config(tiny_data, teacher_onnx, tmp_path / "onnx", "loss.feature_weight=1.0"))
    with pytest.raises(ConfigError, match="d_model=64 exceeds the teacher's width 32"):
        distill(distill_config(tiny_data, teacher_run, tmp_path / "wide", "loss.feature_weight=1.0", "model.d_model=64"))
    assert not (tmp_path / "onnx").exists() and not (tmp_path / "wide").exists()
    with pytest.raises(ConfigError, match="loss.feature_weight: expected >= 0"):
        distill_config(tiny_data, teacher_run, tmp_path / "x", "loss.feature_weight=-1")


def test_teacher_changed_is_refused_on_resume(tmp_path, tiny_data):
    teacher = train_teacher(tiny_data, tmp_path / "teacher")
    distill(distill_config(tiny_data, teacher, tmp_path / "run", "train.epochs=1"))
    from kits.tiny_topics import tiny_config

    from tfm_cls.train import train

    cfg = tiny_config(tiny_data, teacher, "model.d_model=32", "model.dim_feedforward=64", "seed=5")
    train(cfg, overwrite=True)  # retrained in place: other weights
    with pytest.raises(RunDirError, match="teacher.sha256"):
        distill(distill_config(tiny_data, teacher, tmp_path / "run", "train.epochs=1"), resume=True)
    # Pinning the old hash is an error too; a rerun with --overwrite relabels (the cache is discarded).
    old = load_config(DistillConfig, tmp_path / "run" / DISTILL_CONFIG_FILE).teacher.sha256
    with pytest.raises(TeacherError, match="the teacher changed"):
        distill(distill_config(tiny_data, teacher, tmp_path / "run", "train.epochs=1", f"teacher.sha256={old}"))
    metrics = distill(distill_config(tiny_data, teacher, tmp_path / "run", "train.epochs=1"), overwrite=True)
    assert metrics["distillation"]["cached_texts"] == 0 and metrics["distillation"]["labelled_texts"] > 0


def test_a_rerun_reuses_the_cached_teacher_outputs(tmp_path, tiny_data, teacher_run):
    first = distill(distill_config(tiny_data, teacher_run, tmp_path / "run", "train.epochs=1"))
    # A finished run is only retrained with overwrite (tests/integration/reliability); the teacher's outputs,
    # keyed by the teacher's and the transfer set's hashes, survive it.
    second = distill(distill_config(tiny_data, teacher_run, tmp_path / "run", "train.epochs=1"), overwrite=True)
    assert first["distillation"]["labelled_texts"] > 0
    assert second["distillation"]["labelled_texts"] == 0
    assert second["distillation"]["cached_texts"] == first["distillation"]["labelled_texts"]
    for key in ("loss", "accuracy", "macro_f1"):
        assert second["test"][key] == first["test"][key]


# ---- bad input: one clear error, before any work (no run directory written) -----------------------------


def _refused(tmp_path, err_type, match, data, teacher, *extra):
    run_dir = tmp_path / "refused"
    with pytest.raises(err_type, match=match):
        distill(distill_config(data, teacher, run_dir, *extra))
    assert not (run_dir / CACHE_DIR).exists() and not (run_dir / R.WEIGHTS_FILE).exists()


def test_label_names_that_differ_show_both_lists(tmp_path, teacher_run):
    data = write_data(tmp_path / "other")
    (data / "labels.json").write_text(json.dumps(["pets", "meals", "games"]))
    _refused(tmp_path, TeacherError, r"label names \['animals', 'food', 'sports'\] differ from the data's "
             r"\['pets', 'meals', 'games'\]", data, teacher_run)


def test_missing_unreadable_and_foreign_teachers(tmp_path, tiny_data, teacher_run, monkeypatch):
    _refused(tmp_path, TeacherError, "does not exist", tiny_data, tmp_path / "nowhere")
    not_onnx = tmp_path / "model.onnx"
    not_onnx.write_text("not a model")
    _refused(tmp_path, TeacherError, "not a readable ONNX model", tiny_data, not_onnx)
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    foreign = tmp_path / "foreign.onnx"
    onnx.save(helper.make_model(graph), str(foreign))
    _refused(tmp_path, TeacherError, "is not a tfm_cls model", tiny_data, foreign)
    half = tmp_path / "half_run"
    shutil.copytree(teacher_run, half)
    (half / R.WEIGHTS_FILE).unlink()
    _refused(tmp_path, TeacherError, "not a finished classification run", tiny_data, half)
    (half / R.PRETRAIN_CONFIG_FILE).write_text("name: x\n")
    _refused(tmp_path, TeacherError, "pretraining run", tiny_data, half)
    locked = tmp_path / "locked.onnx"
    shutil.copy(not_onnx, locked)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("builtins.open", refuse)
    with pytest.raises(TeacherError, match="cannot read the file"):
        from tfm_cls.distill.teacher import open_teacher

        open_teacher(locked)


def test_rates_outside_unit_interval_fail_at_config_time(tmp_path, tiny_data, teacher_run):
    with pytest.raises(ConfigError, match=r"transfer.mask_rate: expected a rate in \[0, 1\]"):
        distill_config(tiny_data, teacher_run, tmp_path / "r", "transfer.mask_rate=1.2")
    assert main(["distill", "--config", "trec", f"data.path={tiny_data}", "transfer.ngram_rate=-1"]) == 2


def test_student_larger_than_teacher_warns(tmp_path, tiny_data, teacher_run, caplog):
    with caplog.at_level(logging.WARNING, logger="tfm_cls.distill"):
        distill(distill_config(tiny_data, teacher_run, tmp_path / "big", "model.d_model=64", "model.nhead=2",
                               "model.dim_feedforward=128", "train.epochs=1"))
    assert any("is not smaller than the teacher" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tfm_cls.distill"):
        distill(distill_config(tiny_data, teacher_run, tmp_path / "small", "train.epochs=1"))
    assert not any("is not smaller" in r.getMessage() for r in caplog.records)


def test_cli_distill_prints_the_run_and_its_metrics(tmp_path, tiny_data, teacher_run, capsys):
    from kits.distill_tiny import TINY_STUDENT

    args = ["distill", *TINY_STUDENT, f"data.path={tiny_data}", f"teacher.path={teacher_run}",
            f"run_dir={tmp_path / 'cli'}", "train.epochs=1"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["run_dir"] == str(tmp_path / "cli") and 0 <= out["test"]["accuracy"] <= 1
    saved = yaml.safe_load((tmp_path / "cli" / DISTILL_CONFIG_FILE).read_text())
    assert saved["teacher"]["sha256"] == file_sha256(teacher_run / R.WEIGHTS_FILE)


def test_extra_unlabelled_text_joins_the_transfer_set_without_evaluation_texts(tmp_path, tiny_data, teacher_run):
    from tfm_cls.data.sources import load_data
    from tfm_cls.distill.recipe import extra_texts

    test_text = json.loads((tiny_data / "test.jsonl").read_text().splitlines()[0])["text"]
    extra = tmp_path / "extra.txt"
    extra.write_text(f"{test_text}\nsoup and bread with rice\ngolf chess tennis rugby soccer\n")
    cfg = distill_config(tiny_data, teacher_run, tmp_path / "run", f"transfer.extra_text.paths=[{extra}]", "train.epochs=1")
    kept = extra_texts(cfg, load_data(cfg.data))
    assert kept == ["soup and bread with rice", "golf chess tennis rugby soccer"]  # the test text was dropped
    metrics = distill(cfg)
    assert metrics["distillation"]["transfer_set"]["extra_texts"] == 2
    with pytest.raises(Exception, match="hold evaluation"):
        distill(distill_config(tiny_data, teacher_run, tmp_path / "run2", f"transfer.extra_text.paths=[{extra}]",
                               "transfer.extra_text.on_overlap=error"))


@pytest.mark.parametrize("tokenizer", ["own", "teacher"])
def test_auto_lengths_are_measured_on_the_training_texts_and_saved_as_numbers(tmp_path, tiny_data, teacher_run,
                                                                              tokenizer):
    from tfm_cls.data.tokenizer import percentile_length, token_lengths
    from tfm_cls.distill.teacher import open_teacher

    run_dir = tmp_path / "run"
    extra = ("tokenizer.max_length=auto", "model.max_len=auto", "tokenizer.length_percentile=50",
             f"student.tokenizer={tokenizer}", "model.d_model=32", "model.dim_feedforward=64", "train.epochs=1")
    distill(distill_config(tiny_data, teacher_run, run_dir, *extra))
    run = R.load_run(run_dir)
    texts = [json.loads(line)["text"] for line in (tiny_data / "train.jsonl").read_text().splitlines()]
    measuring = open_teacher(teacher_run).tokenizer() if tokenizer == "teacher" else run.tokenizer
    expected = percentile_length(token_lengths(measuring, texts), 50)  # the lower median, [CLS]/[SEP] counted
    assert expected < 16  # the tiny texts' median is shorter than the preset's fixed 16: auto changed something
    assert run.tokenizer.truncation["max_length"] == expected
    assert run.model.config["max_len"] == expected
    saved = yaml.safe_load((run_dir / R.CONFIG_FILE).read_text())
    assert (saved["tokenizer"]["max_length"], saved["model"]["max_len"]) == (expected, expected)
    asked = yaml.safe_load((run_dir / DISTILL_CONFIG_FILE).read_text())
    assert (asked["tokenizer"]["max_length"], asked["model"]["max_len"]) == ("auto", "auto")
    # Resolution is deterministic: a rerun over the finished run measures the same lengths.
    distill(distill_config(tiny_data, teacher_run, run_dir, *extra, "train.epochs=2"), overwrite=True)
    assert R.load_run(run_dir).model.config["max_len"] == expected
