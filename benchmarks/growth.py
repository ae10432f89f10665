"""Issue 57's growth table: how each stage of `tfm-cls train --data DIR --minutes M` grows with the rows.

For each size, a set is built (benchmarks.harness.growth_sets: short reviews from a 2-label source, or
90-label ~500-word documents), then trained in a subprocess with nothing else set; the run's own stage
rows (metrics.json `stages`: seconds and peak RSS of read, tokenize, bags, encoder, finish), its wall
clock, the process's peak RSS (wait4), the longest gap between two lines it printed, the shipped model
and its test score are read back.

    python -m benchmarks.growth --short 10000 100000 1000000 --minutes 15
    python -m benchmarks.growth --long 1000 10000 50000 --minutes 15
    python -m benchmarks.growth --short 3000000 --minutes 30 --sets /tmp/growth

Columns: rows; each stage's seconds (peak MB); wall / budget; peak RSS of the run; the longest silent
gap; the shipped candidate and its test score. Writes bench_results/growth-<time>.json and .md. Run it
alone: the budget is wall clock on a 2-core machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.data import DATA_ROOT
from benchmarks.harness.growth_sets import long_documents, short_reviews
from benchmarks.harness.results import OUT, Results, environment

STAGES = ("read and plan", "tokenize", "bags", "encoder", "finish")
FEW_LABEL_BAGS = "few-label choice"
"""The few-label regime's stage in the bags' column: its cross-validation fits the bags (and reads the frozen
encoder's vectors)."""
STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d) ")


def longest_gap(lines: list[str]) -> float:
    """Seconds of the longest stretch between two time-stamped log lines (HH:MM:SS, midnight wraps)."""
    times = []
    for line in lines:
        match = STAMP.match(line)
        if match:
            h, m, s = (int(g) for g in match.groups())
            times.append(h * 3600 + m * 60 + s)
    gaps = [(b - a) % 86400 for a, b in zip(times, times[1:])]
    return float(max(gaps, default=0))


def train_once(folder: Path, run_dir: Path, minutes: float, threads: int) -> dict[str, Any]:
    """One `tfm-cls train` of `folder`: its wall clock, peak RSS, longest log gap and metrics."""
    command = [sys.executable, "-m", "tfm_cls.cli", "train", "--data", str(folder), "--minutes", str(minutes),
               f"run_dir={run_dir}", f"train.num_threads={threads}", "--overwrite"]
    log = run_dir.with_suffix(".log")
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    metrics_file = run_dir / "metrics.json"
    metrics = json.loads(metrics_file.read_text(encoding="utf-8")) if metrics_file.is_file() else {}
    stages = {row["stage"]: row for row in metrics.get("stages", [])}
    for line in lines:  # the finish's own row is logged after metrics.json is written
        found = re.search(r"stage (\w[\w -]*): ([\d.]+) s, peak RSS (\d+) MB", line)
        if found:
            stages[found.group(1)] = {"seconds": float(found.group(2)), "peak_rss_mb": float(found.group(3))}
    candidates = metrics.get("candidates", {})
    # the run resets its high-water mark at each stage (tfm_cls.training.stages), so wait4's is the last stage's:
    # the run's peak is the highest of its stages' and that
    peak = max([usage.ru_maxrss / 1024, *(row["peak_rss_mb"] for row in stages.values())])
    return {"exit": os.waitstatus_to_exitcode(status), "wall_seconds": wall, "budget_seconds": minutes * 60,
            "peak_rss_mb": peak, "longest_gap_seconds": longest_gap(lines), "stages": stages,
            "shipped": candidates.get("chosen"), "test": metrics.get("test", {}),
            "shrunk": metrics.get("wall_clock", {}).get("shrunk", []), "log": str(log)}


def _cell(stage: dict[str, Any] | None) -> str:
    return "-" if not stage else f"{stage['seconds']:.0f} ({stage['peak_rss_mb']:.0f})"


def table(rows: list[dict[str, Any]]) -> str:
    head = ["set", "rows", *[f"{s} s (MB)" for s in STAGES], "wall / budget", "peak MB", "gap s", "shipped", "test"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        test = row["test"]
        score = next((f"{k} {100 * v:.2f}" for k, v in test.items() if k in ("accuracy", "micro_f1")), "-")
        lines.append("| " + " | ".join([
            row["set"], f"{row['rows']:,}",
            *[_cell(row["stages"].get(s) or (row["stages"].get(FEW_LABEL_BAGS) if s == "bags" else None))
              for s in STAGES],
            f"{row['wall_seconds']:.0f} / {row['budget_seconds']:.0f}", f"{row['peak_rss_mb']:.0f}",
            f"{row['longest_gap_seconds']:.0f}", str(row["shipped"]), score]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.growth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", type=int, nargs="*", default=[], help="sizes of the short-review set")
    parser.add_argument("--long", type=int, nargs="*", default=[], help="sizes of the 90-label long-document set")
    parser.add_argument("--source", default=str(DATA_ROOT / "sst2"), help="the 2-label folder the sets are built from")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sets", default="/tmp/growth", help="where the sets are built (kept: built once)")
    parser.add_argument("--runs", default="/tmp/growth-runs")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    if not args.short and not args.long:
        parser.error("give --short and/or --long sizes")
    if not (Path(args.source) / "train.jsonl").is_file():
        parser.error(f"--source {args.source}: no train.jsonl there (a folder of {{text, label}} rows is expected)")
    built = [(Path(args.sets) / f"{kind}-{size}").resolve() for kind, sizes in (("short", args.short),
                                                                               ("long", args.long)) for size in sizes]
    if Path(args.source).resolve() in built or Path(args.runs).resolve() == Path(args.source).resolve():
        parser.error(f"--sets / --runs would write into --source {args.source}: name another folder")
    results = Results(args.out, "growth")
    rows: list[dict[str, Any]] = []
    for kind, sizes in (("short", args.short), ("long", args.long)):
        for size in sizes:
            folder = Path(args.sets) / f"{kind}-{size}"
            if not (folder / "train.jsonl").is_file():
                build = short_reviews if kind == "short" else long_documents
                build(args.source, folder, size)
            run_dir = Path(args.runs) / f"{kind}-{size}-{int(args.minutes)}m"
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            print(f"{datetime.datetime.now():%H:%M:%S} {kind} {size:,}: training ({args.minutes:g} minutes)", flush=True)
            row = {"set": kind, "rows": size, **train_once(folder, run_dir, args.minutes, args.threads)}
            rows.append(row)
            results.write({"environment": environment(), "args": vars(args), "rows": rows}, table(rows))
    print(table(rows))
    print(f"wrote {results.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
