"""An inference actor SIGKILLed mid-job: Ray restarts it and retries its batch, and every input row
is in the output exactly once; an actor that dies on every try fails the command with one clear
error and no output left that could pass for complete."""

from __future__ import annotations

import os
import signal

import pytest
from kits import ray_kit as R
from kits import serve_kit as K

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.ray_predictor import OnnxClassifier


def dying_classifier(calls_dir: str, die_on: set[int]):
    """An OnnxClassifier whose process kills itself (SIGKILL) on the calls numbered in `die_on`,
    counted over every actor and restart by files in `calls_dir`. Defined in a function, so Ray
    ships the class by value (the workers cannot import the tests)."""

    class Dying(OnnxClassifier):
        def __call__(self, batch):
            fd, name = None, None
            for n in range(10_000):  # claim the next call number, atomically across processes
                try:
                    fd = os.open(os.path.join(calls_dir, str(n)), os.O_CREAT | os.O_EXCL)
                    name = n
                    break
                except FileExistsError:
                    continue
            os.close(fd)
            if name in die_on:
                os.kill(os.getpid(), signal.SIGKILL)
            return super().__call__(batch)

    return Dying


def test_a_killed_actor_is_restarted_and_every_row_is_written_once(ray_cluster, models, cwd_tmp):
    # Six files of 20 rows, batches of 10: twelve calls, each writing its part; the fifth call
    # dies, after four parts are written.
    for k in range(6):
        R.write_jsonl(cwd_tmp / f"in-{k}.jsonl", R.text_rows([f"{t} {k}" for t in K.TEXTS[:20]]))
    calls = cwd_tmp / "calls"
    calls.mkdir()
    summary = R.batch(models["single_label"], cwd_tmp / "in-*.jsonl", cwd_tmp / "out", "--buffer-texts", "10",
                      predictor=dying_classifier(str(calls), {4}))
    assert len(list(calls.iterdir())) > 12  # the killed task ran again
    got = R.read_output(cwd_tmp / "out")
    assert summary["rows"] == len(got) == 120 and summary["parts"] == 12
    keys = sorted((r["path"], r["line"]) for r in got)
    assert keys == sorted((f"in-{k}.jsonl", line) for k in range(6) for line in range(1, 21))  # each row once
    expected = K.infer_rows(models["single_label"], [f"{t} 3" for t in K.TEXTS[:20]], None, cwd_tmp)
    assert R.mismatches(expected, [r for r in got if r["path"] == "in-3.jsonl"]) == []


def test_an_actor_that_always_dies_fails_the_run_and_leaves_no_output(ray_cluster, models, cwd_tmp):
    src = R.write_jsonl(cwd_tmp / "in.jsonl", R.text_rows(K.TEXTS))
    calls = cwd_tmp / "calls"
    calls.mkdir()
    # The first batch is written; the second kills its actor on every try (1 restart allowed).
    with pytest.raises(InferenceError, match="actor died and was restarted 1 times without finishing"):
        R.batch(models["single_label"], src, cwd_tmp / "out", "--buffer-texts", "10", "--max-restarts", "1",
                predictor=dying_classifier(str(calls), set(range(1, 100))))
    assert not (cwd_tmp / "out").exists()
