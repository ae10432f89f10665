"""The few-label bag of terms against the classical models over many K-shot samples of each folder.

    python -m benchmarks.few_label_bag --data ../shared/data/tnews --shots 8 16 32 --seeds 5 \
        --samples /tmp/few-samples

A few-label run on a script the encoder cannot read ships the bag of terms (contrastive.prefer_bag,
set by the planner; docs/recipe.md "Few labels in a script the encoder cannot read"), fitted on the
labelled texts as the run fits it (tfm_cls.bag.few_labels: `bag_model`, `fit_bag`; the run's
tokens, benchmarks.harness.tokens). One sample says little of that choice: 8 to 32 texts a class
are a draw, and the bag and the TF-IDF models are linear models of nearly the same words. This
draws `--seeds` samples at each `--shots` (benchmarks.harness.samples.write_sample, into
`--samples`, reused when there) and scores on each the bag and the benchmark's TF-IDF models
(benchmarks.harness.baselines.tfidf_row: C by 5-fold cross-validation on the sample), on the
source's whole test split: the bag's accuracy lead over the best of them on test and over the one
cross-validation picks, each with its paired standard error; then, for each folder and over every
sample, the mean lead and its standard error across samples (the draw's variance, which one
sample's paired SE does not hold). Whether the planner would prefer the bag on the folder is in
each row (`prefer_bag`); where it would not, the run compares the bag with the encoder first.
Single-label folders of single texts only. Prints one table; writes bench_results/few-label-bag-<time>.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.harness.baselines import tfidf_row
from benchmarks.harness.options import check_folders
from benchmarks.harness.results import OUT, environment, paired_lead, write_results
from benchmarks.harness.samples import read_splits, write_sample
from benchmarks.harness.tokens import planned, run_tokenizer, tokenized
from tfm_cls.bag.few_labels import bag_model, fit_bag
from tfm_cls.bag.sparse import bag_matrix
from tfm_cls.classify.heads import head_for
from tfm_cls.config import ClassifierConfig, WideConfig
from tfm_cls.data.tokenizer import PAD_ID, marker_ids


def measure(sample: Path) -> dict[str, Any] | None:
    """One sample's row: the bag's test accuracy, the best TF-IDF model's, the leads (paired SE);
    None for a folder that is not single-label single texts."""
    splits, columns, _ = read_splits(sample)
    if columns.task != "single_label" or columns.pair is not None:
        return None
    train, test = splits["train"], splits["test"]
    config = planned(sample)  # once: the tokenizer's vocabulary rule and whether the bag is preferred
    tokenizer = run_tokenizer(sample, train.texts, config)
    fit_on, scored = tokenized(tokenizer, train.texts, train.targets), tokenized(tokenizer, test.texts, test.targets)
    classes = int(max(train.targets.max(), test.targets.max())) + 1
    bag = bag_model(tokenizer.get_vocab_size(), PAD_ID, fit_on, classes, WideConfig().skip_ids(marker_ids(tokenizer)))
    head = head_for(ClassifierConfig(), train.targets)
    fit_bag(bag, bag_matrix(bag.wide, fit_on), torch.as_tensor(train.targets, dtype=torch.int64), head)
    with torch.no_grad():
        logits = bag_matrix(bag.wide, scored) @ bag.wide.weight + bag.bias  # [N, C] the bag's own logits
    right = logits.argmax(1).numpy() == test.targets
    classical = tfidf_row(splits, columns, "accuracy", predictions=True)
    best = classical["baselines"][classical["best"]]
    picked = max(classical["baselines"].values(), key=lambda r: r["validation_metric"])
    return {"sample": sample.name, "train": len(train.texts), "test": len(test.texts),
            "prefer_bag": config.contrastive.prefer_bag,
            "bag": float(right.mean()), "best": best["system"], "best_test": best["accuracy"],
            "picked": picked["system"], "picked_test": picked["accuracy"],
            "lead": paired_lead(right, np.asarray(best["test_predicted"]) == test.targets),
            "lead_picked": paired_lead(right, np.asarray(picked["test_predicted"]) == test.targets)}


def summary(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    """The mean of the rows' `key` leads, its standard error across samples, and how many are below 0."""
    leads = np.asarray([r[key]["lead"] for r in rows])
    se = float(leads.std(ddof=1) / np.sqrt(len(leads))) if len(leads) > 1 else float("nan")
    return {"mean": float(leads.mean()), "se": se, "below": int((leads < 0).sum()), "samples": len(leads)}


def table(rows: list[dict[str, Any]], groups: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["| sample | texts | the planner prefers the bag | bag: test | best TF-IDF: test | lead (paired SE) | "
             "over the one cross-validation picks |", "|---|---:|---|---:|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['sample']} | {r['train']} | {'yes' if r['prefer_bag'] else 'no'} | {100 * r['bag']:.2f} | "
                     f"{r['best']} {100 * r['best_test']:.2f} | "
                     f"{100 * r['lead']['lead']:+.2f} ({100 * r['lead']['se']:.2f}) | "
                     f"{100 * r['lead_picked']['lead']:+.2f} ({100 * r['lead_picked']['se']:.2f}) |")
    lines += ["", "| folder | samples | lead over the best on test: mean (SE across samples), below | "
              "over the cross-validated pick |", "|---|---:|---|---|"]
    for name, members in groups.items():
        best, picked = summary(members, "lead"), summary(members, "lead_picked")
        lines.append(f"| {name} | {best['samples']} | {100 * best['mean']:+.2f} ({100 * best['se']:.2f}), "
                     f"{best['below']} | {100 * picked['mean']:+.2f} ({100 * picked['se']:.2f}), {picked['below']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="data folders (train.jsonl, test.jsonl, ...)")
    parser.add_argument("--shots", type=int, nargs="+", default=[8, 16, 32], help="labelled texts a class")
    parser.add_argument("--seeds", type=int, default=5, help="samples at each --shots (seeds 0..N-1)")
    parser.add_argument("--samples", required=True, help="where the samples are written (and reused)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    check_folders(parser, args.data, why="samples are drawn from train, scored on test")
    torch.set_num_threads(1)
    rows, groups = [], {}
    for folder in map(Path, args.data):
        for shots in args.shots:
            members = []
            for seed in range(args.seeds):
                row = measure(write_sample(folder, Path(args.samples) / f"{folder.name}-{shots}-s{seed}", shots, seed))
                if row is None:
                    break
                print(f"{row['sample']}: bag {100 * row['bag']:.2f}, {row['best']} {100 * row['best_test']:.2f}, "
                      f"lead {100 * row['lead']['lead']:+.2f} ({100 * row['lead']['se']:.2f})", flush=True)
                members.append(row)
            if not members:
                print(f"{folder}: not a single-label set of single texts; skipped", flush=True)
                break
            rows += members
            groups[f"{folder.name} at {shots}"] = members
    if rows:
        groups["all"] = rows
    text = table(rows, groups)
    print(text)
    path = write_results(args.out, "few-label-bag", {"environment": environment(), "rows": rows,
                                                     "summary": {n: {"lead": summary(m, "lead"),
                                                                     "lead_picked": summary(m, "lead_picked")}
                                                                 for n, m in groups.items()}}, text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
