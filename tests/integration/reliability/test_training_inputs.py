"""Cases 4-10 on training: labels, finished runs, invalid UTF-8, non-finite loss, one class, the
run directory, disk full, the log file, overrides — each through `tfm-cls` in a subprocess."""

from __future__ import annotations

import json

import pytest
from kits.reliability_kit import TINY, error_line, hashes, make_data, read_jsonl, stderr_of

from tfm_cls.errors import CorpusError
from tfm_cls.io import write_json
from tfm_cls.pretrain.corpus import read_text_file


def train_args(data, run_dir, *extra):
    return ["train", *TINY, f"data.path={data}", f"run_dir={run_dir}", *extra]


def test_mixed_int_and_string_labels_are_refused_and_logged(runner, tmp_path):
    data = make_data(tmp_path / "data", labels=lambda i, c: c if i % 2 else ["animals", "food", "sports"][c])
    proc = runner.cli(*train_args(data, tmp_path / "r"))
    assert proc.returncode == 2
    line = error_line(proc)
    assert "labels mix integers (" in line and "0 (train)" in line and "'animals' (train)" in line
    assert "labels.json" in line
    # the failed start's train.log holds the error; nothing else was written
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["train.log"]
    assert "labels mix integers" in (tmp_path / "r" / "train.log").read_text()


def test_a_single_class_is_refused(runner, tmp_path):
    data = make_data(tmp_path / "data", labels=lambda i, c: "only")
    proc = runner.cli(*train_args(data, tmp_path / "r"))
    assert proc.returncode == 2
    assert "only 1 class (['only'])" in error_line(proc) and "at least two classes" in error_line(proc)


def test_rerunning_a_finished_run_deletes_nothing(run, runner, data):
    before = hashes(run)
    proc = runner.cli(*train_args(data, run))
    assert proc.returncode == 2
    assert "holds a finished run of this config" in error_line(proc) and "--overwrite" in error_line(proc)
    assert hashes(run) == before


def test_invalid_utf8_in_training_eval_and_quantize_data(run, runner, data, tmp_path):
    bad = make_data(tmp_path / "bad")
    raw = (bad / "train.jsonl").read_bytes().split(b"\n")
    raw[4] = raw[4].replace(b'"text": "', b'"text": "\xe9t\xe9 ')
    (bad / "train.jsonl").write_bytes(b"\n".join(raw))
    offset = len(b"\n".join(raw[:4])) + 1 + raw[4].index(b"\xe9")
    proc = runner.cli(*train_args(bad, tmp_path / "r"))
    assert proc.returncode == 2
    assert f"train.jsonl, line 5: invalid UTF-8 (byte 0xe9 at byte offset {offset}" in error_line(proc)

    before = hashes(run)
    proc = runner.cli("eval", "--run", run, "--data", bad / "train.jsonl")
    assert proc.returncode == 2 and "line 5: invalid UTF-8" in error_line(proc)
    proc = runner.cli("quantize", "--run", run, "--data", bad / "train.jsonl")
    assert proc.returncode == 2 and "line 5: invalid UTF-8" in error_line(proc)
    assert hashes(run) == before


def test_pretraining_text_files_use_the_same_reader(tmp_path):
    path = tmp_path / "extra.txt"
    data = "one\r\ntwo\u0085three\n\nfour ".encode() + b"\xff\n"
    path.write_bytes(data)
    offset = data.index(b"\xff")
    with pytest.raises(CorpusError, match=rf"extra.txt, line 4: invalid UTF-8 \(byte 0xff at byte offset {offset} "):
        read_text_file(path)
    path.write_bytes("one\r\ntwo\u0085three\n\n".encode())
    assert read_text_file(path) == ["one", "two\u0085three"]  # U+0085 is not a line break


def test_non_finite_loss_stops_with_an_error_and_writes_no_json(runner, data, tmp_path):
    run_dir = tmp_path / "r"
    proc = runner.cli(*train_args(data, run_dir, "train.lr=.inf", "train.checkpoint_every=1"))
    assert proc.returncode == 2
    line = error_line(proc)
    assert "training diverged at step" in line and "Lower train.lr" in line
    names = {p.name for p in run_dir.iterdir()}
    assert not names & {"metrics.json", "history.json", "model.safetensors", "last.ckpt"}
    for p in run_dir.glob("*.json"):
        json.loads(p.read_text(), parse_constant=lambda c, p=p: pytest.fail(f"{p} holds {c}"))
    with pytest.raises(ValueError):
        write_json(tmp_path / "x.json", {"loss": float("nan")})
    assert not (tmp_path / "x.json").exists()


def test_run_dir_pointing_at_a_file(runner, data, tmp_path):
    target = tmp_path / "afile"
    target.write_text("keep me")
    proc = runner.cli(*train_args(data, target))
    assert proc.returncode == 2 and "is a file, not a folder" in error_line(proc)
    assert target.read_text() == "keep me"


def test_an_override_error_blames_the_command_line(runner, tmp_path):
    proc = runner.cli("train", "--config", "trec", "model.d_model=abc", f"run_dir={tmp_path / 'r'}")
    assert proc.returncode == 2
    line = error_line(proc)
    assert line.startswith("error: command line model.d_model=abc:") and "trec.yaml" not in line


def test_disk_full_during_training(runner, data, small_disk):
    disk = small_disk(64)  # the run's small files fit, last.ckpt (~90 KB) does not
    proc = runner.cli(*train_args(data, disk / "run"))
    assert proc.returncode == 2, stderr_of(proc)
    line = error_line(proc)
    assert "no space left on device writing" in line and str(disk / "run") in line
    assert not [p for p in (disk / "run").iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_training_log_lines_without_a_terminal(trained, run, runner):
    """stderr redirected (as here): plain log lines, no tqdm carriage returns; predict still works."""
    stderr = (trained.parent / "train.stderr").read_bytes()
    assert b"\r" not in stderr and b"step 2 classification loss" in stderr
    assert "step 2 classification loss" in (run / "train.log").read_text()
    proc = runner.cli("predict", "--run", run, stdin=b"cat dog\n")
    assert proc.returncode == 0 and read_jsonl(proc.stdout)[0]["line"] == 1
    assert b"\r" not in proc.stderr
