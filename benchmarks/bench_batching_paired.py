"""Issue 16's throughput target, timed in alternating passes: end-to-end texts/s (tokenization
included, one thread) of a trained run's ONNX file on the sst2 test texts, through the ORT path of
before issue 16 (buffers of 1,024 texts, each sorted by length, batches of 32) and today's
(length-sorted token-budget batches), for the standard-ops graph and the ORT-fused one.

    python benchmarks/bench_batching_paired.py --run runs/sst2-distill [--repeats 7]

Every pass runs all four ways one after another, so a drifting load slows them alike; the ratio
is the median over passes of (way / old standard-ops path). Prints a table, writes
bench_results/batching-paired-<time>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfm_cls.export.exporter import export_run  # noqa: E402

from tfm_cls.io import write_json  # noqa: E402
from tfm_cls.runtime.session import Classifier  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="a trained classification run directory")
    p.add_argument("--data", default="../shared/data/sst2/test.jsonl")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--max-tokens", type=int, default=1024, help="today's token budget per batch (the default)")
    p.add_argument("--out", default="bench_results")
    args = p.parse_args(argv)
    texts = [json.loads(line)["text"] for line in Path(args.data).read_text(encoding="utf-8").splitlines() if line]
    with tempfile.TemporaryDirectory(prefix="bench_paired_") as work:
        graphs = {"standard": export_run(args.run, Path(work) / "plain.onnx", fuse=False),
                  "fused": export_run(args.run, Path(work) / "fused.onnx", fuse=True)}
        clfs = {name: Classifier(str(path), threads=1, batching="tokens", max_tokens=args.max_tokens)
                for name, path in graphs.items()}

        def before(clf: Classifier) -> np.ndarray:  # the loop before issue 16
            return np.concatenate([clf.classify(texts[i : i + 1024], 32)[0] for i in range(0, len(texts), 1024)])

        def today(clf: Classifier) -> np.ndarray:
            return clf.classify(texts)[0]

        ways = {f"{graph} / {name}": (clfs[graph], fn) for graph in clfs for name, fn in (("before", before),
                                                                                          ("token budget", today))}
        reference = before(clfs["standard"])
        diffs = {way: float(np.abs(fn(clf) - reference).max()) for way, (clf, fn) in ways.items()}  # + warm-up
        rates: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(args.repeats):
            for way, (clf, fn) in ways.items():
                start = time.perf_counter()
                fn(clf)
                rates[way].append(len(texts) / (time.perf_counter() - start))
    base = rates["standard / before"]
    rows = [{"way": way, "median_texts_per_s": statistics.median(r),
             "median_paired_ratio": statistics.median(a / b for a, b in zip(r, base)), "max_abs_diff": diffs[way]}
            for way, r in rates.items()]
    print(f"{'ORT graph / batching':<28} {'texts/s':>9} {'x before':>9} {'max |diff|':>11}")
    for r in rows:
        print(f"{r['way']:<28} {r['median_texts_per_s']:>9,.0f} {r['median_paired_ratio']:>8.2f}x {r['max_abs_diff']:>11.1e}")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(args.out) / f"batching-paired-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"args": vars(args), "texts": len(texts), "load_average": os.getloadavg(), "rows": rows,
                      "rates": rates})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
