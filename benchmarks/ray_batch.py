"""Ray: `tfm-cls batch` on Ray Data (1 and 2 actors) against `tfm-cls infer` (1 and 2 threads).

`tfm-cls batch` on Ray Data (1 and 2 actors) against `tfm-cls infer` in one process (1 and 2
threads), on the same model and the same short texts. docs/batch-inference.md

    python -m benchmarks.ray_batch --texts 1000000 --data ../shared/data/sst2/train.jsonl

N short texts are built by cycling the --data texts (SST-2 sentences: ~10 words), written once as
JSONL (what infer reads) and as --files Parquet files (what batch reads). Each configuration runs
as its own command, a subprocess, on N texts and on --small texts; the rounds alternate the
configurations and the table gives medians:
  * texts/s end to end (wall time of the command, start-up included);
  * start-up overhead: the wall time on --small texts (Python, the model, Ray's cluster and actors);
  * per-text cost: (wall(N) - wall(small)) / (N - small), the part that grows with the input;
    Ray's per-text overhead is 1 actor's per-text cost against infer's at 1 thread, the model's;
  * CPU time per text, user + system over every process of the command's tree, the same
    difference of the two runs: the cost that does not depend on how loaded the machine is, so
    Ray's overhead per text is also given as 1 actor's CPU per text against infer's;
  * peak memory (VmHWM) of every process of the command's tree, grouped by role (driver, actor,
    raylet, gcs_server, other Ray workers), polled from /proc.
Without --model a random-weight student is exported (d_model 128, 2 layers; the training install).
A table goes to stdout and everything to bench_results/ray-batch-<N>-<time>.json. The machine
may be shared: the JSON records the load average before and after.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness.cpu import descendants, process_stats
from benchmarks.harness.data import DATA_ROOT, REPO, read_rows
from benchmarks.harness.models import random_student
from benchmarks.harness.results import OUT, Results


def build_texts(data: Path, n: int) -> list[str]:
    """n short texts cycling the non-empty texts of a .jsonl file."""
    base = [t for t in (row.get("text", "") for row in read_rows(data)) if t.strip()]
    return list(itertools.islice(itertools.cycle(base), n))


def write_inputs(texts: list[str], folder: Path, files: int) -> tuple[Path, Path]:
    """(JSONL file, folder of `files` Parquet files) holding `texts`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    jsonl = folder / "texts.jsonl"
    with jsonl.open("w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    parquet = folder / "parquet"
    parquet.mkdir(exist_ok=True)
    step = -(-len(texts) // files)
    for k in range(files):
        chunk = texts[k * step:(k + 1) * step]
        pq.write_table(pa.table({"text": pa.array(chunk, pa.string())}), parquet / f"part-{k:03d}.parquet")
    return jsonl, parquet


# ---- memory and CPU of a process tree ----------------------------------------------------------


def role(pid: int, root: int, title: str) -> str:
    if pid == root:
        return "driver"
    for key, name in (("MapWorker", "actor"), ("raylet", "raylet"), ("gcs_server", "gcs_server"),
                      ("ray::", "ray worker (read / write / idle)")):
        if key in title:
            return name
    return "ray daemon (agents, monitors)" if "/ray/" in title else "other"


def run_measured(cmd: list[str], env: dict) -> dict:
    """Wall seconds, CPU seconds (every process of the tree, polled: a process's last 0.2 s before
    it exits may be missed) and peak memory (MiB) per role of the process tree of `cmd`."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks: dict[int, tuple[int, str]] = {}
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        for pid in descendants(proc.pid):
            seen = process_stats(pid)
            if seen is not None:
                old = peaks.get(pid, (0, ""))
                # keep the highest peak, and the most telling title (a Ray worker renames itself)
                title = seen.command if "MapWorker" in seen.command or "MapWorker" not in old[1] else old[1]
                peaks[pid] = (max(old[0], seen.peak_kib), title)
                cpu[pid] = max(cpu.get(pid, 0.0), seen.cpu_seconds)
        time.sleep(0.2)
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    roles: dict[str, list[int]] = {}
    role_cpu: dict[str, float] = {}
    for pid, (hwm, title) in peaks.items():
        name = role(pid, proc.pid, title)
        roles.setdefault(name, []).append(hwm)
        role_cpu[name] = role_cpu.get(name, 0.0) + cpu.get(pid, 0.0)
    memory = {name: {"processes": len(v), "max_mib": round(max(v) / 1024, 1), "sum_mib": round(sum(v) / 1024, 1),
                     "cpu_seconds": round(role_cpu[name], 2)} for name, v in sorted(roles.items())}
    return {"seconds": seconds, "cpu_seconds": round(sum(cpu.values()), 2), "memory": memory}


# ---- the configurations ------------------------------------------------------------------------


def commands(model: Path, jsonl: Path, parquet: Path, out: Path) -> dict[str, list[str]]:
    py = [sys.executable, "-m", "tfm_cls.cli"]
    infer = [*py, "infer", "--model", str(model), "--input", str(jsonl), "--output", str(out / "infer.jsonl"),
             "--no-progress"]
    batch = [*py, "batch", "--model", str(model), "--input", str(parquet), "--output", str(out / "batch"),
             "--no-progress", "--overwrite", "--threads", "1", "--temp-dir", str(out / "ray")]
    return {"infer, 1 thread": [*infer, "--threads", "1"], "infer, 2 threads": [*infer, "--threads", "2"],
            "ray, 1 actor": [*batch, "--concurrency", "1"], "ray, 2 actors": [*batch, "--concurrency", "2"]}


def row_of(runs: dict[str, list], infer: bool, n_big: int, n_small: int) -> dict:
    """One configuration's medians over the rounds: wall and CPU time of the big and the start-up
    run, their per-text differences (the part that grows with the input), and memory."""
    def median(size: str, value) -> float:
        return statistics.median(value(x) for x in runs[size])

    big, small = median("big", lambda x: x["seconds"]), median("small", lambda x: x["seconds"])
    per_text = (big - small) / max(n_big - n_small, 1)
    cpu_big, cpu_small = median("big", lambda x: x["cpu_seconds"]), median("small", lambda x: x["cpu_seconds"])
    cpu_per_text = (cpu_big - cpu_small) / max(n_big - n_small, 1)
    part = "driver" if infer else "actor"  # the inference process(es) alone: infer's driver, or the actors

    def model_cpu(x: dict) -> float:
        return x["memory"].get(part, {}).get("cpu_seconds", 0.0)

    model_per_text = (median("big", model_cpu) - median("small", model_cpu)) / max(n_big - n_small, 1)
    return {"seconds": round(big, 2), "startup_seconds": round(small, 2),
            "texts_per_s": round(n_big / big, 1), "marginal_texts_per_s": round(1 / per_text, 1),
            "per_text_us": round(per_text * 1e6, 1), "cpu_seconds": round(cpu_big, 2),
            "startup_cpu_seconds": round(cpu_small, 2), "cpu_per_text_us": round(cpu_per_text * 1e6, 1),
            "inference_process_cpu_per_text_us": round(model_per_text * 1e6, 1), "memory": runs["big"][-1]["memory"],
            "all_seconds": [round(x["seconds"], 2) for x in runs["big"]],
            "all_startup_seconds": [round(x["seconds"], 2) for x in runs["small"]]}


def summarize(rows: dict[str, dict]) -> dict[str, float]:
    """Ray's scaling and overheads: 2 actors against 1, 1 actor against infer at 1 thread."""
    one, two, base = rows["ray, 1 actor"], rows["ray, 2 actors"], rows["infer, 1 thread"]
    return {
        "ray_2_vs_1_actor_end_to_end": round(two["texts_per_s"] / one["texts_per_s"], 3),
        "ray_2_vs_1_actor_marginal": round(two["marginal_texts_per_s"] / one["marginal_texts_per_s"], 3),
        "ray_overhead_per_text_vs_model": round(one["per_text_us"] / base["per_text_us"] - 1, 3),
        "ray_cpu_overhead_per_text_vs_model": round(one["cpu_per_text_us"] / base["cpu_per_text_us"] - 1, 3),
        "ray_2_vs_1_actor_cpu_per_text": round(two["cpu_per_text_us"] / one["cpu_per_text_us"], 3),
        "actor_vs_infer_process_cpu_per_text": round(one["inference_process_cpu_per_text_us"]
                                                     / base["inference_process_cpu_per_text_us"] - 1, 3),
        "actor_cpu_per_text_2_vs_1_actors": round(two["inference_process_cpu_per_text_us"]
                                                  / one["inference_process_cpu_per_text_us"], 3),
        "infer_2_vs_1_thread_marginal": round(rows["infer, 2 threads"]["marginal_texts_per_s"]
                                              / base["marginal_texts_per_s"], 3),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ray_batch", description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=int, default=1_000_000, help="N, the texts of the big run (default 1,000,000)")
    p.add_argument("--small", type=int, default=2000, help="texts of the start-up run (default 2000)")
    p.add_argument("--data", type=Path, default=DATA_ROOT / "sst2" / "train.jsonl")
    p.add_argument("--files", type=int, default=8, help="Parquet files the texts are split into (default 8)")
    p.add_argument("--model", type=Path, help="an exported .onnx (default: a random-weight d128x2 student)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3; medians)")
    p.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    texts = build_texts(args.data, args.texts)
    work = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    try:
        if args.model is None:
            args.model = random_student(texts[:20000], work / "student_d128_l2.onnx", 128, 2)
        inputs = {"big": write_inputs(texts, work / "big", args.files),
                  # as many files as the big run: a Ray task (a worker process) per file is start-up
                  "small": write_inputs(texts[:args.small], work / "small", args.files)}
        env = {**os.environ, "RAY_DEDUP_LOGS": "0", "PYTHONPATH": str(REPO)}
        names = list(commands(args.model, *inputs["big"], work))
        runs: dict[str, dict[str, list]] = {n: {"big": [], "small": []} for n in names}
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]  # alternate, so drift in the load hits all alike
            for size in ("small", "big"):
                for name in order:
                    cmd = commands(args.model, *inputs[size], work)[name]
                    result = run_measured(cmd, env)
                    runs[name][size].append(result)
                    print(f"round {r + 1} {size:5s} {name:17s} {result['seconds']:7.1f} s", file=sys.stderr, flush=True)
        n_big, n_small = args.texts, args.small
        rows = {name: row_of(runs[name], name.startswith("infer"), n_big, n_small) for name in names}
        summary = summarize(rows)
        table = []
        print(f"\n{n_big:,} short texts ({args.data.parent.name}), {args.rounds} rounds, medians; "
              f"start-up run: {n_small:,} texts; {os.cpu_count()} CPUs, load {load_before[0]:.1f}\n")
        print("| command | wall s | texts/s | start-up s | per text us | marginal texts/s | CPU us per text | "
              "of which infer / actors | start-up CPU s | peak MiB (role: max) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, row in rows.items():
            mem = ", ".join(f"{k} {v['max_mib']:.0f}" + (f" x{v['processes']}" if v["processes"] > 1 else "")
                            for k, v in row["memory"].items())
            table.append(f"| {name} | {row['seconds']} | {row['texts_per_s']:,.0f} | {row['startup_seconds']} | "
                         f"{row['per_text_us']} | {row['marginal_texts_per_s']:,.0f} | {row['cpu_per_text_us']} | "
                         f"{row['inference_process_cpu_per_text_us']} | {row['startup_cpu_seconds']} | {mem} |")
        print("\n".join(table))
        print("\n" + "; ".join(f"{k}: {v}" for k, v in summary.items()))
        result = {"texts": n_big, "small": n_small, "data": str(args.data), "files": args.files,
                  "model": args.model.name, "rounds": args.rounds, "cpu_count": os.cpu_count(),
                  "load_before": load_before, "load_after": os.getloadavg(), "rows": rows, "summary": summary,
                  "command": " ".join(["python", "-m", "benchmarks.ray_batch", *(argv or sys.argv[1:])])}
        print(f"wrote {Results(args.out, f'ray-batch-{n_big}').write(result)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
