"""Inference speed, side by side: torch eager, torch's nn.TransformerEncoder fast path, onnxruntime
fp32 (standard ops and with ORT fusions) and onnxruntime int8, on a trained classifier and real
texts (SST-2 test split).

    python benchmarks/bench_infer.py --data-root ../shared/data [--run runs/sst2] [--quick]

Measured:
  * latency per batch at batch 1 / length 64 and batch 32 / length 128 (real text tokens packed
    to exactly that length, no padding), median of repeated runs;
  * an ORT settings sweep at batch 1 (graph optimization level, fusions, intra-op threads);
  * end to end texts/s over the test texts, tokenization included, with accuracy;
  * TF-IDF + LinearSVC predict throughput for reference.
A table goes to stdout and bench_results/bench_infer.md, everything to bench_results/bench_infer.json.
Without --run a small model is trained on SST-2 first (a few minutes; seconds with --quick).
The machine may be shared: the JSON records the load average before and after.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tfm_cls.export.exporter import export_run  # noqa: E402
from tfm_cls.export.quantize import quantize_model  # noqa: E402
from tfm_cls.export.verify import verify  # noqa: E402

from tfm_cls.runs import load_run  # noqa: E402
from tfm_cls.runtime.session import Classifier  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import write_results  # noqa: E402

log = logging.getLogger("bench_infer")

SHAPES = [(1, 64), (32, 128)]


# ---- data and model ----------------------------------------------------------------------------


def read_jsonl(path: Path, limit: int | None = None) -> tuple[list[str], list[int]]:
    texts, labels = [], []
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts.append(row["text"])
            labels.append(int(row["label"]))
            if limit and len(texts) >= limit:
                break
    return texts, labels


def train_small(data_dir: Path, run_dir: Path, quick: bool) -> Path:
    """A small classifier on SST-2 with the project's own training code."""
    from tfm_cls.config import ClassifierConfig, DataConfig, TokenizerConfig, TrainConfig
    from tfm_cls.train import train

    cfg = ClassifierConfig(
        name="bench-infer",
        run_dir=str(run_dir),
        data=DataConfig(path=str(data_dir), max_train_samples=3000 if quick else None),
        tokenizer=TokenizerConfig(vocab_size=8000, max_length=128),
        train=TrainConfig(
            epochs=1,
            max_steps=40 if quick else None,
            max_minutes=None if quick else 3.0,
            batch_size=32,
            lr=1e-3,
            progress=False,
            eval_every=None,
        ),
    )
    log.info("training a small model on %s into %s", data_dir, run_dir)
    train(cfg, overwrite=True)
    return run_dir


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


# ---- timing ------------------------------------------------------------------------------------


def time_interleaved(
    fns: dict[str, Callable[[], object]], min_seconds: float, min_rounds: int, warmup: int = 3
) -> dict[str, dict[str, float]]:
    """Median latency of each function, run round-robin (one call of each per round) so that a
    change of load on a shared machine hits every engine alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    start, rounds = time.perf_counter(), 0
    while rounds < min_rounds or (time.perf_counter() - start < min_seconds and rounds < 20 * min_rounds):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
        rounds += 1
    return {
        name: {"median_ms": 1000 * statistics.median(ts), "p90_ms": 1000 * float(np.percentile(ts, 90)), "runs": len(ts)}
        for name, ts in times.items()
    }


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
    """Tokenize, sort by length, batch, run: the same recipe as export/infer.py, in torch."""
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


def tfidf_svm(train_texts: list[str], train_labels: list[int], texts: list[str], labels: list[int]) -> dict:
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import LinearSVC

    from tfm_cls.classify.baseline import tfidf_vectorizer

    pipe = make_pipeline(tfidf_vectorizer(min_df=2), LinearSVC())
    pipe.fit(train_texts, train_labels)
    pipe.predict(texts[:50])
    start = time.perf_counter()
    pred = pipe.predict(texts)
    seconds = time.perf_counter() - start
    return {"texts_per_s": len(texts) / seconds, "accuracy": float((pred == np.array(labels)).mean())}


# ---- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", default="../shared/data")
    p.add_argument("--dataset", default="sst2")
    p.add_argument("--run", help="trained run directory (default: train a small one first)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch and onnxruntime intra-op threads of the main tables (default 1: on a shared machine more "
        "threads than idle cores make torch's OpenMP spin-waits explode); the sweep also tries all cores",
    )
    p.add_argument("--quick", action="store_true", help="few texts and runs, tiny training: checks the script works")
    p.add_argument("--out", default="bench_results")
    p.add_argument("--batching-only", action="store_true",
                   help="only the end-to-end table of fixed vs length-sorted token-budget batching and the cost "
                        "vs document length table (docs/long-documents.md)")
    p.add_argument("--memory", action="store_true",
                   help="only peak memory of export/infer.py and tfm-cls predict on 10k .. 1M input lines")
    p.add_argument("--hand-loop", action="store_true",
                   help="only the runtime's Classifier against the hand-written loop (encode_batch + session.run) "
                        "over the same .onnx, paired passes (benchmarks/hand_loop.py)")
    p.add_argument("--onnx", help="--hand-loop: comma-separated .onnx files (default: export MiniLM and a student)")
    p.add_argument("--hand-datasets", default="trec,sst2", help="--hand-loop: datasets whose test texts are run")
    p.add_argument("--limit", type=int, help="--hand-loop: first N test texts (default all)")
    p.add_argument("--passes", type=int, default=5, help="--hand-loop: paired rounds (default 5)")
    args = p.parse_args(argv)
    if args.hand_loop:
        import hand_loop

        return hand_loop.main(args)
    if args.batching_only:
        return batching_main(args)
    if args.memory:
        return memory_main(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(args.threads)
    # (seconds, rounds) at least, per shape
    budget = {1: (0.5, 5), 32: (0.5, 2)} if args.quick else {1: (5.0, 50), 32: (10.0, 8)}
    data_dir = Path(args.data_root) / args.dataset
    if not (data_dir / "test.jsonl").is_file():
        log.error("%s not found: pass --data-root (the folder holding %s/test.jsonl)", data_dir / "test.jsonl", args.dataset)
        return 2
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="bench_infer_") as work:
        work_dir = Path(work)
        run_dir = Path(args.run) if args.run else train_small(data_dir, work_dir / "run", args.quick)
        run = load_run(run_dir)
        model, tokenizer = run.model, run.tokenizer
        texts, labels = read_jsonl(data_dir / "test.jsonl", limit=300 if args.quick else None)
        y = np.array(labels)
        pack_texts = read_jsonl(data_dir / "test.jsonl")[0]  # enough tokens for 32 x 128 in any mode

        paths = {
            "plain": export_run(run_dir, work_dir / "plain.onnx", fuse=False),
            "fused": export_run(run_dir, work_dir / "fused.onnx", fuse=True),
        }
        for path in paths.values():
            verify(model, path, providers=["CPUExecutionProvider"])
        paths["plain-int8"] = quantize_model(paths["plain"], work_dir / "plain.int8.onnx")
        paths["fused-int8"] = quantize_model(paths["fused"], work_dir / "fused.int8.onnx")
        fast = FastPathEncoder.build(model)

        results: dict = {
            "machine": {
                "cpu_count": os.cpu_count(),
                "threads": args.threads,
                "platform": platform.platform(),
                "torch": torch.__version__,
                "onnxruntime": ort.__version__,
                "load_before": load_before,
            },
            "model": {"run": str(run_dir) if args.run else "trained by the benchmark", **model.config},
            "quick": args.quick,
            "latency": {},
            "ort_sweep": {},
            "end_to_end": {},
        }

        # Latency at fixed shapes.
        for batch, length in SHAPES:
            ids, mask = packed_batch(tokenizer, pack_texts, batch, length)
            key = f"batch {batch} / length {length}"
            engines = {
                "torch eager": torch_runner(model, ids, mask),
                "torch nn fast path": torch_runner(fast, ids, mask),
                "ORT fp32": ort_runner(ort_session(paths["plain"], args.threads), ids, mask),
                "ORT fp32 fused": ort_runner(ort_session(paths["fused"], args.threads), ids, mask),
                "ORT int8": ort_runner(ort_session(paths["plain-int8"], args.threads), ids, mask),
                "ORT int8 fused": ort_runner(ort_session(paths["fused-int8"], args.threads), ids, mask),
            }
            with torch.inference_mode():  # the fast path must give our model's logits
                ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
                diff = float((fast(ids_t, mask_t) - model(ids_t, mask_t)).abs().max())
            if diff > 1e-4:
                raise RuntimeError(f"nn.TransformerEncoder fast path differs from our model by {diff:.3g}")
            timings = time_interleaved(engines, *budget[batch])
            results["latency"][key] = {"fast_path_max_abs_diff": diff, **timings}
            for name, r in timings.items():
                log.info("%s  %-20s %.2f ms", key, name, r["median_ms"])

        # Where the time goes: ORT settings at batch 1, the ops ORT's own optimizer produces, and a
        # per-op profile.
        ids, mask = packed_batch(tokenizer, pack_texts, 1, 64)
        threads = sorted({1, args.threads, os.cpu_count() or 1})
        for t in threads:
            torch.set_num_threads(t)
            sweep = {f"(torch eager / {t} thread{'s' * (t > 1)})": torch_runner(model, ids, mask)}
            for variant in ("plain", "fused", "plain-int8", "fused-int8"):
                for level in ("disabled", "basic", "all"):
                    name = f"{variant} / {level} / {t} thread{'s' * (t > 1)}"
                    sweep[name] = ort_runner(ort_session(paths[variant], t, level), ids, mask)
                if t > 1:
                    sweep[f"{variant} / all / {t} threads / no spinning"] = ort_runner(
                        ort_session(paths[variant], t, "all", spin=False), ids, mask
                    )
            seconds, rounds = budget[1]
            timings = time_interleaved(sweep, seconds / 2, rounds)
            results["ort_sweep"].update({name: r["median_ms"] for name, r in timings.items()})
        torch.set_num_threads(args.threads)
        for variant in ("plain", "plain-int8"):
            results.setdefault("ort_optimized_ops", {})[variant] = optimized_ops(paths[variant], work_dir)
            results.setdefault("ort_profile", {})[variant] = profile_ops(paths[variant], ids, mask, work_dir)

        # End to end: texts/s including tokenization, and accuracy.
        e2e = results["end_to_end"]
        for name, m in (("torch eager", model), ("torch nn fast path", fast)):
            start = time.perf_counter()
            pred = torch_end_to_end(m, tokenizer, texts, 32)
            e2e[name] = {"texts_per_s": len(texts) / (time.perf_counter() - start), "accuracy": float((pred == y).mean())}
        for name, key in (("ORT fp32", "plain"), ("ORT fp32 fused", "fused"), ("ORT int8", "plain-int8"), ("ORT int8 fused", "fused-int8")):
            clf = Classifier(str(paths[key]), threads=args.threads)
            clf.predict_proba(texts[:64])  # warm-up
            start = time.perf_counter()
            pred = clf.predict_proba(texts, 32)[0].argmax(1)
            e2e[name] = {"texts_per_s": len(texts) / (time.perf_counter() - start), "accuracy": float((pred == y).mean())}
        train_texts, train_labels = read_jsonl(data_dir / "train.jsonl", limit=5000 if args.quick else None)
        e2e["TF-IDF + LinearSVC"] = tfidf_svm(train_texts, train_labels, texts, labels)
        results["texts"] = len(texts)
        b1 = results["latency"]["batch 1 / length 64"]
        fp32_x = b1["torch eager"]["median_ms"] / b1["ORT fp32"]["median_ms"]
        int8_x = b1["torch eager"]["median_ms"] / b1["ORT int8"]["median_ms"]
        drop = 100 * (e2e["ORT fp32"]["accuracy"] - e2e["ORT int8"]["accuracy"])
        results["targets"] = {
            "ORT fp32 vs torch eager, batch 1": {"speedup": fp32_x, "target": 2.0, "met": fp32_x >= 2.0},
            "ORT int8 vs torch eager, batch 1": {"speedup": int8_x, "target": 3.0, "met": int8_x >= 3.0},
            "int8 accuracy drop (points)": {"drop": drop, "target": 0.5, "met": drop <= 0.5},
        }
        results["machine"]["load_after"] = os.getloadavg()

    table = render(results)
    print(table)
    written = write_results(args.out, "bench_infer", results, table, args.quick)
    log.info("wrote %s and %s", written, written.with_suffix(".md"))
    return 0


# ---- batching and long documents (issue 16) ----------------------------------------------------------


def _timed(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    """Median seconds of `repeats` calls, and the last result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def batching_main(args) -> int:
    """texts/s end to end (tokenization included) on the sst2 test texts: the path before issue 16
    (length-sorted fixed batches: 32 texts per batch in buffers of 1024 for ORT, 64 for torch)
    against length-sorted token-budget batches, per thread count, with the largest probability
    difference; then ms/text vs document length, truncation vs chunking."""
    from tfm_cls.classify.predict import classify_texts

    data_dir = Path(args.data_root) / args.dataset
    texts, labels = read_jsonl(data_dir / "test.jsonl", limit=300 if args.quick else None)
    y = np.array(labels)
    repeats = 1 if args.quick else 3
    results: dict = {"machine": {"cpu_count": os.cpu_count(), "load_before": os.getloadavg(),
                                 "torch": torch.__version__, "onnxruntime": ort.__version__}, "e2e": {}, "length": {}}
    with tempfile.TemporaryDirectory(prefix="bench_batching_") as work:
        work_dir = Path(work)
        run_dir = Path(args.run) if args.run else train_small(data_dir, work_dir / "run", quick=True)
        run = load_run(run_dir)
        results["model"] = {"run": str(run_dir) if args.run else "trained by the benchmark (40 steps: speed only)",
                            **run.model.config}
        paths = {"ORT fp32": export_run(run_dir, work_dir / "plain.onnx", fuse=False),
                 "ORT fp32 fused": export_run(run_dir, work_dir / "fused.onnx", fuse=True)}
        paths["ORT int8"] = quantize_model(paths["ORT fp32"], work_dir / "plain.int8.onnx")
        for threads in (1, 2):
            torch.set_num_threads(threads)
            rows: dict = {}
            old = {}
            for engine, path in paths.items():
                for mode, budget in (("fixed 32 unsorted", -1), ("fixed 32 sorted per 1024 (before)", None),
                                     ("tokens 512", 512), ("tokens 1024", 1024), ("tokens 2048", 2048),
                                     ("tokens 4096", 4096)):
                    clf = Classifier(str(path), threads=threads, batching="tokens", max_tokens=max(budget or 1, 1))

                    def go(clf=clf, budget=budget):
                        if budget == -1:  # no sorting at all: batches of 32 in input order
                            ids = clf.encode(texts)[0]
                            return np.concatenate([clf.run(ids[i : i + 32]) for i in range(0, len(ids), 32)])
                        if budget is None:  # the old loop: buffers of 32 x 32 texts, each sorted, batches of 32
                            return np.concatenate([clf.classify(texts[i : i + 1024], 32)[0]
                                                   for i in range(0, len(texts), 1024)])
                        return clf.classify(texts)[0]

                    go()  # warm-up
                    seconds, probs = _timed(go, repeats)
                    if budget is None:
                        old[engine] = probs
                    rows[f"{engine} / {mode}"] = {
                        "texts_per_s": len(texts) / seconds, "accuracy": float((probs.argmax(1) == y).mean()),
                        "probs": probs,
                    }
            for engine in paths:
                for name, r in rows.items():
                    if name.startswith(engine + " /"):
                        r["max_abs_diff_vs_before"] = float(np.abs(r.pop("probs") - old[engine]).max())
            reference = None
            for mode, kwargs in (("fixed 64 (before)", {"batching": "fixed", "batch_size": 64}),
                                 ("tokens 1024", {"batching": "tokens", "max_tokens": 1024}),
                                 ("tokens 4096", {"batching": "tokens", "max_tokens": 4096})):
                def go(kwargs=kwargs):
                    return classify_texts(run, texts, **kwargs)[0]

                go()
                seconds, probs = _timed(go, repeats)
                reference = probs if reference is None else reference
                rows[f"torch eager / {mode}"] = {
                    "texts_per_s": len(texts) / seconds, "accuracy": float((probs.argmax(1) == y).mean()),
                    "max_abs_diff_vs_before": float(np.abs(probs - reference).max()),
                }
            results["e2e"][f"{threads} thread{'s' * (threads > 1)}"] = rows
        torch.set_num_threads(1)
        results["length"] = cost_vs_length(paths["ORT fp32"], texts, repeats)
    results["texts"] = len(texts)
    results["machine"]["load_after"] = os.getloadavg()
    table = render_batching(results)
    print(table)
    written = write_results(args.out, "bench_batching", results, table, args.quick)
    suffix = "_quick" if args.quick else ""
    plot_cost_vs_length(results["length"], written.parent / f"cost_vs_length{suffix}.png")
    log.info("wrote %s and cost_vs_length%s.png", written, suffix)
    return 0


_PEAK = """
import resource, runpy, sys
sys.argv = sys.argv[1:]
if sys.argv[0].endswith(".py"):
    runpy.run_path(sys.argv[0], run_name="__main__")
else:
    runpy.run_module(sys.argv[0], run_name="__main__")
"""
_PEAK_EXIT = "import atexit, resource; atexit.register(lambda: print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))"


def memory_main(args) -> int:
    """Peak resident memory of the two inference paths on 10k, 100k and 1M lines (sst2 test texts
    repeated). A tiny classifier (d_model 16, 1 layer; the sst2-trained tokenizer) keeps a
    1M-line run in minutes: streaming memory does not depend on the model's size."""
    import subprocess

    from tfm_cls.config import ClassifierConfig, DataConfig, TokenizerConfig, save_config
    from tfm_cls.data.tokenizer import save_tokenizer, train_tokenizer
    from tfm_cls.io import write_json
    from tfm_cls.model import TransformerClassifier
    from tfm_cls.training.checkpoint import save_weights

    data_dir = Path(args.data_root) / args.dataset
    texts = read_jsonl(data_dir / "test.jsonl")[0]
    sizes = (2_000, 20_000) if args.quick else (10_000, 100_000, 1_000_000)
    results: dict = {"load_before": os.getloadavg(), "peak_kib": {}}
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as work:
        work_dir = Path(work)
        run_dir = work_dir / "run"
        run_dir.mkdir()
        cfg = ClassifierConfig(data=DataConfig(path=str(data_dir)), tokenizer=TokenizerConfig(vocab_size=8000, max_length=128))
        tokenizer = train_tokenizer(read_jsonl(data_dir / "train.jsonl", limit=20000)[0], cfg.tokenizer)
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
            commands = {"export/infer.py": [str(Path(__file__).resolve().parents[1] / "export" / "infer.py"),
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
    write_results(args.out, "bench_memory", results, table, args.quick)
    return 0


def plot_cost_vs_length(rows: dict, path: Path) -> None:
    """ms per text against document tokens (log-log), truncation vs chunking."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for mode in ("truncation", "chunking"):
        points = [(int(k.split(" / ")[0]), r["ms_per_text"]) for k, r in rows.items() if k.endswith(mode)]
        ax.plot(*zip(*points), marker="o", label=mode)
    ax.set(xscale="log", yscale="log", xlabel="document tokens", ylabel="ms per text (ORT fp32, 1 thread)",
           title="cost vs document length")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cost_vs_length(path: Path, texts: list[str], repeats: int) -> dict:
    """ms per text for documents of 64 .. 4,096 tokens (sst2 texts joined end to end), with head
    truncation to the model's length and with chunking into windows (stride = a quarter)."""
    long_text = " ".join(texts)
    rows = {}
    for tokens in (64, 128, 256, 512, 1024, 2048, 4096):
        clf = Classifier(str(path), threads=1)
        ids = clf.encoder.tokenizer.encode(long_text, add_special_tokens=False)  # untruncated
        piece = ids.offsets[min(tokens, len(ids.offsets)) - 1][1]
        docs = [long_text[:piece]] * max(4, 4096 // tokens)  # 4 .. 64 documents of this length
        for name, policy in (("truncation", {"chunk": False}), ("chunking", {"chunk": True})):
            c = Classifier(str(path), threads=1, long_text=policy)
            c.classify(docs[:2])
            seconds, (_, _, windows) = _timed(lambda c=c, docs=docs: c.classify(docs), repeats)
            rows[f"{tokens} / {name}"] = {"ms_per_text": 1000 * seconds / len(docs), "texts_per_s": len(docs) / seconds,
                                          "windows_per_text": float(np.mean(windows))}
    return rows


def render_batching(results: dict) -> str:
    lines = [f"load {results['machine']['load_before'][0]:.1f} -> {results['machine']['load_after'][0]:.1f}; "
             f"{results['texts']} sst2 test texts, end to end (tokenization included), median of runs", ""]
    for threads, rows in results["e2e"].items():
        lines += [f"| {threads}: engine / batching | texts/s | accuracy | max abs diff vs before |", "|---|---:|---:|---:|"]
        lines += [f"| {name} | {r['texts_per_s']:.0f} | {100 * r['accuracy']:.2f}% | {r['max_abs_diff_vs_before']:.1e} |"
                  for name, r in rows.items()]
        lines.append("")
    lines += ["| document tokens / long-text mode (ORT fp32, 1 thread) | ms/text | texts/s | windows/text |",
              "|---|---:|---:|---:|"]
    lines += [f"| {name} | {r['ms_per_text']:.2f} | {r['texts_per_s']:.1f} | {r['windows_per_text']:.1f} |"
              for name, r in results["length"].items()]
    return "\n".join(lines)


def render(results: dict) -> str:
    lines = [f"threads {results['machine']['threads']}, load {results['machine']['load_before'][0]:.1f} -> "
             f"{results['machine']['load_after'][0]:.1f}{' (QUICK: few runs, tiny model)' if results['quick'] else ''}", ""]
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
    sys.exit(main())
