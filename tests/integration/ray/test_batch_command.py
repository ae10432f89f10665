"""`tfm-cls batch` on the session's local Ray (2 CPUs): the rows `tfm-cls infer` writes, for every
model kind; ids; empty input; null and non-string texts; bad input refused before any cluster
work, with no output left; the output folder's manifest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kits import ray_kit as R
from kits import serve_kit as K

from tfm_cls.errors import InferenceError


@pytest.mark.parametrize("kind", ["single_label", "multi_label", "pair", "chunked"])
def test_batch_rows_equal_infer_rows(ray_cluster, models, kind, cwd_tmp):
    pairs = K.PAIRS if kind == "pair" else None
    rows = R.text_rows(K.TEXTS, pairs)
    rows[3]["text"] = "   "  # a blank text: an empty row in both
    src = R.write_jsonl(cwd_tmp / "in.jsonl", rows)
    expected = K.infer_rows(models[kind], [r["text"] for r in rows], pairs, cwd_tmp)
    # Small Ray batches: three calls of the actor, three parts, each call batched inside as infer
    # batches its buffer.
    summary = R.batch(models[kind], src, cwd_tmp / "out", "--buffer-texts", "16")
    got = R.read_output(cwd_tmp / "out")
    assert summary["rows"] == len(rows) == len(got) and summary["parts"] == 3
    assert R.mismatches(expected, got) == []
    assert {r["path"] for r in got} == {"in.jsonl"}
    assert got[0].keys() >= expected[0].keys()
    if kind == "chunked":
        assert max(r["windows"] for r in got) > 1  # long texts really were windowed
    if kind == "multi_label":
        assert any(len(r["labels"]) > 1 for r in got if not r["empty"])


def test_ids_and_order_keys_survive_a_folder_of_parquet(ray_cluster, models, cwd_tmp):
    """A folder of two Parquet files, one with an id column, one without: ids kept, (path, line)
    unique, nulls and blanks empty rows, JSONL output."""
    folder = cwd_tmp / "data"
    folder.mkdir()
    texts = K.TEXTS[:20]
    R.write_parquet(folder / "a.parquet", {"id": [f"doc-{i}" for i in range(20)], "text": texts})
    with_nulls = [None if i % 5 == 0 else t for i, t in enumerate(K.TEXTS[20:30])]
    R.write_parquet(folder / "b.parquet", {"text": with_nulls, "other": list(range(10))})
    (folder / "_SUCCESS").write_text("")  # a marker another engine left: not an input
    R.batch(models["single_label"], folder, cwd_tmp / "out", "--output-format", "jsonl", "--buffer-texts", "7")
    got = R.read_output(cwd_tmp / "out")
    assert len(got) == 30
    a = sorted((r for r in got if r["path"] == "a.parquet"), key=lambda r: r["line"])
    b = sorted((r for r in got if r["path"] == "b.parquet"), key=lambda r: r["line"])
    assert [r["id"] for r in a] == [f"doc-{i}" for i in range(20)] and [r["line"] for r in a] == list(range(1, 21))
    assert [r["id"] for r in b] == [str(i) for i in range(1, 11)]
    assert [r["empty"] for r in b] == [t is None for t in with_nulls]
    assert all(r["label"] is None and r["probabilities"] is None for r in b if r["empty"])
    # the non-null ones are what infer says of the same texts
    expected = K.infer_rows(models["single_label"], texts, None, cwd_tmp)
    assert R.mismatches([{**e, "id": f"doc-{int(e['id']) - 1}"} for e in expected], a) == []


def test_empty_input_gives_an_empty_complete_output(ray_cluster, models, cwd_tmp):
    src = R.write_jsonl(cwd_tmp / "empty.jsonl", [])
    summary = R.batch(models["single_label"], src, cwd_tmp / "out")
    manifest = json.loads((cwd_tmp / "out" / "_manifest.json").read_text())
    assert summary["rows"] == 0 and manifest["rows"] == 0 and manifest["parts"] == []
    assert manifest["inputs"] == [{"path": "empty.jsonl", "rows": 0}]
    assert R.read_output(cwd_tmp / "out") == []


def test_the_manifest_lists_every_part_and_its_rows(ray_cluster, models, cwd_tmp):
    for k in range(4):  # four files of 10 rows, batches of 5: eight parts
        R.write_jsonl(cwd_tmp / f"in-{k}.jsonl", R.text_rows(K.TEXTS[k * 10:(k + 1) * 10]))
    src = cwd_tmp / "in-*.jsonl"
    R.batch(models["single_label"], src, cwd_tmp / "out", "--buffer-texts", "5", "--keep-text")
    manifest = json.loads((cwd_tmp / "out" / "_manifest.json").read_text())
    parts = sorted(p.name for p in (cwd_tmp / "out").glob("part-*"))
    assert [p["file"] for p in manifest["parts"]] == parts and len(parts) == 8
    assert [i["path"] for i in manifest["inputs"]] == [f"in-{k}.jsonl" for k in range(4)]
    assert sum(p["rows"] for p in manifest["parts"]) == manifest["rows"] == len(K.TEXTS)
    got = R.read_output(cwd_tmp / "out")
    assert list(got[0]) == manifest["columns"]
    assert sorted(r["text"] for r in got) == sorted(K.TEXTS)
    # a second run into the same folder needs --overwrite, and then replaces it
    with pytest.raises(InferenceError, match="not empty; pass --overwrite"):
        R.batch(models["single_label"], src, cwd_tmp / "out")
    R.batch(models["single_label"], src, cwd_tmp / "out", "--overwrite")
    assert len(R.read_output(cwd_tmp / "out")) == len(K.TEXTS)


@pytest.mark.parametrize("case", ["non_string", "missing_column", "parquet_ints", "pair_missing", "not_ours"])
def test_bad_input_fails_before_inference_and_leaves_no_output(ray_cluster, models, cwd_tmp, case):
    model = models["pair" if case == "pair_missing" else "single_label"]
    rows = R.text_rows(K.TEXTS[:10], K.PAIRS[:10] if case == "pair_missing" else None)
    if case == "non_string":
        rows[6]["text"] = 42
    elif case == "missing_column":
        rows[2] = {"body": "no text here"}
    elif case == "pair_missing":
        rows[4]["text_pair"] = None
    src = R.write_jsonl(cwd_tmp / "in.jsonl", rows)
    if case == "parquet_ints":
        src = R.write_parquet(cwd_tmp / "in.parquet", {"text": list(range(5))})
    if case == "not_ours":
        model = cwd_tmp / "model.onnx"
        model.write_bytes(b"not an onnx file")
    expected = {"non_string": "in.jsonl, line 7: key 'text' holds int, expected a string",
                "missing_column": "in.jsonl, line 3: expected an object with key 'text'",
                "parquet_ints": "in.parquet: column 'text' holds int64, expected strings",
                "pair_missing": "in.jsonl, line 5: the pair's second text 'text_pair' is missing or empty",
                "not_ours": "is not a readable ONNX model"}[case]
    with pytest.raises(InferenceError, match=expected) as failure:
        R.batch(model, src, cwd_tmp / "out")
    assert "\n" not in str(failure.value)  # the message, not a remote traceback
    assert not (cwd_tmp / "out").exists()


def test_the_command_line_reports_bad_input_in_one_line(models, cwd_tmp):
    """Through `tfm-cls batch` itself (a subprocess; it fails before starting a cluster)."""
    proc = subprocess.run([sys.executable, "-m", "tfm_cls.cli", "batch", "--model", str(models["single_label"]),
                           "--input", str(cwd_tmp / "nothing-*.jsonl"), "--output", "out"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: no input files in {cwd_tmp / 'nothing-*.jsonl'}"], proc.stderr
    assert not (cwd_tmp / "out").exists()


def test_a_missing_ray_extra_is_one_line(models, cwd_tmp):
    block = ("import sys, importlib.abc\n"
             "class Block(importlib.abc.MetaPathFinder):\n"
             "    def find_spec(self, name, path, target=None):\n"
             "        if name == 'ray' or name.startswith('ray.'):\n"
             "            raise ImportError(f'No module named {name!r}', name=name)\n"
             "sys.meta_path.insert(0, Block())\n"
             "from tfm_cls.cli import main\n"
             "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", block, "batch", "--model", str(models["single_label"]),
                           "--input", "x.jsonl", "--output", "out"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("error: tfm-cls batch needs the ray extra: pip install 'tfm-cls[ray]' "
                                   "(ray is not installed)")


def test_the_local_cluster_stays_local(ray_cluster):
    """Loopback addresses only, its files in the session's temporary folder, no token file in ~."""
    ray, temp, token_before = ray_cluster
    from ray.runtime_context import get_runtime_context

    (node,) = ray.nodes()
    assert node["NodeManagerAddress"] == "127.0.0.1"
    assert get_runtime_context().gcs_address.startswith("127.0.0.1:")
    assert any(temp.glob("session_*"))
    assert token_before or not (Path.home() / ".ray" / "auth_token").exists()
