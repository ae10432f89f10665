"""Students cut from a tiny 3-layer teacher: every layer kept gives the teacher's logits exactly;
a cut student distils, and export / verify-onnx / quantize / infer work on it; a layer list the
teacher cannot give is refused before any work."""

import json
import shutil

import numpy as np
import pytest
import torch
from kits.distill_tiny import distill_config, train_teacher

from tfm_cls import runs as R
from tfm_cls.cli import main
from tfm_cls.data.tokenizer import load_tokenizer
from tfm_cls.distill import distill
from tfm_cls.distill.recipe import build_student, checked_teacher
from tfm_cls.errors import ConfigError, TeacherError

CUT = ["student.tokenizer=teacher"]


@pytest.fixture(scope="module")
def deep_teacher(tmp_path_factory, tiny_data):
    """A 3-layer tiny teacher run, exported to ONNX inside its run directory."""
    from tfm_cls.export.exporter import export_run

    run = train_teacher(tiny_data, tmp_path_factory.mktemp("deep_teacher") / "run", "model.num_layers=3")
    export_run(run)
    return run


def _student(cfg):
    teacher, cfg = checked_teacher(cfg)
    return build_student(cfg, load_tokenizer(teacher.path / R.TOKENIZER_FILE), 3, teacher).eval(), cfg


def test_keeping_every_layer_gives_the_teachers_logits(tmp_path, tiny_data, deep_teacher):
    run = R.load_run(deep_teacher)
    ids = torch.tensor([run.tokenizer.encode("the cat and some soup very golf").ids] * 2)  # [2, T]
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 4:] = False
    for spec in ("[0,1,2]", "first:3", "spread:3"):
        student, cfg = _student(distill_config(tiny_data, deep_teacher, tmp_path / "x", *CUT, f"student.layers={spec}"))
        with torch.no_grad():
            assert torch.equal(student(ids, mask), run.model(ids, mask)), spec
        assert cfg.model.num_layers == 3 and cfg.model.d_model == 32  # the teacher's width, not the preset's 16
    student, cfg = _student(distill_config(tiny_data, deep_teacher, tmp_path / "x", *CUT, "student.layers=every_other"))
    assert cfg.model.num_layers == 2
    with torch.no_grad():
        assert not torch.equal(student(ids, mask), run.model(ids, mask))


def test_a_cut_student_distils_and_exports_quantizes_and_infers(tmp_path, tiny_data, deep_teacher, capsys):
    run_dir = tmp_path / "cut"
    # labels from the teacher's ONNX file; the weights come from the run directory it lies in
    metrics = distill(distill_config(tiny_data, deep_teacher / "model.onnx", run_dir, *CUT, "student.layers=[0,2]",
                                     "train.epochs=1", "train.lr=1e-3"))
    assert metrics["distillation"]["student_layers"] == [0, 2]
    assert metrics["distillation"]["teacher"]["kind"] == "onnx"
    run = R.load_run(run_dir)
    assert run.model.config["num_layers"] == 2 and run.model.config["d_model"] == 32
    assert run.config.model.num_layers == 2  # config.yaml says what the student is
    assert metrics["test"]["accuracy"] >= 0.8
    assert main(["export", "--run", str(run_dir)]) == 0
    assert "PASSED" in capsys.readouterr().out
    assert main(["verify-onnx", "--run", str(run_dir)]) == 0
    assert main(["quantize", "--run", str(run_dir), "--data", str(tiny_data / "test.jsonl"), "--threshold", "100"]) == 0
    texts = [json.loads(line)["text"] for line in (tiny_data / "test.jsonl").read_text().splitlines()]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    for model in ("model.onnx", "model.int8.onnx"):
        out = tmp_path / f"{model}.jsonl"
        assert main(["infer", "--model", str(run_dir / model), "--input", str(tmp_path / "in.txt"),
                     "--output", str(out), "--no-progress"]) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == len(texts)
    gold = [json.loads(line)["label"] for line in (tiny_data / "test.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (tmp_path / "model.onnx.jsonl").read_text().splitlines()]
    accuracy = np.mean([run.labels.index(r["label"]) == g for r, g in zip(rows, gold)])
    assert accuracy == pytest.approx(metrics["test"]["accuracy"])  # the ONNX path predicts as PyTorch did


def test_a_layer_list_the_teacher_cannot_give_fails_before_any_work(tmp_path, tiny_data, deep_teacher, capsys):
    run_dir = tmp_path / "never"
    with pytest.raises(ConfigError, match=r"layer\(s\) \[3\] out of range; the teacher has 3 layers"):
        distill(distill_config(tiny_data, deep_teacher, run_dir, *CUT, "student.layers=[0,3]"))
    assert not run_dir.exists()
    argv = ["distill", f"data.path={tiny_data}", f"teacher.path={deep_teacher}", f"run_dir={run_dir}",
            "student.tokenizer=teacher", "student.embedding_init=random", "student.layers=first:4"]
    assert main(argv) == 2
    assert "asks for 4 layers; the teacher has 3" in capsys.readouterr().err
    assert not run_dir.exists()
    with pytest.raises(ConfigError, match="tokenizer.max_length=64 exceeds the teacher's 32 positions"):
        distill(distill_config(tiny_data, deep_teacher, run_dir, *CUT, "student.layers=first:2", "tokenizer.max_length=64",
                               "model.max_len=64"))
    alone = tmp_path / "alone.onnx"  # an ONNX file outside its run directory carries no weights to cut
    shutil.copy(deep_teacher / "model.onnx", alone)
    with pytest.raises(TeacherError, match="student.layers=first:2: the ONNX teacher .* outside its run directory"):
        distill(distill_config(tiny_data, alone, run_dir, *CUT, "student.layers=first:2"))
    assert not run_dir.exists()


def test_compress_cuts_a_run_in_one_command(deep_teacher, capsys):
    from tfm_cls.config import load_config
    from tfm_cls.distill import DistillConfig
    from tfm_cls.distill.recipe import DISTILL_CONFIG_FILE

    argv = ["compress", "--run", str(deep_teacher), "--layers", "2", "train.epochs=1", "transfer.copies=2",
            "train.progress=false", "train.num_threads=1", "train.batch_size=16"]
    assert main(argv) == 0
    student = deep_teacher.parent / f"{deep_teacher.name}-cut2"  # beside the teacher: the first 2 layers
    saved = load_config(DistillConfig, student / DISTILL_CONFIG_FILE)
    taught = R.load_run(deep_teacher).config
    assert saved.data == taught.data and saved.seed == taught.seed  # the teacher's data and validation carve
    assert saved.student.layers == "first:2" and saved.teacher.path == str(deep_teacher)  # no int8 file there
    metrics = json.loads((student / R.METRICS_FILE).read_text())
    assert metrics["distillation"]["student_layers"] == [0, 1]
    assert main(["compress", "--run", str(deep_teacher), "--layers", "0,3"]) == 2
    assert "out of range; the teacher has 3 layers" in capsys.readouterr().err
