"""Teacher outputs: cached in chunks, reused on resume (the teacher is not called again), resumed
after an interruption, rejected when the teacher changed; both teacher kinds agree."""

import numpy as np
import pytest
from kits.distill_tiny import random_texts

from tfm_cls.distill.labelling import CACHE_DIR, teacher_outputs
from tfm_cls.distill.teacher import open_teacher
from tfm_cls.errors import TeacherError

TEXTS = random_texts(300, 0)


class Counting:
    """A real teacher whose calls are counted; it fails on call number `fail_at` (an interruption)."""

    def __init__(self, teacher, fail_at=None, sha256=None):
        self.inner, self.fail_at, self.calls, self.texts = teacher, fail_at, 0, 0
        self.path, self.kind, self.head, self.labels = teacher.path, teacher.kind, teacher.head, teacher.labels
        self.sha256 = sha256 or teacher.sha256

    def logits(self, texts, batch_size, pairs=None):
        self.calls += 1
        if self.calls == self.fail_at:
            raise KeyboardInterrupt("killed")
        self.texts += len(texts)
        return self.inner.logits(texts, batch_size, pairs)


def _label(teacher, run_dir, resume=False, sha="t" * 64):
    return teacher_outputs(teacher, TEXTS, sha, run_dir, chunk_size=64, batch_size=16, resume=resume, progress=False)


def test_cached_outputs_are_reused_and_an_interrupted_labelling_resumes(tmp_path, teacher_run):
    fresh = Counting(open_teacher(teacher_run))
    reference, report = _label(fresh, tmp_path / "a")
    assert fresh.calls == 5 and fresh.texts == 300 and report["labelled_texts"] == 300
    assert reference.shape == (300, 3) and len(list((tmp_path / "a" / CACHE_DIR).glob("chunk-*.npy"))) == 5

    again = Counting(open_teacher(teacher_run))
    cached, report = _label(again, tmp_path / "a", resume=True)
    assert again.calls == 0 and report["cached_texts"] == 300 and np.array_equal(cached, reference)

    interrupted = Counting(open_teacher(teacher_run), fail_at=3)
    with pytest.raises(KeyboardInterrupt):
        _label(interrupted, tmp_path / "b")
    assert len(list((tmp_path / "b" / CACHE_DIR).glob("chunk-*.npy"))) == 2
    resumed = Counting(open_teacher(teacher_run))
    outputs, report = _label(resumed, tmp_path / "b", resume=True)
    assert resumed.calls == 3 and resumed.texts == 300 - 128 and report["cached_texts"] == 128
    assert np.array_equal(outputs, reference)


def test_cache_of_another_teacher_is_rejected_on_resume_and_discarded_otherwise(tmp_path, teacher_run):
    _label(Counting(open_teacher(teacher_run)), tmp_path)
    changed = Counting(open_teacher(teacher_run), sha256="0" * 64)
    with pytest.raises(TeacherError, match="made by another teacher"):
        _label(changed, tmp_path, resume=True)
    assert changed.calls == 0
    _, report = _label(changed, tmp_path)  # a fresh run relabels
    assert changed.calls == 5 and report["labelled_texts"] == 300
    other_texts = Counting(open_teacher(teacher_run), sha256="0" * 64)
    with pytest.raises(TeacherError, match="transfer_sha256"):
        _label(other_texts, tmp_path, resume=True, sha="u" * 64)


def test_onnx_teacher_gives_the_run_teachers_logits(teacher_run, teacher_onnx):
    a = open_teacher(teacher_run).logits(TEXTS[:50], 8)
    b = open_teacher(teacher_onnx).logits(TEXTS[:50], 16)
    np.testing.assert_allclose(a, b, atol=1e-4)
    assert open_teacher(teacher_onnx).labels == open_teacher(teacher_run).labels


def test_features_follow_the_logits_and_a_cache_without_them_is_not_reused(tmp_path, teacher_run, teacher_onnx):
    import torch

    from tfm_cls import runs as R

    teacher = open_teacher(teacher_run)
    both, report = teacher_outputs(teacher, TEXTS, "t" * 64, tmp_path, chunk_size=64, batch_size=16, resume=False,
                                   progress=False, features=True)
    assert both.shape == (300, 3 + teacher.feature_width()) and teacher.feature_width() == 32
    np.testing.assert_allclose(both[:, :3], teacher.logits(TEXTS, 16), atol=1e-5)
    run = R.load_run(teacher_run)
    for row in (0, 7, 299):
        with torch.no_grad():
            direct = run.model.features(torch.tensor([run.tokenizer.encode(TEXTS[row]).ids]))[0].numpy()
        np.testing.assert_allclose(both[row, 3:], direct, atol=1e-5)
    with pytest.raises(TeacherError, match="outputs: 35 -> 3"):  # logits only now: the cache would not fit
        _label(Counting(teacher), tmp_path, resume=True)
    with pytest.raises(TeacherError, match="outputs no pooled vector"):
        teacher_outputs(open_teacher(teacher_onnx), TEXTS, "t" * 64, tmp_path / "onnx", chunk_size=64, batch_size=16,
                        resume=False, progress=False, features=True)
