"""Cases 3, 6, 9 and 10 on inference: both paths (`tfm-cls predict`, export/infer.py) read lines
the same way, give one row per input line in input order with equal labels, and fail on bad
input with one line naming the file."""

from __future__ import annotations

import random

import onnx
import pytest
from kits.reliability_kit import error_line, read_jsonl, stderr_of
from tfm_cls.export import infer

from tfm_cls import cli

WORDS = ["cat", "dog", "bread", "soup", "golf", "tennis", "the", "a", "café", "日本語", "ünïcödé", "ß"]


def random_lines(rng: random.Random) -> bytes:
    """A random mix of empty, blank, long, non-ASCII and invalid-UTF-8 lines, with "\\n" and
    "\\r\\n" endings, Unicode line breaks (U+2028, U+0085, form feed) inside lines, and sometimes
    no final newline."""
    out = []
    for _ in range(rng.randint(1, 25)):
        kind = rng.choice(["empty", "blank", "short", "long", "unicode-break", "invalid"])
        if kind == "empty":
            line = b""
        elif kind == "blank":
            line = rng.choice([b" ", b"\t", b"   \t "])
        elif kind == "short":
            line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))).encode()
        elif kind == "long":
            line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 80))).encode()
        elif kind == "unicode-break":
            sep = rng.choice(["\u2028", "\u0085", "\x0c", "\x0b", "\u2029"])
            line = f"{rng.choice(WORDS)}{sep}{rng.choice(WORDS)}".encode()
        else:
            line = rng.choice(WORDS).encode() + rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80"]) + b" dog"
        out.append(line + rng.choice([b"\n", b"\n", b"\r\n"]))
    data = b"".join(out)
    return data.rstrip(b"\n") if rng.random() < 0.3 else data


def expected_lines(data: bytes) -> int:
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def compare(torch_rows: list[dict], onnx_rows: list[dict], n_lines: int) -> None:
    assert len(torch_rows) == len(onnx_rows) == n_lines
    assert [r["line"] for r in torch_rows] == [r["line"] for r in onnx_rows] == list(range(1, n_lines + 1))
    for t, o in zip(torch_rows, onnx_rows):
        assert (t["label"], t["empty"], t["truncated"]) == (o["label"], o["empty"], o["truncated"]), (t, o)
        if not t["empty"]:
            assert max(abs(t["probabilities"][k] - o["probabilities"][k]) for k in t["probabilities"]) < 1e-4


def test_property_predict_and_infer_agree_row_for_row(trained, tmp_path):
    """40 seeded random inputs through both command lines' main() in this process (the code the
    console scripts run; two more go through real subprocesses below)."""
    rng = random.Random(1234)
    for case in range(40):
        data = random_lines(rng)
        source = tmp_path / f"in{case}.txt"
        source.write_bytes(data)
        a, b = tmp_path / f"torch{case}.jsonl", tmp_path / f"onnx{case}.jsonl"
        assert cli.main(["predict", "--run", str(trained), "--input", str(source), "--output", str(a),
                         "--invalid-utf8", "replace"]) == 0
        assert infer.main(["--model", str(trained / "model.onnx"), "--input", str(source), "--output", str(b),
                           "--invalid-utf8", "replace", "--no-progress"]) == 0
        rows = read_jsonl(a)
        compare(rows, read_jsonl(b), expected_lines(data))
        for row, line in zip(rows, data.split(b"\n")):
            assert row["empty"] == (not line.decode("utf-8", "replace").strip())


@pytest.mark.parametrize("seed", [7, 8])
def test_property_through_subprocesses(run, runner, tmp_path, seed):
    data = b"".join(random_lines(random.Random(seed * 100 + i)) + b"\n" for i in range(3))
    source = tmp_path / "in.txt"
    source.write_bytes(data)
    a = runner.cli("predict", "--run", run, "--input", source, "--invalid-utf8", "replace")
    b = runner.infer("--model", run / "model.onnx", "--input", source, "--invalid-utf8", "replace")
    assert a.returncode == b.returncode == 0, stderr_of(a) + stderr_of(b)
    compare(read_jsonl(a.stdout), read_jsonl(b.stdout), expected_lines(data))
    assert "replaced invalid UTF-8" in stderr_of(a) or b"\xff" not in data


def test_issue_example_empty_blank_and_unicode_line_breaks(run, runner, tmp_path):
    data = "cat dog\n\n   \nbread\u0085soup\ngolf\u2028tennis\r\nlast".encode()
    source = tmp_path / "in.txt"
    source.write_bytes(data)
    a = runner.cli("predict", "--run", run, "--input", source)
    b = runner.infer("--model", run / "model.onnx", "--input", source)
    rows = read_jsonl(a.stdout)
    compare(rows, read_jsonl(b.stdout), 6)
    assert [r["empty"] for r in rows] == [False, True, True, False, False, False]
    assert rows[1]["label"] is None and rows[1]["probabilities"] is None


@pytest.mark.parametrize("path", ["predict", "infer", "predict-stdin", "infer-stdin"])
def test_invalid_utf8_names_file_line_and_byte_offset(run, runner, tmp_path, path):
    source = tmp_path / "in.txt"
    source.write_bytes(b"cat dog\nsoup\nbad \xff byte\n")
    stdin = source.read_bytes() if path.endswith("stdin") else None
    where = ["--input", "-" if stdin else source]
    proc = (runner.cli("predict", "--run", run, *where, stdin=stdin) if path.startswith("predict")
            else runner.infer("--model", run / "model.onnx", *where, stdin=stdin))
    assert proc.returncode == 2
    line = error_line(proc)
    assert ("<stdin>" if stdin else str(source)) in line
    assert "line 3: invalid UTF-8 (byte 0xff at byte offset 17" in line and "--invalid-utf8 replace" in line
    assert proc.stdout == b""


def test_dev_null_is_an_empty_input(run, runner):
    a = runner.cli("predict", "--run", run, "--input", "/dev/null")
    b = runner.infer("--model", run / "model.onnx", "--input", "/dev/null", "--input-format", "txt")
    assert a.returncode == b.returncode == 0, stderr_of(a) + stderr_of(b)
    assert a.stdout == b.stdout == b""


def test_infer_max_length_below_the_special_tokens_is_refused(run, runner):
    proc = runner.infer("--model", run / "model.onnx", "--max-length", "1", stdin=b"cat\n")
    assert proc.returncode == 2
    assert "--max-length must be in [3, 16]" in error_line(proc)
    proc = runner.infer("--model", run / "model.onnx", "--max-length", "3", stdin=b"cat dog bread\n")
    assert proc.returncode == 0 and read_jsonl(proc.stdout)[0]["truncated"] is True


def test_marker_without_labels_metadata(run, runner, tmp_path):
    model = onnx.load(str(run / "model.onnx"))
    props = [p for p in model.metadata_props if p.key != "tfm_cls.labels"]
    del model.metadata_props[:]
    model.metadata_props.extend(props)
    bad = tmp_path / "nolabels.onnx"
    onnx.save(model, str(bad))
    proc = runner.infer("--model", bad, stdin=b"cat\n")
    assert proc.returncode == 2
    assert "lacks the metadata ['tfm_cls.labels']" in error_line(proc) and str(bad) in error_line(proc)


def test_predict_batch_size_0_and_corrupt_tokenizer(run, runner):
    proc = runner.cli("predict", "--run", run, "--batch-size", "0", stdin=b"cat\n")
    assert proc.returncode == 2 and "expected a positive integer, got 0" in error_line(proc)
    (run / "tokenizer.json").write_text('{"version": "1.0", "trunc', encoding="utf-8")
    proc = runner.cli("predict", "--run", run, stdin=b"cat\n")
    assert proc.returncode == 2
    assert "tokenizer.json: not a valid tokenizers JSON file" in error_line(proc)
    proc = runner.cli("export", "--run", run)
    assert proc.returncode == 2 and "tokenizer.json: not a valid tokenizers JSON file" in error_line(proc)


@pytest.mark.parametrize("path", ["predict", "infer"])
def test_output_to_a_full_disk_leaves_no_partial_file(run, runner, small_disk, tmp_path, path):
    disk = small_disk(16)
    source = tmp_path / "in.txt"
    source.write_text("cat dog bread soup golf tennis\n" * 400, encoding="utf-8")  # ~80 KB of rows
    out = disk / "predictions.jsonl"
    proc = (runner.cli("predict", "--run", run, "--input", source, "--output", out) if path == "predict"
            else runner.infer("--model", run / "model.onnx", "--input", source, "--output", out))
    assert proc.returncode == 2, stderr_of(proc)
    assert "no space left on device" in error_line(proc) and str(out) in error_line(proc)
    assert list(disk.iterdir()) == []
