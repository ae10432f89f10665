"""Memory: peak RSS of export/infer.py and `tfm-cls predict` on 10k to 1M input lines.

Peak resident memory of the two inference paths, export/infer.py (the torch-free
runtime) and `tfm-cls predict` (torch), on 10k, 100k and 1M input lines (the test texts repeated),
each a subprocess on one thread.

    python -m benchmarks.memory --data-root ../shared/data [--quick]

A tiny classifier (d_model 16, 1 layer; a tokenizer trained on the dataset's texts) keeps a
1M-line run in minutes: streaming memory does not depend on the model's size. The peak is each
child's VmHWM (Linux /proc). A table goes to
stdout and bench_results/memory-<time>.md, everything to the .json beside it.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness.data import REPO, read_texts
from benchmarks.harness.options import add_inference_options
from benchmarks.harness.results import write_results

log = logging.getLogger("benchmarks.memory")

_PEAK = """
import resource, runpy, sys
sys.argv = sys.argv[1:]
if sys.argv[0].endswith(".py"):
    runpy.run_path(sys.argv[0], run_name="__main__")
else:
    runpy.run_module(sys.argv[0], run_name="__main__")
"""
# The child's own peak: VmHWM of /proc/self/status belongs to the memory map made at exec. (getrusage's
# ru_maxrss does not: Linux carries the parent's peak at fork over exec, so every child reported at least
# this benchmark's own size.)
_PEAK_EXIT = ("import atexit, re; atexit.register(lambda: print('PEAK', "
              "re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)))")


def measure(args: argparse.Namespace) -> int:
    """Peak resident memory of the two inference paths on 10k, 100k and 1M lines (sst2 test texts
    repeated). A tiny classifier (d_model 16, 1 layer; the sst2-trained tokenizer) keeps a
    1M-line run in minutes: streaming memory does not depend on the model's size."""
    import torch
    from tfm_cls.export.exporter import export_run

    from tfm_cls.config import ClassifierConfig, DataConfig, TokenizerConfig, save_config
    from tfm_cls.data.tokenizer import save_tokenizer, train_tokenizer
    from tfm_cls.io import write_json
    from tfm_cls.model import TransformerClassifier
    from tfm_cls.weights import save_weights

    data_dir = args.data_root / args.dataset
    texts = read_texts(data_dir / "test.jsonl")
    sizes = (2_000, 20_000) if args.quick else (10_000, 100_000, 1_000_000)
    results: dict = {"load_before": os.getloadavg(), "peak_kib": {}}
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as work:
        work_dir = Path(work)
        run_dir = work_dir / "run"
        run_dir.mkdir()
        cfg = ClassifierConfig(data=DataConfig(path=str(data_dir)), tokenizer=TokenizerConfig(vocab_size=8000, max_length=128))
        tokenizer = train_tokenizer(read_texts(data_dir / "train.jsonl", limit=20000), cfg.tokenizer)
        torch.manual_seed(0)
        model = TransformerClassifier(vocab_size=tokenizer.get_vocab_size(), num_classes=2, d_model=16, nhead=2,
                                      num_layers=1, dim_feedforward=32, dropout=0.0, max_len=128).eval()
        save_config(cfg, run_dir / "config.yaml")
        write_json(run_dir / "model_config.json", model.config)
        write_json(run_dir / "labels.json", ["negative", "positive"])
        save_tokenizer(tokenizer, run_dir / "tokenizer.json")
        save_weights(model, run_dir / "model.safetensors")
        onnx_path = export_run(run_dir, run_dir / "model.onnx")
        for n in sizes:
            src = work_dir / f"in{n}.txt"
            with src.open("w", encoding="utf-8") as f:
                for i in range(n):
                    f.write(texts[i % len(texts)] + "\n")
            commands = {"export/infer.py": [str(REPO / "export" / "infer.py"),
                                            "--model", str(onnx_path), "--threads", "1", "--no-progress"],
                        "tfm-cls predict": ["tfm_cls.cli", "predict", "--run", str(run_dir), "--threads", "1"]}
            for name, argv in commands.items():
                if name == "tfm-cls predict" and n > 100_000 and args.quick:
                    continue
                out = work_dir / "out.jsonl"
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-c", _PEAK_EXIT + "\n" + _PEAK, *argv, "--input", str(src),
                                       "--output", str(out)], capture_output=True, text=True,
                                      env={**os.environ, "OMP_NUM_THREADS": "1"})
                seconds = time.perf_counter() - start
                if done.returncode != 0:
                    raise RuntimeError(f"{name} on {n} lines failed: {done.stderr[-1000:]}")
                with out.open(encoding="utf-8") as f:
                    rows = sum(1 for _ in f)
                peak = int([x for x in done.stdout.splitlines() if x.startswith("PEAK")][-1].split()[1])
                results["peak_kib"][f"{name} / {n} lines"] = {"peak_mib": peak / 1024, "rows": rows, "seconds": seconds}
                log.info("%s, %d lines: peak %.1f MiB, %d rows, %.0f s", name, n, peak / 1024, rows, seconds)
    results["load_after"] = os.getloadavg()
    lines = ["| command / input lines | peak RSS MiB | output rows | seconds |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {r['peak_mib']:.1f} | {r['rows']} | {r['seconds']:.0f} |" for k, r in results["peak_kib"].items()]
    table = "\n".join(lines)
    print(table)
    write_results(args.out, "memory", results, table, args.quick)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_inference_options(p, run=False, threads=False)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    return measure(args)


if __name__ == "__main__":
    raise SystemExit(main())
