"""Inference speed: torch eager and torch's fast path against onnxruntime fp32, fused and int8.

Torch eager, torch's nn.TransformerEncoder fast path, onnxruntime
fp32 (standard ops and with ORT fusions) and onnxruntime int8, on a trained classifier and real
texts (SST-2 test split).

    python -m benchmarks.inference --data-root ../shared/data [--run runs/sst2] [--quick]

Measured:
  * latency per batch at batch 1 / length 64 and batch 32 / length 128 (real text tokens packed
    to exactly that length, no padding), median of paired rounds (every engine once per round);
  * an ORT settings sweep at batch 1 (graph optimization level, fusions, intra-op threads);
  * end to end texts/s over the test texts, tokenization included, with accuracy;
  * TF-IDF + LinearSVC (tfm_cls.classify.baseline's tfidf-word-svm) predict throughput for reference.
A table goes to stdout and bench_results/inference-<time>.md, everything to the .json beside it.
Without --run a small model is trained on SST-2 first (a few minutes; seconds with --quick).
The machine may be shared: the JSON records the load average before and after. (Batching and
long documents: benchmarks.batching; the runtime against a hand-written loop: benchmarks.hand_loop;
peak memory on large inputs: benchmarks.memory.)
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from torch import nn

from benchmarks.harness.baselines import baseline_row
from benchmarks.harness.data import read_labelled
from benchmarks.harness.models import small_trained_run
from benchmarks.harness.options import add_inference_options
from benchmarks.harness.results import write_results
from benchmarks.harness.timing import paired_rounds

log = logging.getLogger("benchmarks.inference")

SHAPES = [(1, 64), (32, 128)]
ORT_FILES = {"ORT fp32": "plain", "ORT fp32 fused": "fused", "ORT int8": "plain-int8", "ORT int8 fused": "fused-int8"}


# ---- the model in torch ------------------------------------------------------------------------


class FastPathEncoder(nn.Module):
    """Our classifier with its encoder swapped for torch.nn.TransformerEncoder (same state-dict
    keys), which takes torch's fused inference fast path in eval mode under inference_mode."""

    @staticmethod
    def build(model: nn.Module) -> nn.Module:
        cfg = model.config
        layer = nn.TransformerEncoderLayer(
            cfg["d_model"],
            cfg["nhead"],
            cfg["dim_feedforward"],
            dropout=0.0,
            activation=cfg["activation"],
            layer_norm_eps=cfg["layer_norm_eps"],
            batch_first=True,
            norm_first=cfg["norm_first"],
        )
        norm = nn.LayerNorm(cfg["d_model"], eps=cfg["layer_norm_eps"]) if cfg["norm_first"] else None
        encoder = nn.TransformerEncoder(layer, cfg["num_layers"], norm=norm, enable_nested_tensor=not cfg["norm_first"])
        encoder.load_state_dict(model.encoder.state_dict())  # keys are torch's: strict load proves it
        fast = copy.deepcopy(model)
        fast.encoder = encoder
        return fast.eval()


def packed_batch(tokenizer, texts: list[str], batch: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """[batch, length] ids of real text: consecutive texts' tokens packed, [CLS] ... [SEP] around."""
    tok = copy.deepcopy(tokenizer)
    tok.no_truncation()
    tok.no_padding()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    stream: list[int] = []
    for enc in tok.encode_batch(texts[: batch * length], add_special_tokens=False):
        stream.extend(enc.ids)
        if len(stream) >= batch * (length - 2):
            break
    rows = [[cls_id, *stream[i * (length - 2) : (i + 1) * (length - 2)], sep_id] for i in range(batch)]
    ids = np.array(rows, dtype=np.int64)
    return ids, np.ones_like(ids)


# ---- engines ---------------------------------------------------------------------------------


def ort_session(path: Path, threads: int, level: str = "all", spin: bool = True) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if not spin:  # idle worker threads sleep instead of spin-waiting: kinder to a shared machine
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def torch_runner(model: nn.Module, ids: np.ndarray, mask: np.ndarray) -> Callable[[], object]:
    ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)

    def run():
        with torch.inference_mode():
            return model(ids_t, mask_t)

    return run


def ort_runner(session: ort.InferenceSession, ids: np.ndarray, mask: np.ndarray) -> Callable[[], object]:
    feeds = {"input_ids": ids, "attention_mask": mask}
    return lambda: session.run(["logits"], feeds)


def optimized_ops(path: Path, work_dir: Path) -> dict[str, int]:
    """Op counts of the graph as onnxruntime runs it after its own (level ALL) optimizations."""
    import onnx

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(work_dir / f"{path.stem}.ort-optimized.onnx")
    ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    nodes = onnx.load(options.optimized_model_filepath).graph.node
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def profile_ops(path: Path, ids: np.ndarray, mask: np.ndarray, work_dir: Path, runs: int = 50) -> dict[str, float]:
    """Share of kernel time per op type (onnxruntime's profiler, one thread)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = str(work_dir / f"profile_{path.stem}")
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    for _ in range(runs):
        session.run(["logits"], {"input_ids": ids, "attention_mask": mask})
    events = json.loads(Path(session.end_profiling()).read_text())
    per_op: dict[str, float] = {}
    for ev in events:
        if ev.get("cat") == "Node" and ev.get("name", "").endswith("_kernel_time"):
            op = ev.get("args", {}).get("op_name", "?")
            per_op[op] = per_op.get(op, 0.0) + ev.get("dur", 0)
    total = sum(per_op.values()) or 1.0
    return {op: round(100 * us / total, 1) for op, us in sorted(per_op.items(), key=lambda kv: -kv[1])[:10]}


# ---- end to end --------------------------------------------------------------------------------


def torch_end_to_end(model: nn.Module, tokenizer, texts: list[str], batch_size: int) -> np.ndarray:
    """Tokenize, sort by length, batch, run: the same steps as export/infer.py, in torch."""
    tok = copy.deepcopy(tokenizer)
    tok.no_padding()
    encodings = tok.encode_batch(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    pred = np.empty(len(texts), dtype=np.int64)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            length = max(len(encodings[i].ids) for i in rows)
            ids = torch.zeros(len(rows), length, dtype=torch.long)
            mask = torch.zeros(len(rows), length, dtype=torch.long)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = torch.tensor(encodings[i].ids)
                mask[r, :n] = 1
            pred[rows] = model(ids, mask).argmax(-1).numpy()
    return pred


def time_interleaved(fns: dict[str, Callable[[], object]], min_seconds: float, min_rounds: int) -> dict[str, dict]:
    """Median and p90 latency of each engine over paired rounds (3 warm-up calls each; at least
    `min_rounds` rounds and `min_seconds`, at most 20 x min_rounds rounds)."""
    rounds = paired_rounds(fns, min_rounds, warmup=3, min_seconds=min_seconds)
    return {name: {"median_ms": 1000 * rounds.median(name), "p90_ms": 1000 * rounds.percentile(name, 90),
                   "runs": len(rounds.wall[name])} for name in fns}


# ---- the measurements --------------------------------------------------------------------------


def exports(run_dir: Path, model: nn.Module, work_dir: Path) -> dict[str, Path]:
    """The run exported with standard ops and ORT-fused (each verified against the model), and both int8."""
    from tfm_cls.export.exporter import export_run
    from tfm_cls.export.quantize import quantize_model
    from tfm_cls.export.verify import verify

    paths = {"plain": export_run(run_dir, work_dir / "plain.onnx", fuse=False),
             "fused": export_run(run_dir, work_dir / "fused.onnx", fuse=True)}
    for path in paths.values():
        verify(model, path, providers=["CPUExecutionProvider"])
    paths["plain-int8"] = quantize_model(paths["plain"], work_dir / "plain.int8.onnx")
    paths["fused-int8"] = quantize_model(paths["fused"], work_dir / "fused.int8.onnx")
    return paths


def latency(model: nn.Module, fast: nn.Module, tokenizer, pack_texts: list[str], paths: dict[str, Path],
            threads: int, budget: dict[int, tuple[float, int]]) -> dict:
    """Latency at the fixed SHAPES of every engine, after checking the fast path gives our logits."""
    out = {}
    for batch, length in SHAPES:
        ids, mask = packed_batch(tokenizer, pack_texts, batch, length)
        key = f"batch {batch} / length {length}"
        engines = {"torch eager": torch_runner(model, ids, mask), "torch nn fast path": torch_runner(fast, ids, mask),
                   **{name: ort_runner(ort_session(paths[file], threads), ids, mask) for name, file in ORT_FILES.items()}}
        with torch.inference_mode():  # the fast path must give our model's logits
            ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
            diff = float((fast(ids_t, mask_t) - model(ids_t, mask_t)).abs().max())
        if diff > 1e-4:
            raise RuntimeError(f"nn.TransformerEncoder fast path differs from our model by {diff:.3g}")
        timings = time_interleaved(engines, *budget[batch])
        out[key] = {"fast_path_max_abs_diff": diff, **timings}
        for name, r in timings.items():
            log.info("%s  %-20s %.2f ms", key, name, r["median_ms"])
    return out


def ort_sweep(model: nn.Module, ids: np.ndarray, mask: np.ndarray, paths: dict[str, Path], threads: int,
              budget: tuple[float, int]) -> dict[str, float]:
    """Median ms at batch 1 of every ORT file, optimization level and thread count (1, --threads,
    all cores), torch eager beside each thread count."""
    sweep_ms = {}
    for t in sorted({1, threads, os.cpu_count() or 1}):
        torch.set_num_threads(t)
        plural = "s" * (t > 1)
        sweep = {f"(torch eager / {t} thread{plural})": torch_runner(model, ids, mask)}
        for variant in ("plain", "fused", "plain-int8", "fused-int8"):
            for level in ("disabled", "basic", "all"):
                sweep[f"{variant} / {level} / {t} thread{plural}"] = ort_runner(ort_session(paths[variant], t, level),
                                                                                ids, mask)
            if t > 1:
                sweep[f"{variant} / all / {t} threads / no spinning"] = ort_runner(
                    ort_session(paths[variant], t, "all", spin=False), ids, mask)
        seconds, rounds = budget
        sweep_ms.update({name: r["median_ms"] for name, r in time_interleaved(sweep, seconds / 2, rounds).items()})
    torch.set_num_threads(threads)
    return sweep_ms


def end_to_end(model: nn.Module, fast: nn.Module, tokenizer, test, paths: dict[str, Path], threads: int,
               train) -> dict:
    """texts/s over the test texts, tokenization included, and accuracy: torch, ORT (the runtime's
    Classifier, batches of 32), and the TF-IDF + LinearSVC baseline's predict."""
    from tfm_cls.runtime.session import Classifier

    texts, y = test.texts, test.targets
    e2e = {}
    for name, m in (("torch eager", model), ("torch nn fast path", fast)):
        start = time.perf_counter()
        pred = torch_end_to_end(m, tokenizer, texts, 32)
        e2e[name] = {"texts_per_s": len(texts) / (time.perf_counter() - start), "accuracy": float((pred == y).mean())}
    for name, key in ORT_FILES.items():
        clf = Classifier(str(paths[key]), threads=threads)
        clf.predict_proba(texts[:64])  # warm-up
        start = time.perf_counter()
        pred = clf.predict_proba(texts, 32)[0].argmax(1)
        e2e[name] = {"texts_per_s": len(texts) / (time.perf_counter() - start), "accuracy": float((pred == y).mean())}
    row, fitted = baseline_row("tfidf-word-svm", train, None, test)
    fitted.predict(texts[:50])  # warm-up
    start = time.perf_counter()
    pred = fitted.predict(texts)
    e2e["TF-IDF + LinearSVC"] = {"texts_per_s": len(texts) / (time.perf_counter() - start),
                                 "accuracy": float((pred == y).mean())}
    return e2e


def targets(results: dict) -> dict:
    """The issue's targets: ORT fp32 2x and int8 3x torch eager at batch 1, int8 within 0.5 points."""
    b1, e2e = results["latency"]["batch 1 / length 64"], results["end_to_end"]
    fp32_x = b1["torch eager"]["median_ms"] / b1["ORT fp32"]["median_ms"]
    int8_x = b1["torch eager"]["median_ms"] / b1["ORT int8"]["median_ms"]
    drop = 100 * (e2e["ORT fp32"]["accuracy"] - e2e["ORT int8"]["accuracy"])
    return {
        "ORT fp32 vs torch eager, batch 1": {"speedup": fp32_x, "target": 2.0, "met": fp32_x >= 2.0},
        "ORT int8 vs torch eager, batch 1": {"speedup": int8_x, "target": 3.0, "met": int8_x >= 3.0},
        "int8 accuracy drop (points)": {"drop": drop, "target": 0.5, "met": drop <= 0.5},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.inference", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_inference_options(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    from tfm_cls.runs import load_run

    torch.set_num_threads(args.threads)
    # (seconds, rounds) at least, per shape
    budget = {1: (0.5, 5), 32: (0.5, 2)} if args.quick else {1: (5.0, 50), 32: (10.0, 8)}
    data_dir = args.data_root / args.dataset
    if not (data_dir / "test.jsonl").is_file():
        p.error(f"{data_dir / 'test.jsonl'} not found: pass --data-root (the folder holding {args.dataset}/test.jsonl)")
    results: dict = {"machine": {"cpu_count": os.cpu_count(), "threads": args.threads, "platform": platform.platform(),
                                 "torch": torch.__version__, "onnxruntime": ort.__version__,
                                 "load_before": os.getloadavg()},
                     "quick": args.quick}
    with tempfile.TemporaryDirectory(prefix="bench_infer_") as work:
        work_dir = Path(work)
        run_dir = args.run or small_trained_run(data_dir, work_dir / "run", args.quick)
        run = load_run(run_dir)
        model, tokenizer = run.model, run.tokenizer
        test = read_labelled(data_dir / "test.jsonl", limit=300 if args.quick else None)
        pack_texts = read_labelled(data_dir / "test.jsonl").texts  # enough tokens for 32 x 128 in any mode
        paths = exports(run_dir, model, work_dir)
        fast = FastPathEncoder.build(model)
        results["model"] = {"run": str(run_dir) if args.run else "trained by the benchmark", **model.config}
        results["latency"] = latency(model, fast, tokenizer, pack_texts, paths, args.threads, budget)
        # Where the time goes: ORT settings at batch 1, the ops ORT's own optimizer produces, and a per-op profile.
        ids, mask = packed_batch(tokenizer, pack_texts, 1, 64)
        results["ort_sweep"] = ort_sweep(model, ids, mask, paths, args.threads, budget[1])
        for variant in ("plain", "plain-int8"):
            results.setdefault("ort_optimized_ops", {})[variant] = optimized_ops(paths[variant], work_dir)
            results.setdefault("ort_profile", {})[variant] = profile_ops(paths[variant], ids, mask, work_dir)
        train = read_labelled(data_dir / "train.jsonl", limit=5000 if args.quick else None)
        results["end_to_end"] = end_to_end(model, fast, tokenizer, test, paths, args.threads, train)
        results["texts"] = len(test.texts)
        results["targets"] = targets(results)
        results["machine"]["load_after"] = os.getloadavg()

    table = render(results)
    print(table)
    written = write_results(args.out, "inference", results, table, args.quick)
    log.info("wrote %s and %s", written, written.with_suffix(".md"))
    return 0


def render(results: dict) -> str:
    machine = results["machine"]
    lines = [f"threads {machine['threads']}, load {machine['load_before'][0]:.1f} -> "
             f"{machine['load_after'][0]:.1f}{' (QUICK: few runs, tiny model)' if results['quick'] else ''}", ""]
    for shape, row in results["latency"].items():
        base = row["torch eager"]["median_ms"]
        lines.append(f"| {shape} | median ms | speed-up vs torch eager |")
        lines.append("|---|---:|---:|")
        for name, r in row.items():
            if isinstance(r, dict):
                lines.append(f"| {name} | {r['median_ms']:.2f} | {base / r['median_ms']:.2f}x |")
        lines.append("")
    lines += ["| ORT variant / optimization level / threads (batch 1, length 64) | median ms |", "|---|---:|"]
    lines += [f"| {name} | {ms:.2f} |" for name, ms in results["ort_sweep"].items()]
    for variant, shares in results.get("ort_profile", {}).items():
        lines += ["", f"ORT {variant}, share of kernel time by op (batch 1, length 64, 1 thread): "
                  + ", ".join(f"{op} {pct}%" for op, pct in shares.items())]
    for variant, ops in results.get("ort_optimized_ops", {}).items():
        lines += [f"ORT {variant} after onnxruntime's own level-ALL optimization: "
                  + ", ".join(f"{op} x{n}" for op, n in list(ops.items())[:12])]
    lines += ["", f"| end to end, {results['texts']} test texts, tokenization included | texts/s | accuracy |", "|---|---:|---:|"]
    lines += [f"| {name} | {r['texts_per_s']:.0f} | {100 * r['accuracy']:.2f}% |" for name, r in results["end_to_end"].items()]
    lines += ["", "Targets:"]
    for name, t in results["targets"].items():
        value = t.get("speedup", t.get("drop"))
        lines.append(f"  {name}: {value:.2f} (target {t['target']}) {'met' if t['met'] else 'NOT met'}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
