#!/usr/bin/env python
"""Throughput and latency of `tfm-cls serve` against offline `tfm-cls infer` on the same texts.

Loopback only (127.0.0.1), every load loop bounded in requests and seconds. For each server
configuration (batching on: the defaults; off: --max-batch-size 1; --workers 1 or 2) a server is
started on a free port, pinned to its own cores where taskset exists, and a closed-loop client
(one process, asyncio, keep-alive connections, pinned to the last core) sends one text per request
at each concurrency; the table gives texts/s, p50 / p95 / p99 latency and the mean micro-batch
size (te_batch_next_size sum / count). The offline row is the runtime's `Classifier.classify` over
the same texts with the same threads (the path of `tfm-cls infer`) on the server's cores. Paired:
every server is started first, then each is measured once per round at each concurrency, in
turn, with one offline pass per round; texts/s are medians over the rounds, latencies pooled.

    python benchmarks/bench_serve.py --texts ../shared/data/trec/test.jsonl --concurrency 1,8,32,128

Without --model it exports a small random-weight student (d_model 128, 2 layers, its tokenizer
trained on the texts) to bench_results/bench_serve_model.onnx (that needs the training install).
A table goes to stdout, everything to bench_results/bench_serve_<model>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
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
    from tfm_cls.data.tokenizer import train_tokenizer
    from tfm_cls.model import TransformerClassifier

    tok = train_tokenizer(texts, TokenizerConfig(vocab_size=4000, min_frequency=1, max_length=64))
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=tok.get_vocab_size(), num_classes=6, d_model=d_model, nhead=4,
                                  num_layers=layers, dim_feedforward=4 * d_model, dropout=0.0, max_len=64).eval()
    return export_classifier(model, out, tokenizer=tok, labels=[f"c{i}" for i in range(6)], max_length=64)


def offline_pass(model: Path, texts: list[str], threads: int, cores: set[int] | None, _cache: dict = {}) -> float:  # noqa: B006
    """texts/s of one pass of the runtime's Classifier (the code of `tfm-cls infer`) over `texts`,
    run on the server's `cores` (the Classifier is built on the first call)."""
    from tfm_cls.runtime.session import Classifier

    if model not in _cache:
        _cache[model] = Classifier(str(model), threads=threads)
        _cache[model].classify(texts[:64])
    mine = os.sched_getaffinity(0)
    if cores:
        os.sched_setaffinity(0, cores)
    try:
        t = time.perf_counter()
        _cache[model].classify(texts)
        return len(texts) / (time.perf_counter() - t)
    finally:
        os.sched_setaffinity(0, mine)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: Path, flags: list[str], cores: str | None, peer: bool = False) -> tuple[subprocess.Popen, int]:
    """`tfm-cls serve MODEL` with `flags` (or, with `peer`, the FastAPI peer of fastapi_peer.py) on a
    free loopback port, pinned to `cores`; returns once /health answers 200."""
    port = free_port()
    env = dict(os.environ)
    if peer:
        env.update(TFM_CLS_PEER_MODEL=str(model), TFM_CLS_PEER_THREADS=flags[flags.index("--threads") + 1])
        cmd = [sys.executable, "-m", "uvicorn", "--factory", "fastapi_peer:create_app", "--app-dir",
               str(Path(__file__).resolve().parent), "--port", str(port), "--log-level", "warning", "--no-access-log"]
    else:
        cmd = [sys.executable, "-m", "tfm_cls.cli", "serve", str(model), "--port", str(port), "--log-level", "warning",
               *flags]
    if cores and shutil.which("taskset"):
        cmd = ["taskset", "-c", cores, *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
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


def scrape(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()
    except OSError:  # the FastAPI peer has no /metrics
        return ""


def metric_sum(text: str, name: str) -> float:
    """The sum of every sample of `name` (all label sets, all workers)."""
    return sum(float(m) for m in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def batch_stats(port: int) -> tuple[float, float]:
    """(sum, count) of te_batch_next_size."""
    text = scrape(port)
    return metric_sum(text, "te_batch_next_size_sum"), metric_sum(text, "te_batch_next_size_count")


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


def closed_loop(port: int, texts: list[str], concurrency: int, requests: int, seconds: float,
                pid: int | None = None) -> dict:
    """One cell: `concurrency` closed-loop connections for `requests` or `seconds` at most; with the
    server's `pid`, the CPU time it spent per answered request (its share of a loaded core shows in
    texts/s, its cost of a request here)."""
    bodies = [json.dumps({"inputs": t, "truncate": True}).encode() for t in texts]
    latencies: list[float] = []
    errors: dict[int, int] = {}
    counter = {"sent": 0}

    async def run():
        until = time.monotonic() + seconds
        await asyncio.gather(*(_connection(port, bodies, counter, requests, until, latencies, errors)
                               for _ in range(concurrency)))

    before = batch_stats(port)
    cpu_before = cpu_seconds(pid) if pid else 0.0
    t = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - t
    cpu = cpu_seconds(pid) - cpu_before if pid else None
    after = batch_stats(port)
    lat = sorted(latencies)

    def pct(q: float) -> float:
        return 1000 * lat[min(len(lat) - 1, int(q * len(lat)))] if lat else float("nan")

    batches = after[1] - before[1]
    return {"concurrency": concurrency, "requests": len(lat), "errors": errors, "seconds": round(elapsed, 3),
            "texts_per_s": round(len(lat) / elapsed, 1), "p50_ms": round(pct(0.50), 2), "p95_ms": round(pct(0.95), 2),
            "p99_ms": round(pct(0.99), 2),
            "mean_batch": round((after[0] - before[0]) / batches, 2) if batches else None,
            "server_cpu_ms_per_request": round(1000 * cpu / len(lat), 3) if cpu is not None and lat else None,
            "server_cores_used": round(cpu / elapsed, 2) if cpu is not None else None, "latencies": lat}


SERVERS = {  # --servers key -> (row name, flags); "on" runs once per --workers count
    "on": ("batching on", []),
    "off": ("batching off (--max-batch-size 1)", ["--max-batch-size", "1"]),
    "on-asyncio": ("batching on, asyncio + h11", ["--loop", "asyncio", "--http", "h11"]),
    "off-asyncio": ("batching off, asyncio + h11", ["--max-batch-size", "1", "--loop", "asyncio", "--http", "h11"]),
    "fastapi": ("peer: FastAPI + one session.run a request", []),
}


def _family(pid: int) -> list[int]:
    """A process and its children (the workers)."""
    try:
        return [pid, *(int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]
    except OSError:
        return [pid]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children (the workers), from /proc."""
    total = 0.0
    for p in _family(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def rss_kib(pid: int) -> int:
    """Resident memory of a process and its children (the workers), KiB, from /proc."""
    total = 0
    for p in _family(pid):
        try:
            total += int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{p}/status").read_text()).group(1))
        except (OSError, AttributeError):
            pass
    return total


async def _send(port: int, conn, pool: list, cap: dict, body: bytes) -> tuple[int, float, bool]:
    """One request on `conn` (an idle pooled connection; None: open one, already counted in
    cap["open"]): (status, seconds, whether the connection can be reused). Status 0: the
    connection failed (the request is lost). The connection goes back to `pool` after."""
    t = time.perf_counter()
    try:
        reader, writer = conn or await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        cap["open"] -= 1
        return 0, time.perf_counter() - t, False
    try:
        writer.write(b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        await reader.readexactly(int(re.search(rb"(?i)content-length: (\d+)", head).group(1)))
    except (OSError, asyncio.IncompleteReadError, ValueError, AttributeError):
        cap["open"] -= 1
        writer.close()
        return 0, time.perf_counter() - t, False
    seconds = time.perf_counter() - t
    if re.search(rb"(?i)connection: close", head):
        cap["open"] -= 1
        writer.close()
    else:
        pool.append((reader, writer))
    return status, seconds, True


def open_loop(port: int, pid: int, texts: list[str], rate: float, seconds: float, requests: int,
              max_connections: int) -> dict:
    """Requests sent at `rate` a second on a fixed schedule, whatever the answers (open loop), for
    `seconds` or `requests` at most, over at most `max_connections` keep-alive connections (a
    request due while all are busy is counted `not_sent`); the server's RSS sampled each second."""
    bodies = [json.dumps({"inputs": t, "truncate": True}).encode() for t in texts]
    statuses: dict[int, int] = {}
    accepted: list[float] = []
    rss: list[tuple[float, int]] = []
    counters = {"sent": 0, "answered": 0, "not_sent": 0}

    async def one(conn, body: bytes, pool: list, cap: dict) -> None:
        status, took, _ = await _send(port, conn, pool, cap, body)
        counters["answered"] += status != 0
        statuses[status] = statuses.get(status, 0) + 1
        if status == 200:
            accepted.append(took)

    async def sample(start: float, stop: asyncio.Event) -> None:
        while not stop.is_set():
            rss.append((round(time.monotonic() - start, 1), rss_kib(pid)))
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass

    async def run() -> float:
        pool: list = []
        cap = {"open": 0}
        tasks = set()
        stop = asyncio.Event()
        start = time.monotonic()
        sampler = asyncio.ensure_future(sample(start, stop))
        i = 0
        while i < requests and time.monotonic() - start < seconds:
            now = time.monotonic()
            while i < requests and start + i / rate <= now:  # every request due by now
                i += 1
                if pool:
                    conn = pool.pop()
                elif cap["open"] < max_connections:
                    conn, cap["open"] = None, cap["open"] + 1  # opened by the task
                else:  # every connection busy: a client with a bounded pool would queue or drop it
                    counters["not_sent"] += 1
                    continue
                counters["sent"] += 1
                task = asyncio.ensure_future(one(conn, bodies[i % len(bodies)], pool, cap))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        sending = time.monotonic() - start
        if tasks:
            await asyncio.wait(tasks, timeout=120)
        stop.set()
        await sampler
        for _, writer in pool:
            writer.close()
        return sending

    before = scrape(port)
    sending = asyncio.run(run())
    after = scrape(port)
    lat = sorted(accepted)

    def pct(q: float) -> float:
        return round(1000 * lat[min(len(lat) - 1, int(q * len(lat)))], 1) if lat else float("nan")

    def delta(name: str) -> float:
        return metric_sum(after, name) - metric_sum(before, name)

    return {"rate": round(rate, 1), "seconds": round(sending, 1), **counters,
            "sent_per_s": round(counters["sent"] / sending, 1), "statuses": statuses,
            "accepted_per_s": round(len(lat) / sending, 1), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
            "max_ms": round(1000 * lat[-1], 1) if lat else None,
            "server_request_count": delta("te_request_count_total"),
            "server_success": delta("te_request_success_total"),
            "mean_batch": round(delta("te_batch_next_size_sum") / max(1.0, delta("te_batch_next_size_count")), 2),
            "rss_mib": [(t, round(kib / 1024, 1)) for t, kib in rss]}


def overload(args, model: Path, texts: list[str], server_cores: str | None) -> int:
    """Open loop at --overload-factor x the saturation rate (closed loop at concurrency 32, batching
    on): accepted requests' latency, 429s, 5xx, lost requests and the server's memory over time."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # one descriptor per client connection
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.max_connections + 256)), hard))
    flags = ["--threads", str(args.threads), "--request-timeout", str(args.request_timeout),
             "--max-concurrent-requests", str(args.max_concurrent_requests)]
    proc, port = start_server(model, flags, server_cores)
    try:
        closed_loop(port, texts, 32, 200, 5.0)  # warm up
        saturation = closed_loop(port, texts, 32, args.requests, args.seconds)
        rate = args.overload_factor * saturation["texts_per_s"]
        print(f"saturation (closed loop, concurrency 32): {saturation['texts_per_s']} requests/s; "
              f"open loop at {rate:.0f}/s for {args.overload_seconds:g} s", flush=True)
        row = open_loop(port, proc.pid, texts, rate, args.overload_seconds, int(rate * args.overload_seconds) + 1,
                        args.max_connections)
        saturation.pop("latencies")
        row["saturation"] = saturation
        row["rss_after_idle_mib"] = round(rss_kib(proc.pid) / 1024, 1)
    finally:
        proc.terminate()
        proc.wait(30)
    server_errors = sum(n for code, n in row["statuses"].items() if code >= 500)
    rss = [m for _, m in row["rss_mib"]]
    print("| offered/s | sent/s | seconds | sent | 200 | 429 | 5xx | lost | not sent | server counted | "
          "accepted/s | p50 ms | p99 ms | max ms | mean batch | RSS MiB first / max / last |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {row['rate']} | {row['sent_per_s']} | {row['seconds']} | {row['sent']} | {row['statuses'].get(200, 0)} | "
          f"{row['statuses'].get(429, 0)} | {server_errors} | {row['statuses'].get(0, 0)} | {row['not_sent']} | "
          f"{row['server_request_count']:.0f} | {row['accepted_per_s']} | {row['p50_ms']} | {row['p99_ms']} | "
          f"{row['max_ms']} | {row['mean_batch']} | {rss[0]} / {max(rss)} / {rss[-1]} |")
    others = {k: v for k, v in row["statuses"].items() if k not in (0, 200, 429)}
    checks = {"accepted p99 <= --request-timeout": row["p99_ms"] <= 1000 * args.request_timeout,
              "no 5xx": server_errors == 0, "none lost": row["statuses"].get(0, 0) == 0,
              "each answered once (client answers == server count)": row["answered"] == row["server_request_count"],
              "only 200 / 429": not others}
    for name, ok in checks.items():
        print(f"  {name}: {'yes' if ok else 'NO'}")
    row["checks"] = checks
    (args.out / f"bench_serve_overload_{model.stem}.json").write_text(json.dumps(row, indent=2) + "\n")
    return 0 if all(checks.values()) else 1


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
    p.add_argument("--seconds", type=float, default=4.0, help="seconds per cell and round at most")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime threads per worker (and offline)")
    p.add_argument("--workers", default="1", help="comma-separated worker counts to run with batching on")
    p.add_argument("--servers", default="on,off,fastapi",
                   help=f"comma-separated rows among {list(SERVERS)} (default on,off,fastapi)")
    p.add_argument("--rounds", type=int, default=3,
                   help="paired rounds: each server once per round and concurrency, one offline pass per round")
    p.add_argument("--overload", action="store_true",
                   help="instead of the tables: open loop at --overload-factor x the saturation rate")
    p.add_argument("--overload-factor", type=float, default=2.0)
    p.add_argument("--overload-seconds", type=float, default=30.0)
    p.add_argument("--request-timeout", type=float, default=5.0, help="--overload: the server's --request-timeout")
    p.add_argument("--max-connections", type=int, default=256, help="--overload: client connections at most")
    p.add_argument("--max-concurrent-requests", type=int, default=64,
                   help="--overload: the server's admission bound (below --max-connections, so 429s can happen)")
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
    if args.overload:
        return overload(args, model, texts, server_cores)
    levels = [int(c) for c in args.concurrency.split(",")]
    configs = []
    for key in args.servers.split(","):
        name, flags = SERVERS[key]
        if key == "on":
            configs += [(f"{name}, {w} worker{'s' * (int(w) > 1)}", ["--workers", w], False)
                        for w in args.workers.split(",")]
        elif key == "fastapi" and importlib.util.find_spec("fastapi") is None:
            print("(no FastAPI peer row: pip install 'tfm-cls[bench]' or fastapi)")
        else:
            configs.append((name, flags, key == "fastapi"))
    core_set = set(range(max(1, cores - 1))) if cores > 1 else None
    servers = []
    try:
        for name, flags, peer in configs:  # all started first, then measured in turn (idle ones cost nothing)
            proc, port = start_server(model, ["--threads", str(args.threads), *flags], server_cores, peer)
            servers.append((name, flags, proc, port))
            closed_loop(port, texts, max(levels), 200, 3.0)  # warm the connections and the model
        cells: dict = {(name, c): [] for name, *_ in servers for c in levels}
        offline_rates = []
        for _ in range(args.rounds):  # paired: every server once per round and level, offline once per round
            offline_rates.append(offline_pass(model, texts, args.threads, core_set))
            for c in levels:
                for name, _, proc, port in servers:
                    cells[(name, c)].append(closed_loop(port, texts, c, args.requests, args.seconds, proc.pid))
    finally:
        for _, _, proc, _ in servers:
            proc.terminate()
        for _, _, proc, _ in servers:
            proc.wait(30)
    offline_rate = statistics.median(offline_rates)
    results = {"model": str(model), "texts": str(args.texts), "num_texts": len(texts), "threads": args.threads,
               "cpu_count": cores, "rounds": args.rounds, "offline_texts_per_s": round(offline_rate, 1),
               "offline_passes": [round(r, 1) for r in offline_rates], "servers": []}
    print(f"offline tfm-cls infer path (Classifier.classify, {args.threads} thread, on the server's cores): "
          f"{offline_rate:.1f} texts/s on {len(texts)} texts (median of {args.rounds} passes, one per round)")
    print("| server | concurrency | texts/s | vs offline | p50 ms | p95 ms | p99 ms | mean batch | server CPU ms/request "
          "| server cores used | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, flags, _, _ in servers:
        rows = []
        for c in levels:
            runs = cells[(name, c)]
            lat = sorted(x for r in runs for x in r.pop("latencies"))

            def pct(q: float, lat=lat) -> float:
                return round(1000 * lat[min(len(lat) - 1, int(q * len(lat)))], 2) if lat else float("nan")

            rate = statistics.median(r["texts_per_s"] for r in runs)
            batches = [r["mean_batch"] for r in runs if r["mean_batch"]]
            errors: dict = {}
            for r in runs:
                for code, n in r["errors"].items():
                    errors[code] = errors.get(code, 0) + n
            cpu_ms = statistics.median(r["server_cpu_ms_per_request"] or 0 for r in runs)
            used = statistics.median(r["server_cores_used"] or 0 for r in runs)
            row = {"concurrency": c, "texts_per_s": round(rate, 1), "p50_ms": pct(0.5), "p95_ms": pct(0.95),
                   "p99_ms": pct(0.99), "mean_batch": round(statistics.median(batches), 2) if batches else None,
                   "server_cpu_ms_per_request": cpu_ms, "server_cores_used": used, "errors": errors, "runs": runs}
            rows.append(row)
            print(f"| {name} | {c} | {row['texts_per_s']} | {rate / offline_rate:.2f} | {row['p50_ms']} | "
                  f"{row['p95_ms']} | {row['p99_ms']} | {row['mean_batch'] or ''} | {cpu_ms:.2f} | {used:.2f} | "
                  f"{errors or ''} |")
        results["servers"].append({"name": name, "flags": flags, "rows": rows})
    (args.out / f"bench_serve_{model.stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
