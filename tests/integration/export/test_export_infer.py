"""export/infer.py: the torch-free deployment script, end to end and on bad input."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from kits.export_testkit import LABELS, MAX_LENGTH, TEXTS
from kits.import_guard import guarded_env
from onnx import TensorProto, helper
from tfm_cls.export import infer

INFER = Path(infer.__file__)


def run_main(*argv: str) -> int:
    return infer.main([*argv, "--no-progress"])


def torch_probabilities(model, tokenizer, texts: list[str]) -> np.ndarray:
    """Reference: the PyTorch model on the run tokenizer's own padded batch."""
    tokenizer.enable_truncation(MAX_LENGTH)
    encodings = tokenizer.encode_batch(texts)
    ids = torch.tensor([e.ids for e in encodings])
    mask = torch.tensor([e.attention_mask for e in encodings])
    with torch.no_grad():
        return model(ids, mask).softmax(-1).numpy()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_txt_to_jsonl_matches_torch_with_a_row_per_line(classifier, classifier_onnx, tokenizer, tmp_path, caplog):
    texts = TEXTS[:9]
    lines = [texts[0], "", texts[1], "   ", *texts[2:]]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert run_main("--model", str(classifier_onnx), "--input", str(src), "--output", str(out)) == 0
    all_rows = read_jsonl(out)
    assert [r["id"] for r in all_rows] == [str(i) for i in range(1, 12)]  # one row per line, ids are line numbers
    assert [r["line"] for r in all_rows] == list(range(1, 12))
    assert [r["line"] for r in all_rows if r["empty"]] == [2, 4]
    assert all(r["label"] is None and r["probabilities"] is None for r in all_rows if r["empty"])
    rows = [r for r in all_rows if not r["empty"]]
    want = torch_probabilities(classifier, tokenizer, texts)
    got = np.array([[r["probabilities"][label] for label in LABELS] for r in rows])
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert [r["label"] for r in rows] == [LABELS[i] for i in want.argmax(1)]
    np.testing.assert_allclose([r["score"] for r in rows], want.max(1), atol=1e-4)
    assert "2 empty lines (e.g. lines [2, 4])" in caplog.text


def test_small_chunks_and_batches_give_the_same_rows_in_order(classifier_onnx, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(TEXTS[:23]) + "\n", encoding="utf-8")
    big, small = tmp_path / "big.jsonl", tmp_path / "small.jsonl"
    assert run_main("--model", str(classifier_onnx), "--input", str(src), "--output", str(big)) == 0
    args = ["--batch-size", "2", "--chunk-batches", "2"]
    assert run_main("--model", str(classifier_onnx), "--input", str(src), "--output", str(small), *args) == 0
    a, b = read_jsonl(big), read_jsonl(small)
    assert [r["id"] for r in a] == [r["id"] for r in b] == [str(i) for i in range(1, 24)]
    np.testing.assert_allclose(
        [list(r["probabilities"].values()) for r in a], [list(r["probabilities"].values()) for r in b], atol=1e-5
    )


def test_jsonl_in_csv_out_with_ids(classifier_onnx, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"doc-{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS[:4])))
    out = tmp_path / "out.csv"
    assert run_main("--model", str(classifier_onnx), "--input", str(src), "--output", str(out)) == 0
    with out.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == [f"doc-{i}" for i in range(4)]
    assert list(rows[0]) == ["id", "line", "label", "score", *(f"prob_{x}" for x in LABELS), "truncated", "empty"]
    for r in rows:
        probs = [float(r[f"prob_{x}"]) for x in LABELS]
        assert abs(sum(probs) - 1) < 1e-4 and r["label"] == LABELS[int(np.argmax(probs))]


def test_csv_input_with_text_column(classifier_onnx, tmp_path):
    src = tmp_path / "in.csv"
    with src.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["review", "stars"])
        w.writerows([[TEXTS[0], 5], ['multi\nline, "quoted"', 3], [TEXTS[2], 1]])
    out = tmp_path / "out.jsonl"
    args = ["--model", str(classifier_onnx), "--input", str(src), "--output", str(out), "--text-field", "review"]
    assert run_main(*args) == 0
    assert [r["id"] for r in read_jsonl(out)] == ["1", "2", "3"]
    assert run_main(*args[:-1], "missing") == 2


def test_long_texts_are_truncated_and_counted(classifier_onnx, tmp_path, caplog):
    src = tmp_path / "in.txt"
    src.write_text(" ".join(TEXTS[:5]) + "\nshort text\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert run_main("--model", str(classifier_onnx), "--input", str(src), "--output", str(out)) == 0
    assert [r["truncated"] for r in read_jsonl(out)] == [True, False]
    assert f"truncated 1 texts to {MAX_LENGTH} tokens" in caplog.text


def error_line(capsys) -> str:
    """The one line a failed run writes on stderr (the `tfm-cls` convention)."""
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


def test_invalid_utf8_names_the_line_or_is_replaced(classifier_onnx, tmp_path, caplog, capsys):
    src = tmp_path / "in.txt"
    src.write_bytes(b"fine text\nbad \xff\xfe byte\nmore text\n")
    out = tmp_path / "out.jsonl"
    assert run_main("--model", str(classifier_onnx), "--input", str(src), "--output", str(out)) == 2
    assert f"{src}, line 2: invalid UTF-8 (byte 0xff at byte offset 14 of the file, column 5 of the line)" in error_line(capsys)
    assert list(tmp_path.iterdir()) == [src]  # no half-written output, no temporary file
    caplog.clear()
    assert run_main("--model", str(classifier_onnx), "--input", str(src), "--output", str(out), "--invalid-utf8", "replace") == 0
    assert len(read_jsonl(out)) == 3
    assert "replaced invalid UTF-8 on 1 lines" in caplog.text


def test_missing_and_foreign_model_files(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("hello\n")
    assert run_main("--model", str(tmp_path / "nope.onnx"), "--input", str(src)) == 2
    assert "model file not found" in error_line(capsys)

    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    foreign = tmp_path / "foreign.onnx"
    onnx.save(helper.make_model(graph), str(foreign))
    assert run_main("--model", str(foreign), "--input", str(src)) == 2
    assert "is not a tfm_cls model" in error_line(capsys)

    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a protobuf at all")
    assert run_main("--model", str(garbage), "--input", str(src)) == 2
    assert "is not a readable ONNX model" in error_line(capsys)


def test_bad_jsonl_line_is_named(classifier_onnx, tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "ok"}\n{"txt": "wrong key"}\n')
    assert run_main("--model", str(classifier_onnx), "--input", str(src)) == 2
    assert f"{src}, line 2: expected an object with key 'text', got ['txt']; pass --text-field" in error_line(capsys)


def test_guard_really_blocks(tmp_path):
    env = guarded_env(tmp_path, "torch,tfm_cls")
    for module in ("torch", "tfm_cls.export.infer"):
        proc = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, text=True)
        assert proc.returncode != 0 and "is blocked in this test" in proc.stderr
    assert (tmp_path / "blocked_imports.log").read_text().split() == ["torch", "tfm_cls"]


def test_infer_runs_where_torch_cannot_be_imported(classifier_onnx, tmp_path):
    """export/infer.py over the runtime package (tfm_cls.runtime), in a process where importing
    torch fails: it needs only onnxruntime, tokenizers and numpy."""
    env = guarded_env(tmp_path, "torch")
    proc = subprocess.run(
        [sys.executable, str(INFER), "--model", str(classifier_onnx), "--no-progress"],
        input="\n".join(TEXTS[:5]) + "\n",
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 5  # stdin -> stdout, one JSON row per text
    log = tmp_path / "blocked_imports.log"
    assert not log.exists(), f"blocked import attempted: {log.read_text()}"


def test_quantize_code_path_is_torch_free_too(tmp_path):
    env = guarded_env(tmp_path, "torch")
    code = ("import tfm_cls.export, tfm_cls.export.quantize, tfm_cls.export.infer, tfm_cls.export.greedy_decode, "
            "tfm_cls.export.spec, tfm_cls.runtime.session, tfm_cls.runtime.heads, tfm_cls.runtime.metadata, "
            "tfm_cls.runtime.readers, tfm_cls.runtime.writers, tfm_cls.runtime.text, tfm_cls.runtime.batching")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "blocked_imports.log").exists()


@pytest.mark.parametrize("bad", [["--batch-size", "0"], ["--max-length", "999"]])
def test_bad_arguments(classifier_onnx, tmp_path, bad, capsys):
    src = tmp_path / "in.txt"
    src.write_text("hello\n")
    assert run_main("--model", str(classifier_onnx), "--input", str(src), *bad) == 2
    assert bad[0] in error_line(capsys)
