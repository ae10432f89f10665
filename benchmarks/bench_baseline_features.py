"""The library's TF-IDF baseline (tfm_cls/classify/baseline.py, run_baseline kind="classes") on a few
single-label data sets: test accuracy and macro-F1 (docs/report.md quotes the tnews figures).

    python benchmarks/bench_baseline_features.py [--data-root ../shared/data] [--datasets tnews,trec,sst2]
        [--train-cap 10000]

Training splits over --train-cap texts are replaced by a seeded sample of that many. Run it with
another checkout's python (its editable tfm_cls) to measure that checkout's baseline.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, f1_score

import tfm_cls.classify.baseline as baseline


def read_split(path: Path, cap: int | None = None, seed: int = 0) -> dict:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if cap is not None and len(rows) > cap:
        keep = np.random.default_rng(seed).choice(len(rows), cap, replace=False)
        rows = [rows[i] for i in sorted(keep)]
    return {"texts": [r["text"] for r in rows], "pairs": None, "targets": np.array([r["label"] for r in rows])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", default="../shared/data")
    p.add_argument("--datasets", default="tnews,trec,sst2")
    p.add_argument("--train-cap", type=int, default=10_000)
    args = p.parse_args(argv)
    print(f"tfm_cls from {baseline.__file__}")
    print("| data | train | test | accuracy | macro-F1 | seconds | baseline |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name in args.datasets.split(","):
        root = Path(args.data_root) / name
        train, test = read_split(root / "train.jsonl", args.train_cap), read_split(root / "test.jsonl")
        num_classes = len(json.loads((root / "labels.json").read_text(encoding="utf-8")))
        out = baseline.run_baseline("classes", train, test, num_classes)
        predicted = out["logits"].argmax(axis=1)
        accuracy = accuracy_score(test["targets"], predicted)
        macro_f1 = f1_score(test["targets"], predicted, average="macro")
        print(f"| {name} | {len(train['texts'])} | {len(test['texts'])} | {accuracy:.3f} | {macro_f1:.3f} "
              f"| {out['seconds']:.0f} | {out['model']} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
