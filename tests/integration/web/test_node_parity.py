"""The JS runtime (web/) in Node against `tfm-cls infer` on the same files: every row, every
label, scores within 1e-5, for each task type and long-text policy, hostile texts included; the
token ids of every model row; the errors of files it must refuse, word for word Python's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kits import web_kit as W

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.session import Classifier

PARITY = Path(__file__).with_name("parity.mjs")


def run_node(jobs: list[dict], folder: Path) -> list[dict]:
    path = folder / "jobs.json"
    path.write_text(json.dumps(jobs), encoding="utf-8")
    proc = subprocess.run([W.node(), str(PARITY), str(path)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def node_results(web_dist, web_models, bad_models, expected, tmp_path_factory):
    """One node process: every model's rows and ids, every bad file's error."""
    folder = tmp_path_factory.mktemp("web_node")
    jobs = []
    for kind, path in web_models.items():
        records, _ = expected[kind]
        src = folder / f"{kind}.in.jsonl"
        src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        jobs.append({"kind": kind, "model": str(path), "input": str(src), "output": str(folder / f"{kind}.js.jsonl"),
                     "ids": True})
    # The overrides of `tfm-cls infer --max-length 12 --chunk --stride 3 --aggregate max` as load() options.
    jobs.append({"kind": "overrides", "model": str(web_models["single_label"]), "input": str(folder / "single_label.in.jsonl"),
                 "output": str(folder / "overrides.js.jsonl"),
                 "options": {"maxLength": 12, "longText": {"chunk": True, "stride": 3, "aggregate": "max"}}})
    jobs += [{"kind": kind, "model": str(path), "error": True} for kind, path in bad_models.items()]
    done = run_node(jobs, folder)
    rows = {j["kind"]: [json.loads(line) for line in Path(j["output"]).read_text(encoding="utf-8").splitlines()]
            for j in done if not j.get("error")}
    return rows, {j["kind"]: j.get("result") for j in done}


KINDS = ["single_label", "multi_label", "regression", "chunked", "chunked_max", "head_tail", "tail", "bag_of_terms"]


@pytest.mark.parametrize("kind", KINDS)
def test_rows_equal_tfm_cls_infer(node_results, expected, kind):
    rows, _ = node_results
    _, py = expected[kind]
    assert W.differences(rows[kind], py) == []


def test_load_options_are_the_infer_flags(node_results, web_models, expected, tmp_path):
    rows, _ = node_results
    records, _ = expected["single_label"]
    py = W.python_rows(web_models["single_label"], records, tmp_path, max_length=12,
                       long_text={"chunk": True, "stride": 3, "aggregate": "max"})
    assert any(r.get("windows", 0) > 1 for r in py)
    assert W.differences(rows["overrides"], py) == []


@pytest.mark.parametrize("kind", ["single_label_int8", "multi_label_int8", "regression_int8"])
def test_int8_labels_equal_and_scores_within_the_stated_tolerance(node_results, expected, kind):
    """int8: MatMulInteger differs between WASM and native kernels (W.INT8_TOLERANCE says why);
    every label must still be equal."""
    rows, _ = node_results
    _, py = expected[kind]
    assert W.differences(rows[kind], py, W.INT8_TOLERANCE) == []


def test_the_int8_bag_of_terms_is_within_the_fp32_tolerance(node_results, expected):
    """The bag's int8 file has no integer product (its tables are int8 with one scale a row,
    dequantized after the lookup, in float32 on both sides): every label equal, scores within 1e-5."""
    rows, _ = node_results
    _, py = expected["bag_of_terms_int8"]
    assert W.differences(rows["bag_of_terms_int8"], py) == []


@pytest.mark.parametrize("kind", KINDS)
def test_token_ids_equal_the_python_runtime(node_results, web_models, expected, kind):
    _, results = node_results
    records, _ = expected[kind]
    clf = Classifier(str(web_models[kind]))
    texts = [r["text"] for r in records]
    pairs = [r["text_pair"] for r in records] if clf.pair else None
    want = clf.encode_inputs(texts, pairs).ids
    got = results[kind]
    bad = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert len(got) == len(want) and not bad, [(W.TEXTS[i][:40], got[i][:12], want[i][:12]) for i in bad[:5]]


def test_the_hostile_texts_are_classified_as_python_does(expected, node_results):
    """Spelled out: what Python calls empty (str.strip()) is empty in JS too; long texts are cut,
    or read in windows."""
    rows, _ = node_results
    hostile = rows["single_label"][len(W.TEXTS) - len(W.HOSTILE):]
    empty = [r["empty"] for r in hostile]
    assert empty[:6] == [True, True, True, True, True, False]  # "\ufeff" is not whitespace to Python
    assert hostile[-2]["truncated"] and not hostile[-1]["truncated"]  # a 100,000-letter word is one [UNK]
    assert rows["chunked"][-2]["windows"] > 1000  # 100,000 characters in windows of 8 tokens
    # The bag of terms has no positions (token_limit None), but its export records the tokenizer's
    # max_length and `tfm-cls infer` cuts there, as for every model: so does JS.
    bag = rows["bag_of_terms"][len(W.TEXTS) - len(W.HOSTILE):]
    assert [r["empty"] for r in bag] == empty and bag[-2]["truncated"] and not bag[-1]["truncated"]


@pytest.mark.parametrize("bad", ["not_ours", "mismatch", "truncated"])
def test_bad_files_are_refused_with_the_python_message(node_results, bad_models, bad):
    _, results = node_results
    message = results[bad]
    assert message is not None and message.startswith("InferenceError: "), message
    try:
        Classifier(str(bad_models[bad]))
    except InferenceError as err:
        python = str(err)
    else:
        pytest.fail("Python accepted the file")
    if bad == "truncated":  # the reasons differ (onnxruntime's and the JS protobuf reader's); the sentence does not
        prefix = f"{bad_models[bad]} is not a readable ONNX model: "
        assert message.removeprefix("InferenceError: ").startswith(prefix) and python.startswith(prefix)
    else:
        assert message.removeprefix("InferenceError: ") == python
