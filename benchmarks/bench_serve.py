#!/usr/bin/env python
"""Throughput and latency of `tfm-cls serve` against offline `tfm-cls infer` on the same texts.

Loopback only (127.0.0.1), every load loop bounded in requests and seconds. For each server
configuration (batching on: the defaults; off: --max-batch-size 1; --workers 1 or 2) a server is
started on a free port, pinned to its own cores where taskset exists, and a closed-loop client
(one process, asyncio, keep-alive connections, pinned to the last core) sends one text per request
at each concurrency; the table gives texts/s, p50 / p95 / p99 latency and the mean micro-batch
size (te_batch_next_size sum / count). The offline row is the runtime's `Classifier.classify` over
the same texts with the same threads (the path of `tfm-cls infer`), median of --repeats passes.

    python benchmarks/bench_serve.py --texts ../shared/data/trec/test.jsonl --concurrency 1,8,32,128

Without --model it exports a small random-weight student (d_model 128, 2 layers, its tokenizer
trained on the texts) to bench_results/bench_serve_model.onnx (that needs the training install).
A table goes to stdout, everything to bench_results/bench_serve_<model>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def read_texts(path: Path, limit: int) -> list[str]:
    texts = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                texts.append(json.loads(line)["text"] if path.suffix == ".jsonl" else line)
            if len(texts) >= limit:
                break
    return texts


def make_model(texts: list[str], out: Path, d_model: int = 128, layers: int = 2) -> Path:
    """A random-weight student (d_model, layers) exported with a tokenizer trained on `texts`."""
    import torch
    from tfm_cls.export.exporter import export_classifier

    from tfm_cls.config import TokenizerConfig
    from tfm_cls.model import TransformerClassifier
    from tfm_cls.tokenizer import train_tokenizer

    tok = train_tokenizer(texts, TokenizerConfig(vocab_size=4000, min_frequency=1, max_length=64))
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=tok.get_vocab_size(), num_classes=6, d_model=d_model, nhead=4,
                                  num_layers=layers, dim_feedforward=4 * d_model, dropout=0.0, max_len=64).eval()
    return export_classifier(model, out, tokenizer=tok, labels=[f"c{i}" for i in range(6)], max_length=64)


def offline(model: Path, texts: list[str], threads: int, repeats: int) -> float:
    """texts/s of the runtime's Classifier (the code of `tfm-cls infer`), median of `repeats`."""
    from tfm_cls.runtime.classifier import Classifier

    clf = Classifier(str(model), threads=threads)
    clf.classify(texts[:64])
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        clf.classify(texts)
        rates.append(len(texts) / (time.perf_counter() - t))
    return statistics.median(rates)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, flags: list[str], cores: str | None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cmd = [sys.executable, "-m", "tfm_cls.cli", "serve", str(model), "--port", str(port), "--log-level", "warning",
           *flags]
    if cores and shutil.which("taskset"):
        cmd = ["taskset", "-c", cores, *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not become healthy within 60 s")


def batch_stats(port: int) -> tuple[float, float]:
    """(sum, count) of te_batch_next_size."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    total = sum(float(m) for m in re.findall(r"^te_batch_next_size_sum (\S+)$", text, re.M))
    count = sum(float(m) for m in re.findall(r"^te_batch_next_size_count (\S+)$", text, re.M))
    return total, count


async def _connection(port: int, bodies: list[bytes], counter: dict, limit: int, until: float, latencies: list,
                      errors: dict) -> None:
    """One closed-loop client: a keep-alive connection, one request at a time."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while counter["sent"] < limit and time.monotonic() < until:
            body = bodies[counter["sent"] % len(bodies)]
            counter["sent"] += 1
            t = time.perf_counter()
            writer.write(b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
            await reader.readexactly(length)
            if status == 200:
                latencies.append(time.perf_counter() - t)
            else:
                errors[status] = errors.get(status, 0) + 1
    finally:
        writer.close()


def closed_loop(port: int, texts: list[str], concurrency: int, requests: int, seconds: float) -> dict:
    bodies = [json.dumps({"inputs": t, "truncate": True}).encode() for t in texts]
    latencies: list[float] = []
    errors: dict[int, int] = {}
    counter = {"sent": 0}

    async def run():
        until = time.monotonic() + seconds
        await asyncio.gather(*(_connection(port, bodies, counter, requests, until, latencies, errors)
                               for _ in range(concurrency)))

    before = batch_stats(port)
    t = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - t
    after = batch_stats(port)
    lat = sorted(latencies)

    def pct(q: float) -> float:
        return 1000 * lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")

    batches = after[1] - before[1]
    return {"concurrency": concurrency, "requests": len(lat), "errors": errors, "seconds": round(elapsed, 3),
            "texts_per_s": round(len(lat) / elapsed, 1), "p50_ms": round(pct(0.50), 2), "p95_ms": round(pct(0.95), 2),
            "p99_ms": round(pct(0.99), 2),
            "mean_batch": round((after[0] - before[0]) / batches, 2) if batches else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=Path, default=Path("../shared/data/trec/test.jsonl"),
                   help="a .jsonl (text field) or .txt file")
    p.add_argument("--limit", type=int, default=500, help="texts used (default 500)")
    p.add_argument("--model", type=Path, help="an exported .onnx (default: a small random-weight student)")
    p.add_argument("--d-model", type=int, default=128, help="the generated student's width (default 128)")
    p.add_argument("--layers", type=int, default=2, help="the generated student's layers (default 2)")
    p.add_argument("--concurrency", default="1,8,32,128")
    p.add_argument("--requests", type=int, default=2000, help="requests per cell at most")
    p.add_argument("--seconds", type=float, default=10.0, help="seconds per cell at most")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime threads per worker (and offline)")
    p.add_argument("--workers", default="1", help="comma-separated worker counts to run with batching on")
    p.add_argument("--repeats", type=int, default=5, help="offline passes (median)")
    p.add_argument("--out", type=Path, default=Path("bench_results"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    texts = read_texts(args.texts, args.limit)
    model = args.model or make_model(texts, args.out / f"bench_serve_model_d{args.d_model}_l{args.layers}.onnx",
                                     args.d_model, args.layers)
    cores = os.cpu_count() or 1
    server_cores = f"0-{max(0, cores - 2)}" if cores > 1 else None
    if cores > 1:
        os.sched_setaffinity(0, {cores - 1})  # the client on the last core, the server on the others
    offline_rate = offline(model, texts, args.threads, args.repeats)
    levels = [int(c) for c in args.concurrency.split(",")]
    configs = [(f"batching on, {w} worker{'s' * (int(w) > 1)}", ["--workers", w]) for w in args.workers.split(",")]
    configs.append(("batching off (--max-batch-size 1)", ["--max-batch-size", "1"]))
    results = {"model": str(model), "texts": str(args.texts), "num_texts": len(texts), "threads": args.threads,
               "cpu_count": cores, "offline_texts_per_s": round(offline_rate, 1), "servers": []}
    print(f"offline tfm-cls infer path (Classifier.classify, {args.threads} thread): {offline_rate:.1f} texts/s "
          f"on {len(texts)} texts")
    print("| server | concurrency | texts/s | vs offline | p50 ms | p95 ms | p99 ms | mean batch | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, flags in configs:
        proc, port = start_server(model, ["--threads", str(args.threads), *flags], server_cores)
        try:
            closed_loop(port, texts, max(levels), 200, 5.0)  # warm the connections and the model
            rows = []
            for c in levels:
                row = closed_loop(port, texts, c, args.requests, args.seconds)
                rows.append(row)
                print(f"| {name} | {c} | {row['texts_per_s']} | {row['texts_per_s'] / offline_rate:.2f} | "
                      f"{row['p50_ms']} | {row['p95_ms']} | {row['p99_ms']} | {row['mean_batch']} | "
                      f"{row['errors'] or ''} |", flush=True)
            results["servers"].append({"name": name, "flags": flags, "rows": rows})
        finally:
            proc.terminate()
            proc.wait(30)
    (args.out / f"bench_serve_{model.stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
