"""Long documents: head / tail / head+tail truncation and chunking at one token budget (BBC News).

Accuracy of the truncation strategies at an equal token budget on BBC News (long articles):
one model trained per truncation strategy (head / tail / head+tail), each evaluated on the test
split truncated as it was trained and chunked into overlapping windows of the same budget (mean of
the windows' logits); plus the length `max_length: auto` would choose.

    OMP_NUM_THREADS=1 python -m benchmarks.long_documents [--budget 128] [--minutes 2] [--quick]

Table to stdout and bench_results/long-documents-<time>.md, everything to the .json beside it.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

from benchmarks.harness.results import OUT, write_results

log = logging.getLogger("benchmarks.long_documents")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.long_documents", description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=int, default=128, help="tokens per model input, [CLS] and [SEP] included")
    p.add_argument("--minutes", type=float, default=2.0, help="training budget per model")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--quick", action="store_true", help="a few steps per model: checks the script works")
    p.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    import datasets
    import torch

    from tfm_cls.classify.predict import evaluate
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.data.sources import load_data
    from tfm_cls.data.tokenized import tokenize_dataset
    from tfm_cls.data.tokenizer import auto_max_length, long_text_of, percentile_length, token_lengths
    from tfm_cls.runs import load_run
    from tfm_cls.train import train

    torch.set_num_threads(1)
    datasets.disable_progress_bars()
    results: dict = {"budget": args.budget, "load_before": os.getloadavg(), "quick": args.quick, "rows": {}}
    with tempfile.TemporaryDirectory(prefix="bench_longdocs_") as work:
        for strategy in ("head", "tail", "head+tail"):
            overrides = [f"run_dir={work}/{strategy}", f"tokenizer.max_length={args.budget}",
                         f"model.max_len={args.budget}", f"tokenizer.truncation={strategy}",
                         f"train.epochs={args.epochs}", f"train.max_minutes={args.minutes}", "train.progress=false",
                         "train.num_threads=1"] + (["train.max_steps=5"] if args.quick else [])
            cfg = load_config(ClassifierConfig, "bbc", overrides)
            start = time.perf_counter()
            train(cfg, overwrite=True)
            train_seconds = time.perf_counter() - start
            run = load_run(cfg.resolved_run_dir())
            data = load_data(run.config.data)
            if strategy == "head":
                texts = data.splits["train"]["text"]
                lengths = token_lengths(run.tokenizer, texts)
                results["train_token_lengths"] = {q: percentile_length(lengths, q) for q in (50, 90, 95, 99)}
                results["auto_max_length"] = auto_max_length(run.tokenizer, texts, run.config.tokenizer)
            for mode in ("truncate", "chunk"):
                policy = long_text_of(run.config.tokenizer, run.config.inference, chunk=mode == "chunk")
                split = tokenize_dataset(data.splits["test"], run.tokenizer, policy=policy)
                metrics, _ = evaluate(run.model, split, run.labels, 64, torch.device("cpu"))
                name = f"trained {strategy} / " + ("truncated as trained" if mode == "truncate" else
                                                    "chunked (windows of the budget, stride 1/4, mean of logits)")
                results["rows"][name] = {
                    "accuracy": metrics["accuracy"], "macro_f1": metrics["macro_f1"],
                    "windows_per_text": split.num_rows / len(split), "texts_per_s": metrics["texts_per_second"],
                    "train_seconds": train_seconds,
                }
                log.info("%s: accuracy %.4f", name, metrics["accuracy"])
    results["load_after"] = os.getloadavg()
    lines = [f"BBC News test split, {args.budget}-token budget per model input (load {results['load_before'][0]:.1f} -> "
             f"{results['load_after'][0]:.1f}){' QUICK' if args.quick else ''}; training texts' token lengths "
             f"(percentiles) {results['train_token_lengths']}; `max_length: auto` (95th percentile, cap 512) would "
             f"choose {results['auto_max_length']}", "",
             "| model / inference | accuracy | macro-F1 | windows/text | eval texts/s |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {n} | {100 * r['accuracy']:.2f}% | {100 * r['macro_f1']:.2f}% | {r['windows_per_text']:.1f} | "
              f"{r['texts_per_s']:.0f} |" for n, r in results["rows"].items()]
    table = "\n".join(lines)
    print(table)
    write_results(args.out, "long-documents", results, table, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
