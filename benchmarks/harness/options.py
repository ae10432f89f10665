"""Options several benchmarks share, defined once (`make bench-infer` hands one ARGS to the
inference, batching and hand-loop modules, so each accepts these)."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.harness.data import DATA_ROOT
from benchmarks.harness.results import OUT


def add_inference_options(parser: argparse.ArgumentParser, run: bool = True, threads: bool = True) -> None:
    """--data-root, --dataset, --run (with `run`), --threads (with `threads`), --quick and --out."""
    parser.add_argument("--data-root", type=Path, default=DATA_ROOT, help="folder of dataset folders (default: %(default)s)")
    parser.add_argument("--dataset", default="sst2", help="whose test texts are timed (default: %(default)s)")
    if run:
        parser.add_argument("--run", type=Path, help="a trained run directory (default: train a small one first)")
    if threads:
        parser.add_argument("--threads", type=int, default=1,
                            help="torch and onnxruntime intra-op threads (default 1: on a shared machine more threads "
                                 "than idle cores make torch's OpenMP spin-waits explode)")
    parser.add_argument("--quick", action="store_true", help="few texts and runs, tiny training: checks the module works")
    parser.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")


def check_folders(parser: argparse.ArgumentParser, folders: list[str], needed: tuple[str, ...] = ("train.jsonl", "test.jsonl"),
                  why: str = "a benchmark fits on train and scores on test") -> None:
    """One usage error (exit 2) naming the first `--data` folder without one of `needed`, before any work."""
    for folder in map(Path, folders):
        missing = [name for name in needed if not (folder / name).is_file()]
        if missing:
            parser.error(f"--data {folder}: no {' or '.join(missing)} ({why})")
