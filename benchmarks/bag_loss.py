"""The bag of terms' loss: logistic regression against LinearSVC's squared hinge on identical features.

    python -m benchmarks.bag_loss --data ../shared/data/trec ../shared/data/sms_spam ...

The recipe's warm start fits the TF-IDF bag as a linear model (tfm_cls.bag.fit) with one
of two losses, each with its own C grid picked on validation (`WARM_START_C` for the head's loss,
`HINGE_C` for the hinge). This measures the choice of loss alone: the library's TF-IDF features
(tfm_cls.classify.baseline.tfidf_vectorizer: word 1-2-grams, CJK character 1-2-grams), one matrix per
set, both models fitted on it for each C of their grid, the best on validation scored on test.
Single-label sets only. Without a validation split, a seeded tenth of train (at least 500 texts)
is held out. Prints one table; writes bench_results/bag-loss-<time>.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks.harness.results import OUT, environment, lead_line, write_results
from benchmarks.harness.samples import single_label_splits
from tfm_cls.bag.fit import HINGE_C, WARM_START_C
from tfm_cls.classify.baseline import tfidf_vectorizer


def _models() -> dict[str, tuple[Any, tuple[float, ...]]]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    return {"logistic": (lambda c: LogisticRegression(C=c, max_iter=2000), WARM_START_C),
            "squared_hinge": (lambda c: LinearSVC(C=c, max_iter=2000), HINGE_C)}


def measure(folder: Path) -> dict[str, Any] | None:
    """Each loss's best C on validation, its validation and test accuracy and fit seconds (the grid)."""
    splits = single_label_splits(folder)
    if splits is None:
        return None
    (train_texts, train_y), (val_texts, val_y), (test_texts, test_y) = splits
    vectorizer = tfidf_vectorizer()
    x_train = vectorizer.fit_transform(train_texts)
    x_val, x_test = vectorizer.transform(val_texts), vectorizer.transform(test_texts)
    row: dict[str, Any] = {"set": folder.name, "train": len(train_y), "validation": len(val_y), "test": len(test_y)}
    for name, (make, grid) in _models().items():
        started, best = time.perf_counter(), None
        for c in grid:
            model = make(c).fit(x_train, train_y)
            score = float((model.predict(x_val) == val_y).mean())
            if best is None or score > best["validation"]:
                best = {"C": c, "validation": score, "test": float((model.predict(x_test) == test_y).mean())}
        row[name] = {**best, "seconds": time.perf_counter() - started}
    row["test_difference"] = row["squared_hinge"]["test"] - row["logistic"]["test"]
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| set | train | logistic: C, validation / test | squared hinge: C, validation / test | hinge - logistic (test) |",
             "|---|---:|---|---|---:|"]
    for r in rows:
        lr, svm = r["logistic"], r["squared_hinge"]
        lines.append(f"| {r['set']} | {r['train']} | {lr['C']:g}, {100 * lr['validation']:.1f} / {100 * lr['test']:.1f} "
                     f"| {svm['C']:g}, {100 * svm['validation']:.1f} / {100 * svm['test']:.1f} "
                     f"| {100 * r['test_difference']:+.2f} |")
    if rows:
        diffs = [r["test_difference"] for r in rows]
        lines.append("\n" + lead_line("hinge", diffs))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="data folders (train.jsonl, test.jsonl, ...)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    rows = []
    for folder in args.data:
        row = measure(Path(folder))
        if row is None:
            print(f"{folder}: not a single-label set of single texts; skipped", flush=True)
            continue
        rows.append(row)
        print(f"{row['set']}: logistic {100 * row['logistic']['test']:.1f}, squared hinge "
              f"{100 * row['squared_hinge']['test']:.1f} on test", flush=True)
    text = table(rows)
    print(text)
    path = write_results(args.out, "bag-loss", {"environment": environment(), "rows": rows}, text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
