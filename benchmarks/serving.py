"""Serving: throughput and latency of `tfm-cls serve` against offline `tfm-cls infer` on the same texts.

Loopback only (127.0.0.1), every load loop bounded in requests and seconds. For each server
configuration (batching on: the defaults; off: --max-batch-size 1; --workers 1 or 2) a server is
started on a free port, pinned to its own cores where taskset exists, and a closed-loop client
(one process, asyncio, keep-alive connections, pinned to the last core) sends one text per request
at each concurrency; the table gives texts/s, p50 / p95 / p99 latency and the mean micro-batch
size (te_batch_next_size sum / count). The offline row is the runtime's `Classifier.classify` over
the same texts with the same threads (the path of `tfm-cls infer`) on the server's cores. Paired:
every server is started first, then each is measured once per round at each concurrency, in
turn, with one offline pass per round; texts/s are medians over the rounds, latencies pooled.

    python -m benchmarks.serving --texts ../shared/data/trec/test.jsonl --concurrency 1,8,32,128
    python -m benchmarks.serving --texts ../shared/data/trec/test.jsonl --overload [--baseline-tree DIR]

--overload: rounds of, per server, the saturation rate (closed loop, concurrency 32), then 2x
that rate from our open-loop client and from `hey` (Debian's Go load generator, where installed);
then the server CPU of a refusal, from its headers and after its body is parsed, on servers held
full. Goodput (200s a second) over the saturation rate, 5xx and lost requests; medians.

Without --model it exports a small random-weight student (d_model 128, 2 layers, its tokenizer
trained on the texts) to bench_results/serving-student-d<d>-l<layers>.onnx (that needs the
training install). The FastAPI peer row (benchmarks/peers/fastapi_peer.py) needs the bench extra.
A table goes to stdout, everything to bench_results/serving-<model>-<time>.json
(--overload: serving-overload-<model>-<time>.json).
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

from benchmarks.harness.cpu import tree_cpu_seconds, tree_rss_kib
from benchmarks.harness.data import DATA_ROOT, REPO, read_texts
from benchmarks.harness.models import random_student
from benchmarks.harness.results import OUT, Results
from benchmarks.peers import fastapi_peer


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


def start_server(model: Path, flags: list[str], cores: str | None, peer: bool = False,
                 tree: Path | None = None) -> tuple[subprocess.Popen, int]:
    """`tfm-cls serve MODEL` with `flags` (or, with `peer`, the FastAPI peer of peers/fastapi_peer.py)
    on a free loopback port, pinned to `cores`; returns once /health answers 200. `tree`: run the
    tfm_cls package of that source tree instead (the process starts there, so it imports that one)."""
    port = free_port()
    env = dict(os.environ)
    if peer:
        env.update(TFM_CLS_PEER_MODEL=str(model), TFM_CLS_PEER_THREADS=flags[flags.index("--threads") + 1])
        cmd = [sys.executable, "-m", "uvicorn", "--factory", "benchmarks.peers.fastapi_peer:create_app", "--app-dir",
               str(REPO), "--port", str(port), "--log-level", "warning", "--no-access-log"]
    else:
        cmd = [sys.executable, "-m", "tfm_cls.cli", "serve", str(model), "--port", str(port), "--log-level", "warning",
               *flags]
    if cores and shutil.which("taskset"):
        cmd = ["taskset", "-c", cores, *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tree)
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
                pid: int | None = None, bodies: list[bytes] | None = None) -> dict:
    """One cell: `concurrency` closed-loop connections for `requests` or `seconds` at most; with the
    server's `pid`, the CPU time it spent per answered request (its share of a loaded core shows in
    texts/s, its cost of a request here). `bodies`: these instead of one text a request."""
    bodies = bodies or [json.dumps({"inputs": t, "truncate": True}).encode() for t in texts]
    latencies: list[float] = []
    errors: dict[int, int] = {}
    counter = {"sent": 0}

    async def run():
        until = time.monotonic() + seconds
        await asyncio.gather(*(_connection(port, bodies, counter, requests, until, latencies, errors)
                               for _ in range(concurrency)))

    before = batch_stats(port)
    cpu_before = tree_cpu_seconds(pid) if pid else 0.0
    t = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - t
    cpu = tree_cpu_seconds(pid) - cpu_before if pid else None
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


async def _send(port: int, conn, pool: list, cap: dict, body: bytes) -> tuple[int, float, bool]:
    """One request on `conn` (an idle pooled connection; None: open one, already counted in
    cap["open"]): (status, seconds, whether the connection can be reused). Status 0: the
    connection failed (the request is lost). The connection goes back to `pool` after. A pooled
    connection the server has closed meanwhile (uvicorn closes one idle for --timeout-keep-alive,
    5 s) is replaced first, as HTTP clients do (urllib3's is_connection_dropped)."""
    t = time.perf_counter()
    if conn is not None and conn[0].at_eof():
        conn[1].close()
        conn = None
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
            rss.append((round(time.monotonic() - start, 1), tree_rss_kib(pid)))
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


def hey_cell(port: int, body: bytes, rate: float | None, seconds: float, connections: int, cores: str | None,
             processes: int = 8) -> dict:
    """`hey` (a load generator we did not write: Go, Debian package `hey`) sending one text a
    request for `seconds` (-z) over `connections` workers: at `rate` requests/s in all (-q, each
    worker rate / connections), or as fast as answers come (`rate` None). A hey process starts its
    workers' tickers together, so its workers send in bursts, all at once each tick: `processes`
    processes, started a tick / processes apart, interleave their bursts (one process of 256
    workers at 2,000/s sends 256 requests every 128 ms, which an admission bound of 64 refuses
    three quarters of at any load). Their summaries are added up: the statuses, the transport
    errors (lost), the longest duration."""
    per = max(1, connections // processes)
    pace = ["-q", f"{rate / (per * processes):.3f}"] if rate else []
    cmd = ["hey", "-z", f"{seconds:g}s", "-c", str(per), *pace, "-m", "POST", "-T", "application/json",
           "-d", body.decode(), f"http://127.0.0.1:{port}/predict"]
    if cores and shutil.which("taskset"):
        cmd = ["taskset", "-c", cores, *cmd]
    tick = per * processes / rate if rate else 0.0
    procs = []
    for _ in range(processes):
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        time.sleep(tick / processes)
    outs = [p.communicate(timeout=seconds + 60)[0] for p in procs]
    statuses: dict[int, int] = {}
    lost, total = 0, 0.0
    for out in outs:
        for code, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", out):
            statuses[int(code)] = statuses.get(int(code), 0) + int(n)
        if "Error distribution:" in out:
            lost += sum(int(n) for n in re.findall(r"^\s+\[(\d+)\]\s+\S", out.split("Error distribution:")[-1], re.M))
        total = max(total, float(re.search(r"Total:\s+([\d.]+) secs", out).group(1)))
    sent = sum(statuses.values()) + lost
    return {"command": f"{processes} x " + " ".join(cmd), "offered_per_s": round(rate, 1) if rate else None,
            "seconds": round(total, 2), "sent": sent, "statuses": statuses, "lost": lost,
            "sent_per_s": round(sent / total, 1), "accepted_per_s": round(statuses.get(200, 0) / total, 1)}


class Held:
    """A server kept full: `--max-concurrent-requests` inputs sit in its queue, held there by
    --max-wait-ms (the inference thread waits for a batch to fill), sent on raw sockets that stay
    open, so every request in a cell is refused: from its headers when the service is full, or
    after its body is parsed when its inputs do not fit the room left (the path every refusal took
    before)."""

    def __init__(self, model: Path, threads: int, limit: int, held_inputs: int, cores: str | None):
        flags = ["--threads", str(threads), "--max-concurrent-requests", str(limit), "--max-client-batch-size",
                 str(limit), "--max-wait-ms", "900000", "--request-timeout", "1000"]
        self.proc, self.port = start_server(model, flags, cores)
        body = json.dumps({"inputs": ["a held text"] * held_inputs if held_inputs > 1 else "a held text"}).encode()
        self.holder = socket.create_connection(("127.0.0.1", self.port))
        self.holder.sendall(b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        deadline = time.monotonic() + 10
        while metric_sum(scrape(self.port), "te_inflight_inputs") < held_inputs:
            if time.monotonic() > deadline:
                raise RuntimeError("the held request was not admitted")
            time.sleep(0.05)

    def refusal_cost_us(self, body: bytes, seconds: float, client_cores: str | None) -> dict:
        """Closed loop (concurrency 32) of `body` for `seconds`, by hey where it is installed (our
        Python client sends fewer requests a second, and a server that is woken for fewer requests
        at a time spends more per request): the server CPU microseconds per refused request. Every
        answer must be a 429."""
        cpu = tree_cpu_seconds(self.proc.pid)
        if shutil.which("hey"):
            cell = hey_cell(self.port, body, None, seconds, 32, client_cores)
            statuses = cell["statuses"]
        else:
            cell = closed_loop(self.port, [], 32, 10**9, seconds, bodies=[body])
            statuses = {**cell["errors"], **({200: cell["requests"]} if cell["requests"] else {})}
        refused = sum(statuses.values())
        if set(statuses) != {429}:
            raise RuntimeError(f"a refusal cell got other answers than 429: {statuses}")
        return {"refused": refused, "refused_per_s": round(refused / cell["seconds"], 1),
                "server_cpu_us_per_refusal": round(1e6 * (tree_cpu_seconds(self.proc.pid) - cpu) / refused, 1)}

    def close(self) -> None:
        self.holder.close()
        self.proc.terminate()
        self.proc.wait(30)


def overload_cells(args, texts: list[str], port: int, pid: int, client_cores: str | None) -> dict:
    """One server's cells of a round: the saturation rate (closed loop, concurrency 32), then our
    open loop and hey at --overload-factor x that rate, with the server's cores used in each."""
    saturation = closed_loop(port, texts, 32, args.requests, args.seconds, pid)
    saturation.pop("latencies")
    rate = args.overload_factor * saturation["texts_per_s"]
    cpu = tree_cpu_seconds(pid)
    ours = open_loop(port, pid, texts, rate, args.overload_seconds, int(rate * args.overload_seconds) + 1,
                     args.max_connections)
    ours["server_cores_used"] = round((tree_cpu_seconds(pid) - cpu) / ours["seconds"], 2)
    hey = None
    if shutil.which("hey"):
        body = json.dumps({"inputs": texts[0], "truncate": True}).encode()
        cpu = tree_cpu_seconds(pid)
        hey = hey_cell(port, body, rate, args.overload_seconds, args.max_connections, client_cores)
        hey["server_cores_used"] = round((tree_cpu_seconds(pid) - cpu) / hey["seconds"], 2)
    for cell in (ours, hey):
        if cell is not None:
            cell["fivexx"] = sum(n for code, n in cell["statuses"].items() if code >= 500)
            cell["goodput_ratio"] = round(cell["accepted_per_s"] / saturation["texts_per_s"], 3)
    return {"saturation": saturation, "ours": ours, "hey": hey}


def overload(args, model: Path, texts: list[str], server_cores: str | None, client_cores: str | None) -> int:
    """--rounds rounds, each: every server's cells in turn (this tree's, and --baseline-tree's),
    then the two refusal costs (this tree's servers held full); medians. The checks, on this
    tree's server: goodput at 2x >= 60 % of the saturation rate, no 5xx, none lost, every request
    answered once."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # one descriptor per client connection
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * args.max_connections + 256)), hard))
    flags = ["--threads", str(args.threads), "--request-timeout", str(args.request_timeout),
             "--max-concurrent-requests", str(args.max_concurrent_requests)]
    trees = {"this tree": None, **({f"baseline {args.baseline_tree}": args.baseline_tree} if args.baseline_tree else {})}
    servers, held, rounds = {}, (), []
    try:
        for name, tree in trees.items():
            servers[name] = start_server(model, flags, server_cores, tree=tree)
            closed_loop(servers[name][1], texts, 32, 200, 3.0)  # warm up
        held = (Held(model, args.threads, 1, 1, server_cores), Held(model, args.threads, 2, 1, server_cores))
        one = json.dumps({"inputs": texts[0], "truncate": True}).encode()
        two = json.dumps({"inputs": [texts[0], texts[1]], "truncate": True}).encode()
        for i in range(args.rounds):
            row = {name: overload_cells(args, texts, port, proc.pid, client_cores)
                   for name, (proc, port) in servers.items()}
            row["refused_from_headers"] = held[0].refusal_cost_us(one, args.refusal_seconds, client_cores)
            row["refused_after_parsing"] = held[1].refusal_cost_us(two, args.refusal_seconds, client_cores)
            rounds.append(row)
            print(f"round {i + 1} done", flush=True)
    finally:
        for h in held:
            h.close()
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(30)
    summary = overload_summary(rounds, list(servers))
    print_overload(summary, rounds, list(servers))
    mine = [r["this tree"] for r in rounds]
    checks = {"goodput at 2x >= 60 % of saturation (ours, median)": summary["this tree"]["ours_goodput_ratio"] >= 0.6,
              "no 5xx": all(c["ours"]["fivexx"] == 0 and (c["hey"] or {}).get("fivexx", 0) == 0 for c in mine),
              "none lost": all(c["ours"]["statuses"].get(0, 0) == 0 and (c["hey"] or {}).get("lost", 0) == 0
                               for c in mine),
              "each answered once (client answers == server count)":
                  all(c["ours"]["answered"] == c["ours"]["server_request_count"] for c in mine)}
    if mine[0]["hey"]:
        checks["goodput at 2x >= 60 % of saturation (hey, median)"] = summary["this tree"]["hey_goodput_ratio"] >= 0.6
    for name, ok in checks.items():
        print(f"  {name}: {'yes' if ok else 'NO'}")
    result = {"summary": summary, "rounds": rounds, "checks": checks, "model": str(model), "flags": flags}
    print(f"wrote {Results(args.out, f'serving-overload-{model.stem}').write(result)}")
    return 0 if all(checks.values()) else 1


def _median(values: list) -> float | None:
    return None if not values or None in values else round(statistics.median(values), 3)


def overload_summary(rounds: list[dict], servers: list[str]) -> dict:
    """Medians over the rounds, per server (each round's goodput over its own saturation rate)."""
    out: dict = {}
    for name in servers:
        cells = [r[name] for r in rounds]
        out[name] = {"saturation_per_s": _median([c["saturation"]["texts_per_s"] for c in cells]),
                     "answered_cpu_us": _median([1000 * c["saturation"]["server_cpu_ms_per_request"] for c in cells])}
        for client in ("ours", "hey"):
            got = [c[client] for c in cells if c[client]]
            if got:
                out[name].update({f"{client}_{key}": _median([g[field] for g in got]) for key, field in (
                    ("offered_per_s", "rate" if client == "ours" else "offered_per_s"), ("sent_per_s", "sent_per_s"),
                    ("goodput_per_s", "accepted_per_s"), ("goodput_ratio", "goodput_ratio"))})
    for cell in ("refused_from_headers", "refused_after_parsing"):
        out[f"{cell}_cpu_us"] = _median([r[cell]["server_cpu_us_per_refusal"] for r in rounds])
    return out


def print_overload(summary: dict, rounds: list[dict], servers: list[str]) -> None:
    print("| server | round | saturation/s (server cores) | client | offered/s | sent/s | 200/s (goodput) | "
          "goodput / saturation | 429 | 5xx | lost | server cores | p99 ms (200) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in servers:
        for i, r in enumerate(rounds, 1):
            sat = r[name]["saturation"]
            for client in ("ours", "hey"):
                cell = r[name][client]
                if cell is None:
                    continue
                lost = cell["statuses"].get(0, 0) if client == "ours" else cell["lost"]
                print(f"| {name} | {i} | {sat['texts_per_s']} ({sat['server_cores_used']}) | {client} | "
                      f"{cell.get('rate', cell.get('offered_per_s'))} | {cell['sent_per_s']} | {cell['accepted_per_s']} | "
                      f"{cell['goodput_ratio']:.2f} | {cell['statuses'].get(429, 0)} | {cell['fivexx']} | {lost} | "
                      f"{cell['server_cores_used']} | {cell.get('p99_ms', '')} |")
    print(json.dumps(summary, indent=1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.serving", description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=Path, default=DATA_ROOT / "trec" / "test.jsonl",
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
    p.add_argument("--overload-seconds", type=float, default=8.0, help="--overload: seconds of each open-loop cell")
    p.add_argument("--refusal-seconds", type=float, default=2.0, help="--overload: seconds of each refusal-cost cell")
    p.add_argument("--baseline-tree", type=Path,
                   help="--overload: also measure the server of this source tree in the same rounds (e.g. the "
                        "previous commit: git archive HEAD tfm_cls | tar -x -C /tmp/base)")
    p.add_argument("--request-timeout", type=float, default=5.0, help="--overload: the server's --request-timeout")
    p.add_argument("--max-connections", type=int, default=256, help="--overload: client connections at most")
    p.add_argument("--max-concurrent-requests", type=int, default=64,
                   help="--overload: the server's admission bound (below --max-connections, so 429s can happen)")
    p.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    texts = read_texts(args.texts, args.limit)
    model = args.model or random_student(texts, args.out / f"serving-student-d{args.d_model}-l{args.layers}.onnx",
                                         args.d_model, args.layers)
    cores = os.cpu_count() or 1
    server_cores = f"0-{max(0, cores - 2)}" if cores > 1 else None
    if cores > 1:
        os.sched_setaffinity(0, {cores - 1})  # the client on the last core, the server on the others
    if args.overload:
        return overload(args, model, texts, server_cores, str(cores - 1) if cores > 1 else None)
    return tables(args, model, texts, server_cores, cores)


def server_configs(args: argparse.Namespace) -> list[tuple[str, list[str], bool]]:
    """(row name, flags, whether it is the FastAPI peer) of every server --servers asks for."""
    configs = []
    for key in args.servers.split(","):
        name, flags = SERVERS[key]
        if key == "on":
            configs += [(f"{name}, {w} worker{'s' * (int(w) > 1)}", ["--workers", w], False)
                        for w in args.workers.split(",")]
        elif key == "fastapi" and fastapi_peer.available():
            print(f"(no FastAPI peer row: {fastapi_peer.available()})")
        else:
            configs.append((name, flags, key == "fastapi"))
    return configs


def summary_row(runs: list[dict], concurrency: int) -> dict:
    """One server and concurrency over the rounds: the median texts/s, latencies pooled."""
    lat = sorted(x for r in runs for x in r.pop("latencies"))

    def pct(q: float) -> float:
        return round(1000 * lat[min(len(lat) - 1, int(q * len(lat)))], 2) if lat else float("nan")

    batches = [r["mean_batch"] for r in runs if r["mean_batch"]]
    errors: dict = {}
    for r in runs:
        for code, n in r["errors"].items():
            errors[code] = errors.get(code, 0) + n
    return {"concurrency": concurrency, "texts_per_s": round(statistics.median(r["texts_per_s"] for r in runs), 1),
            "p50_ms": pct(0.5), "p95_ms": pct(0.95), "p99_ms": pct(0.99),
            "mean_batch": round(statistics.median(batches), 2) if batches else None,
            "server_cpu_ms_per_request": statistics.median(r["server_cpu_ms_per_request"] or 0 for r in runs),
            "server_cores_used": statistics.median(r["server_cores_used"] or 0 for r in runs), "errors": errors,
            "runs": runs}


def tables(args: argparse.Namespace, model: Path, texts: list[str], server_cores: str | None, cores: int) -> int:
    """Every server started first, then measured in paired rounds (each once per round and
    concurrency, one offline pass per round); the table and the JSON."""
    levels = [int(c) for c in args.concurrency.split(",")]
    core_set = set(range(max(1, cores - 1))) if cores > 1 else None
    servers = []
    try:
        for name, flags, peer in server_configs(args):  # all started first (idle ones cost nothing)
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
        rows = [summary_row(cells[(name, c)], c) for c in levels]
        for r in rows:
            print(f"| {name} | {r['concurrency']} | {r['texts_per_s']} | {r['texts_per_s'] / offline_rate:.2f} | "
                  f"{r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['mean_batch'] or ''} | "
                  f"{r['server_cpu_ms_per_request']:.2f} | {r['server_cores_used']:.2f} | {r['errors'] or ''} |")
        results["servers"].append({"name": name, "flags": flags, "rows": rows})
    print(f"wrote {Results(args.out, f'serving-{model.stem}').write(results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
