"""`max_length: auto` through `tfm-cls train`, and the shared inference flags of both paths."""

from __future__ import annotations

import argparse

import yaml
from kits.tiny_topics import make_texts, tiny_config, write_topic_data
from tfm_cls.export import infer

from tfm_cls import cli
from tfm_cls.errors import RunDirError


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def test_predict_and_the_onnx_script_share_the_inference_flags():
    predict = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["predict"]
    ours, script = _options(predict), _options(infer.build_parser())
    shared = ["--batching", "--max-tokens", "--batch-size", "--buffer-texts", "--threads", "--max-length",
              "--truncation", "--head-fraction", "--chunk", "--no-chunk", "--stride", "--aggregate", "--aggregate-scores"]
    for flag in shared:
        assert flag in ours and flag in script, flag
        assert ours[flag].choices == script[flag].choices and ours[flag].type == script[flag].type, flag


def test_auto_lengths_are_resolved_saved_and_recognised_on_a_rerun(tmp_path):
    import pytest

    data = write_topic_data(tmp_path / "data", (60, 15, 15), labels=False)
    from tfm_cls.train import train

    cfg = tiny_config(data, tmp_path / "run", "tokenizer.max_length=auto", "tokenizer.length_percentile=50",
                      "model.max_len=auto", "train.epochs=1")
    train(cfg)
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    from tfm_cls.data.tokenizer import auto_max_length, max_length_of
    from tfm_cls.runs import load_run

    run = load_run(tmp_path / "run")
    from tfm_cls.data.sources import load_data

    texts = load_data(run.config.data).splits["train"]["text"]
    want = auto_max_length(run.tokenizer, texts, run.config.tokenizer)
    assert saved["tokenizer"]["max_length"] == want == max_length_of(run.tokenizer) == saved["model"]["max_len"]
    assert run.model.config["max_len"] == want and isinstance(want, int) and want > 3
    with pytest.raises(RunDirError, match="holds a finished run of this config"):
        train(cfg)  # the same `auto` config is the same run


def test_predict_and_infer_chunk_a_trained_run_alike(tmp_path):
    """`tfm-cls predict --chunk` and `export/infer.py --chunk` on the same lines: the same rows."""
    import json

    import numpy as np

    data = write_topic_data(tmp_path / "data", (60, 15, 15), labels=False)
    from tfm_cls.train import train

    run_dir = tmp_path / "run"
    train(tiny_config(data, run_dir, "tokenizer.max_length=6", "train.epochs=1"))
    lines = [r["text"] for r in make_texts(12, 3)] + ["", "cat dog tennis bread " * 4]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flags = ["--chunk", "--stride", "1", "--aggregate", "max", "--max-tokens", "30"]
    assert cli.main(["predict", "--run", str(run_dir), "--input", str(src), "--output", str(tmp_path / "t.jsonl"),
                     *flags]) == 0
    assert cli.main(["export", "--run", str(run_dir)]) == 0
    assert infer.main(["--model", str(run_dir / "model.onnx"), "--input", str(src), "--output",
                       str(tmp_path / "o.jsonl"), "--no-progress", *flags]) == 0
    rows = [[json.loads(x) for x in (tmp_path / f).read_text().splitlines()] for f in ("t.jsonl", "o.jsonl")]
    assert len(rows[0]) == len(rows[1]) == len(lines)
    assert [r["windows"] for r in rows[0]] == [r["windows"] for r in rows[1]] and max(r["windows"] for r in rows[0]) > 3
    assert rows[0][-2]["empty"] and rows[0][-2]["windows"] == 0
    full = [i for i, r in enumerate(rows[0]) if not r["empty"]]
    assert [rows[0][i]["label"] for i in full] == [rows[1][i]["label"] for i in full]
    np.testing.assert_allclose([list(rows[0][i]["probabilities"].values()) for i in full],
                               [list(rows[1][i]["probabilities"].values()) for i in full], atol=2e-6)
