"""Streaming: both inference paths read a large input in bounded memory (the peak RSS of a run on
20x the lines is close to that of the small run), writing one row per line. The default suite
compares 2k and 40k lines; the slow marker runs 10k and 200k. Both runs read 1,000 texts at a time
(--buffer-texts), so both exceed one buffer and the comparison isolates growth with the input. Holding a 200k-line
input, its encodings and its rows (as `tfm-cls predict` did before streaming) costs > 100 MB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kits.longdocs_kit import LABELS, MAX_LENGTH, make_run, texts

from tfm_cls.config import save_config
from tfm_cls.data.tokenizer import save_tokenizer
from tfm_cls.io import write_json
from tfm_cls.weights import save_weights

REPO = Path(__file__).resolve().parents[3]
# Runs one command line in this process and prints its peak resident memory (KiB) last.
PEAK = """
import resource, runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__") if sys.argv[0].endswith(".py") else runpy.run_module(sys.argv[0], run_name="__main__")
except SystemExit as e:
    assert not e.code, e.code
print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


SIZES = [pytest.param((2_000, 40_000), id="2k-40k"),
         pytest.param((10_000, 200_000), id="10k-200k", marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=SIZES)
def inputs(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stream")
    base = texts(1000, seed=9, high=30)
    paths = {}
    for n in request.param:
        path = folder / f"in{n}.txt"
        with path.open("w", encoding="utf-8") as f:
            for i in range(n):
                f.write(base[i % len(base)] + "\n")
        paths[n] = path
    return paths


def _peak_kib(argv: list[str], out: Path, lines: int) -> int:
    done = subprocess.run([sys.executable, "-c", PEAK, *argv], capture_output=True, text=True, cwd=REPO,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HOME": str(out.parent)}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    with out.open(encoding="utf-8") as f:
        count = sum(1 for _ in f)
    assert count == lines
    return int(done.stdout.strip().splitlines()[-1].split()[1])


def test_onnx_inference_memory_is_flat_from_10k_to_200k_lines(model, tokenizer, tmp_path, inputs):
    from tfm_cls.export.exporter import export_classifier

    path = tmp_path / "m.onnx"
    export_classifier(model, path, tokenizer=tokenizer, labels=LABELS, max_length=MAX_LENGTH)
    peaks = {}
    for n, src in inputs.items():
        out = tmp_path / f"out{n}.jsonl"
        argv = [str(REPO / "export" / "infer.py"), "--model", str(path), "--input", str(src), "--output", str(out),
                "--threads", "1", "--no-progress", "--buffer-texts", "1000"]
        peaks[n] = _peak_kib(argv, out, n)
    small, large = sorted(peaks)
    assert peaks[large] - peaks[small] < 15 * 1024, peaks  # KiB


def test_predict_memory_is_flat_from_10k_to_200k_lines(model, tokenizer, tmp_path, inputs):

    run = make_run(model, tokenizer)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    save_config(run.config, run_dir / "config.yaml")
    write_json(run_dir / "model_config.json", model.config)
    write_json(run_dir / "labels.json", LABELS)
    save_tokenizer(tokenizer, run_dir / "tokenizer.json")
    save_weights(model, run_dir / "model.safetensors")
    peaks = {}
    for n, src in inputs.items():
        out = tmp_path / f"pred{n}.jsonl"
        argv = ["tfm_cls.cli", "predict", "--run", str(run_dir), "--input", str(src), "--output", str(out),
                "--threads", "1", "--buffer-texts", "1000"]
        peaks[n] = _peak_kib(argv, out, n)
    small, large = sorted(peaks)
    first = json.loads((tmp_path / f"pred{small}.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert first["line"] == 1 and first["label"] in LABELS
    assert peaks[large] - peaks[small] < 15 * 1024, peaks  # KiB
