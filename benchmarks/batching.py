"""Batching: fixed vs token-budget batches end to end, and the cost of long documents (issue 16).

End-to-end texts/s of fixed vs length-sorted token-budget batches, and the cost of
long documents (issue 16).

    python -m benchmarks.batching --data-root ../shared/data [--run runs/sst2] [--quick]
    python -m benchmarks.batching --paired --run runs/sst2-distill [--repeats 7]

The default tables: texts/s end to end (tokenization included) on the sst2 test texts of the path
before issue 16 (length-sorted fixed batches: 32 texts per batch in buffers of 1,024 for ORT, 64
for torch) against length-sorted token-budget batches, at 1 and 2 threads, with the largest
probability difference; then ms per text against document length, head truncation vs chunking
into windows (a figure beside the JSON). Without --run a small model is trained first (40 steps:
speed only). The tables run 1 and 2 threads whatever --threads says (accepted because
`make bench-infer` hands one ARGS to the inference, batching and hand-loop modules).

--paired: issue 16's throughput target, timed in paired rounds: a trained run's ONNX file
(standard ops and ORT-fused) through the ORT path of before issue 16 (buffers of 1,024 texts,
each sorted by length, batches of 32) and today's (token-budget batches); every round runs all
four ways in turn, and the ratio is the median over rounds of (way / old standard-ops path).

Writes bench_results/batching-<time>.json (.md, .png) or batching-paired-<time>.json.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.harness.data import read_labelled, read_texts
from benchmarks.harness.models import small_trained_run
from benchmarks.harness.options import add_inference_options
from benchmarks.harness.results import Results, environment
from benchmarks.harness.timing import median_seconds, paired_rounds

log = logging.getLogger("benchmarks.batching")

ORT_MODES = (("fixed 32 unsorted", -1), ("fixed 32 sorted per 1024 (before)", None), ("tokens 512", 512),
             ("tokens 1024", 1024), ("tokens 2048", 2048), ("tokens 4096", 4096))
"""ORT batching modes: (name, token budget; -1: no sorting, batches of 32 in input order; None:
the loop before issue 16)."""
TORCH_MODES = (("fixed 64 (before)", {"batching": "fixed", "batch_size": 64}),
               ("tokens 1024", {"batching": "tokens", "max_tokens": 1024}),
               ("tokens 4096", {"batching": "tokens", "max_tokens": 4096}))


def before_issue_16(clf, texts: list[str]) -> np.ndarray:
    """The ORT loop before issue 16: buffers of 1,024 texts, each sorted by length, batches of 32."""
    return np.concatenate([clf.classify(texts[i : i + 1024], 32)[0] for i in range(0, len(texts), 1024)])


def ort_rows(paths: dict[str, Path], texts: list[str], targets: np.ndarray, threads: int, repeats: int) -> dict:
    """texts/s, accuracy and the largest probability difference from the loop before issue 16, of
    every ORT file and batching mode."""
    from tfm_cls.runtime.session import Classifier

    rows: dict = {}
    for engine, path in paths.items():
        probs_by_mode = {}
        for mode, budget in ORT_MODES:
            clf = Classifier(str(path), threads=threads, batching="tokens", max_tokens=max(budget or 1, 1))

            def go(clf=clf, budget=budget):
                if budget == -1:  # no sorting at all: batches of 32 in input order
                    ids = clf.encode(texts)[0]
                    return np.concatenate([clf.run(ids[i : i + 32]) for i in range(0, len(ids), 32)])
                return before_issue_16(clf, texts) if budget is None else clf.classify(texts)[0]

            go()  # warm-up
            seconds, probs_by_mode[mode] = median_seconds(go, repeats)
            rows[f"{engine} / {mode}"] = {"texts_per_s": len(texts) / seconds,
                                          "accuracy": float((probs_by_mode[mode].argmax(1) == targets).mean())}
        before = probs_by_mode[ORT_MODES[1][0]]
        for mode, probs in probs_by_mode.items():
            rows[f"{engine} / {mode}"]["max_abs_diff_vs_before"] = float(np.abs(probs - before).max())
    return rows


def torch_rows(run, texts: list[str], targets: np.ndarray, repeats: int) -> dict:
    """The same for torch eager (tfm-cls predict's path), fixed batches of 64 against token budgets."""
    from tfm_cls.classify.predict import classify_texts

    rows, reference = {}, None
    for mode, kwargs in TORCH_MODES:
        def go(kwargs=kwargs):
            return classify_texts(run, texts, **kwargs)[0]

        go()
        seconds, probs = median_seconds(go, repeats)
        reference = probs if reference is None else reference
        rows[f"torch eager / {mode}"] = {"texts_per_s": len(texts) / seconds,
                                         "accuracy": float((probs.argmax(1) == targets).mean()),
                                         "max_abs_diff_vs_before": float(np.abs(probs - reference).max())}
    return rows


def cost_vs_length(path: Path, texts: list[str], repeats: int) -> dict:
    """ms per text for documents of 64 .. 4,096 tokens (the test texts joined end to end), with head
    truncation to the model's length and with chunking into windows (stride = a quarter)."""
    from tfm_cls.runtime.session import Classifier

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
            seconds, (_, _, windows) = median_seconds(lambda c=c, docs=docs: c.classify(docs), repeats)
            rows[f"{tokens} / {name}"] = {"ms_per_text": 1000 * seconds / len(docs), "texts_per_s": len(docs) / seconds,
                                          "windows_per_text": float(np.mean(windows))}
    return rows


def plot_cost_vs_length(rows: dict, path: Path) -> None:
    """ms per text against document tokens (log-log), truncation vs chunking."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    for mode in ("truncation", "chunking"):
        points = [(int(k.split(" / ")[0]), r["ms_per_text"]) for k, r in rows.items() if k.endswith(mode)]
        ax.plot(*zip(*points), marker="o", label=mode)
    ax.set(xscale="log", yscale="log", xlabel="document tokens", ylabel="ms per text (ORT fp32, 1 thread)",
           title="cost vs document length")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def render(results: dict) -> str:
    lines = [f"load {results['load_before'][0]:.1f} -> {results['environment']['load_average'][0]:.1f}; "
             f"{results['texts']} {results['dataset']} test texts, end to end (tokenization included), median of runs", ""]
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


def batching_tables(args: argparse.Namespace) -> int:
    import torch
    from tfm_cls.export.exporter import export_run
    from tfm_cls.export.quantize import quantize_model

    from tfm_cls.runs import load_run

    data_dir = args.data_root / args.dataset
    test = read_labelled(data_dir / "test.jsonl", limit=300 if args.quick else None)
    repeats = 1 if args.quick else 3
    results: dict = {"dataset": args.dataset, "load_before": os.getloadavg(), "torch": torch.__version__, "e2e": {}}
    with tempfile.TemporaryDirectory(prefix="bench_batching_") as work:
        work_dir = Path(work)
        run_dir = args.run or small_trained_run(data_dir, work_dir / "run", quick=True)
        run = load_run(run_dir)
        results["model"] = {"run": str(run_dir) if args.run else "trained by the benchmark (40 steps: speed only)",
                            **run.model.config}
        paths = {"ORT fp32": export_run(run_dir, work_dir / "plain.onnx", fuse=False),
                 "ORT fp32 fused": export_run(run_dir, work_dir / "fused.onnx", fuse=True)}
        paths["ORT int8"] = quantize_model(paths["ORT fp32"], work_dir / "plain.int8.onnx")
        for threads in (1, 2):
            torch.set_num_threads(threads)
            rows = {**ort_rows(paths, test.texts, test.targets, threads, repeats),
                    **torch_rows(run, test.texts, test.targets, repeats)}
            results["e2e"][f"{threads} thread{'s' * (threads > 1)}"] = rows
        torch.set_num_threads(1)
        results["length"] = cost_vs_length(paths["ORT fp32"], test.texts, repeats)
    results.update(texts=len(test.texts), environment=environment())
    table = render(results)
    print(table)
    out = Results(args.out, "batching", args.quick)
    out.write(results, table)
    plot_cost_vs_length(results["length"], out.beside(".png"))
    log.info("wrote %s and %s", out.json, out.beside(".png"))
    return 0


def paired_batching(args: argparse.Namespace) -> int:
    from tfm_cls.export.exporter import export_run

    from tfm_cls.runtime.session import Classifier

    texts = read_texts(args.data_root / args.dataset / "test.jsonl")
    with tempfile.TemporaryDirectory(prefix="bench_paired_") as work:
        graphs = {"standard": export_run(args.run, Path(work) / "plain.onnx", fuse=False),
                  "fused": export_run(args.run, Path(work) / "fused.onnx", fuse=True)}
        clfs = {name: Classifier(str(path), threads=1, batching="tokens", max_tokens=args.max_tokens)
                for name, path in graphs.items()}
        ways = {}
        for graph, clf in clfs.items():
            ways[f"{graph} / before"] = lambda clf=clf: before_issue_16(clf, texts)
            ways[f"{graph} / token budget"] = lambda clf=clf: clf.classify(texts)[0]
        rounds = paired_rounds(ways, args.repeats, warmup=1)  # the warm-up's outputs give the differences
    reference = rounds.outputs["standard / before"]
    rows = [{"way": way, "median_texts_per_s": len(texts) / rounds.median(way),
             "median_paired_ratio": rounds.ratio(way, "standard / before"),
             "max_abs_diff": float(np.abs(rounds.outputs[way] - reference).max())} for way in ways]
    print(f"{'ORT graph / batching':<28} {'texts/s':>9} {'x before':>9} {'max |diff|':>11}")
    for r in rows:
        print(f"{r['way']:<28} {r['median_texts_per_s']:>9,.0f} {r['median_paired_ratio']:>8.2f}x {r['max_abs_diff']:>11.1e}")
    rates = {way: [len(texts) / s for s in seconds] for way, seconds in rounds.wall.items()}
    path = Results(args.out, "batching-paired").write({"args": vars(args), "texts": len(texts), **environment(),
                                                       "rows": rows, "rates": rates})
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.batching", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_inference_options(p)
    p.add_argument("--paired", action="store_true", help="only the paired rounds of issue 16's target (needs --run)")
    p.add_argument("--repeats", type=int, default=7, help="--paired: rounds (default 7)")
    p.add_argument("--max-tokens", type=int, default=1024, help="--paired: today's token budget per batch (the default)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.paired:
        if args.run is None:
            p.error("--paired times a trained run: give --run RUN")
        return paired_batching(args)
    return batching_tables(args)


if __name__ == "__main__":
    raise SystemExit(main())
