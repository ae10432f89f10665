"""The bag of terms' n-grams: tokens and pairs against tokens, pairs and triples, in the library's own bag.

    python -m benchmarks.bag_terms --data ../shared/data/trec ../shared/data/sms_spam ...

The recipe's warm start fits the in-graph bag (tfm_cls.model.wide.WideBranch: sublinear TF-IDF over
the tokenizer's ids and their hashed adjacent pairs, `wide.ngrams: 2`, 2^18 buckets) with
LinearSVC's loss, C picked on validation from `HINGE_C`. This measures the n-gram order alone on
exactly those features: the packaged MiniLM's tokenizer (its vocabulary extended where the planner's
plan for the folder extends it), texts read to
`MAX_TOKENS` tokens (benchmarks.harness.tokens), the branch's `bag_matrix` for `--ngrams` orders (`--buckets` rows), one-vs-rest LinearSVC for each
C, the best on validation scored on test (LinearSVC's own decision: the largest margin). Single-label
sets only; without a validation split a seeded tenth of train (at least 500 texts) is held out
(benchmarks.harness.samples.single_label_splits). Prints one table; writes bench_results/bag-terms-<time>.json.

`--scaling`: at each order's chosen C, the accuracies of the margins as the recipe turns them into one
softmax (tfm_cls.bag.solvers.softmax_scaling: a temperature and a shift per class) fitted on the
training texts' own margins (`in_sample`) and on their 5-fold out-of-fold margins (`out_of_fold`),
beside LinearSVC's own decision (`none`): what the warm start's fallback without folds is chosen on.

With two orders or more, the last against the first on validation and on test: the lead in accuracy
and its paired standard error. `--out-of-fold`: at each order's chosen C, every training text scored
by the fit on the other four fifths (the warm start's folds, `out_of_fold_logits`), and the lead on
validation plus the training texts out of fold too. What the run's choice (tfm_cls.bag.candidates) compares two bags on.
`--buckets` takes one value, or one for each order (the recipe's: pairs in 2^18 rows, triples in 2^20).
The bag does not count the tokenizer's [CLS] / [SEP], as the recipe's (`wide.count_special_tokens: false`);
`--count-special-tokens` counts them, as runs did before the key (rows say which).
An order written with a `c` (`--ngrams 2 2c`) is that bag with its character view too (each token's
character 2-5-grams, `wide.char_grams`, the recipe's where the tokens are word pieces), so
`--ngrams 2 2c` measures the view's lead and its paired standard error.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.harness.options import check_folders
from benchmarks.harness.results import OUT, environment, lead_line, paired_lead, write_results
from benchmarks.harness.samples import single_label_splits
from benchmarks.harness.tokens import run_tokenizer, tokenized
from tfm_cls.bag.fit import HINGE_C, out_of_fold_logits
from tfm_cls.bag.solvers import _fit_svm, softmax_scaling
from tfm_cls.bag.sparse import bag_matrix, set_idf
from tfm_cls.config import WideConfig
from tfm_cls.data.char_grams import char_gram_table
from tfm_cls.data.tokenizer import marker_ids
from tfm_cls.model.wide import BUCKETS, WideBranch


def _scalings(x_train: Any, x_val: Any, x_test: Any, y: tuple[np.ndarray, ...], one_hot: torch.Tensor,
              c: float) -> dict[str, dict[str, float]]:
    """Validation / test accuracy at C `c` of the margins unscaled, and scaled into one softmax on the
    training margins in-sample and out of fold."""
    weights, bias = _fit_svm(x_train, one_hot, c)
    train_y, val_y, test_y = y
    margins = x_train @ weights + bias
    folds = out_of_fold_logits(x_train, one_hot, lambda b, t: _fit_svm(b, t, c), one_hot.shape[1])
    out: dict[str, dict[str, float]] = {}
    for name, fitted_on in (("none", None), ("in_sample", margins), ("out_of_fold", folds)):
        scale, shift = ((torch.ones(one_hot.shape[1]), torch.zeros(one_hot.shape[1])) if fitted_on is None
                        else softmax_scaling(fitted_on, torch.as_tensor(train_y)))
        out[name] = {split: float((((x @ weights + bias) * scale + shift).argmax(1).numpy() == truth).mean())
                     for split, x, truth in (("validation", x_val, val_y), ("test", x_test, test_y))}
    return out


def measure(folder: Path, orders: list[str], buckets: list[int] | None = None, scaling: bool = False,
            out_of_fold: bool = False, count_special_tokens: bool = False) -> dict[str, Any] | None:
    """Each order's best C on validation, its validation and test accuracy, fit seconds (the grid); with
    `scaling`, the scalings' accuracies at that C (`_scalings`); with `out_of_fold`, the training texts'
    out-of-fold accuracy at that C and the last order's lead over the first (`paired_lead`)."""
    orders = [str(order) for order in orders]
    buckets = buckets or [BUCKETS]
    buckets = buckets * len(orders) if len(buckets) == 1 else buckets
    splits = single_label_splits(folder)
    if splits is None:
        return None
    (train_texts, train_y), (val_texts, val_y), (test_texts, test_y) = splits
    tokenizer = run_tokenizer(folder, train_texts)
    train, val, test = (tokenized(tokenizer, t, y) for t, y in splits)
    classes = int(max(train_y.max(), val_y.max(), test_y.max())) + 1
    one_hot = torch.nn.functional.one_hot(torch.as_tensor(train_y, dtype=torch.int64), classes).float()
    skip_ids = WideConfig(count_special_tokens=count_special_tokens).skip_ids(marker_ids(tokenizer))  # the recipe's rule
    row: dict[str, Any] = {"set": folder.name, "train": len(train_y), "validation": len(val_y), "test": len(test_y),
                           "vocab_size": tokenizer.get_vocab_size(), "buckets": dict(zip(map(str, orders), buckets)),
                           "skip_ids": skip_ids}
    right: dict[str, dict[str, np.ndarray]] = {}
    for n, rows in zip(orders, buckets):
        chars = char_gram_table(tokenizer, skip_ids=skip_ids) if n.endswith("c") else None
        branch = WideBranch(tokenizer.get_vocab_size(), classes, 0, "tfidf", int(n.rstrip("c")), rows, skip_ids,
                            *((chars[1], chars[0].shape[1]) if chars else ()))
        if chars:
            branch.set_char_grams(torch.from_numpy(chars[0]))
        started = time.perf_counter()
        set_idf(branch, train)
        x_train, x_val, x_test = (bag_matrix(branch, s) for s in (train, val, test))
        best = None
        for c in HINGE_C:
            weights, bias = _fit_svm(x_train, one_hot, c)
            score = float(((x_val @ weights + bias).argmax(1).numpy() == val_y).mean())
            if best is None or score > best["validation"]:
                test_right = (x_test @ weights + bias).argmax(1).numpy() == test_y
                best = {"C": c, "validation": score, "test": float(test_right.mean())}
                right[n] = {"validation": (x_val @ weights + bias).argmax(1).numpy() == val_y, "test": test_right}
        row[f"ngrams_{n}"] = {**best, "seconds": time.perf_counter() - started}
        if out_of_fold:
            folds = out_of_fold_logits(x_train, one_hot, lambda b, t, c=best["C"]: _fit_svm(b, t, c), classes)
            right[n]["out_of_fold"] = folds.argmax(1).numpy() == train_y
            row[f"ngrams_{n}"]["out_of_fold"] = float(right[n]["out_of_fold"].mean())
        if scaling:
            row[f"ngrams_{n}"]["scaling"] = _scalings(x_train, x_val, x_test, (train_y, val_y, test_y), one_hot,
                                                      best["C"])
    if len(orders) > 1:
        last, first = right[orders[-1]], right[orders[0]]
        row["lead"] = {"validation": paired_lead(last["validation"], first["validation"]),
                       "test": paired_lead(last["test"], first["test"])}
        if out_of_fold:
            row["lead"]["out_of_fold + validation"] = paired_lead(np.concatenate([last["out_of_fold"], last["validation"]]),
                                                            np.concatenate([first["out_of_fold"], first["validation"]]))
    return row


def table(rows: list[dict[str, Any]], orders: list[str]) -> str:
    head = " | ".join(f"ngrams {n}: C, validation / test" for n in orders)
    lines = [f"| set | train | {head} | {orders[-1]} - {orders[0]} (test) |", "|---|---:|" + "---|" * len(orders) + "---:|"]
    diffs = []
    for r in rows:
        cells = " | ".join(f"{r[f'ngrams_{n}']['C']:g}, {100 * r[f'ngrams_{n}']['validation']:.1f} / "
                           f"{100 * r[f'ngrams_{n}']['test']:.1f}" for n in orders)
        diffs.append(r[f"ngrams_{orders[-1]}"]["test"] - r[f"ngrams_{orders[0]}"]["test"])
        lines.append(f"| {r['set']} | {r['train']} | {cells} | {100 * diffs[-1]:+.2f} |")
    if rows and len(orders) > 1:
        lines.append("\n" + lead_line(f"ngrams {orders[-1]} (against {orders[0]})", diffs))
    scaled = [(r, n) for r in rows for n in orders if "scaling" in r[f"ngrams_{n}"]]
    if scaled:
        lines += ["", "| set | ngrams | C | none: validation / test | in-sample shift | out-of-fold shift |",
                  "|---|---:|---:|---|---|---|"]
        for r, n in scaled:
            cell = r[f"ngrams_{n}"]
            lines.append(f"| {r['set']} | {n} | {cell['C']:g} | " + " | ".join(
                f"{100 * cell['scaling'][k]['validation']:.1f} / {100 * cell['scaling'][k]['test']:.1f}"
                for k in ("none", "in_sample", "out_of_fold")) + " |")
    led = [r for r in rows if "lead" in r]
    if led:
        kinds = tuple(k for k in ("validation", "out_of_fold + validation", "test") if all(k in r["lead"] for r in led))
        lines += ["", f"ngrams {orders[-1]} minus ngrams {orders[0]}, accuracy x 100 (paired SE, texts):", "",
                  "| set | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
        for r in led:
            lines.append(f"| {r['set']} | " + " | ".join(
                f"{100 * r['lead'][k]['lead']:+.2f} ({100 * r['lead'][k]['se']:.2f}, {r['lead'][k]['texts']})"
                for k in kinds) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="data folders (train.jsonl, test.jsonl, ...)")
    parser.add_argument("--ngrams", nargs="+", default=["2", "3"],
                        help="orders compared (1, 2, 3; with a c, e.g. 2c: also each token's character grams)")
    parser.add_argument("--buckets", type=int, nargs="+", default=[BUCKETS],
                        help="rows the pairs (and triples) are hashed into: one value, or one for each order")
    parser.add_argument("--scaling", action="store_true",
                        help="also the accuracies of the margins scaled in-sample and out of fold, at each chosen C")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--out-of-fold", action="store_true",
                        help="also each order's out-of-fold training accuracy and the last order's lead over the "
                             "first on validation, validation plus the folds, and test")
    parser.add_argument("--count-special-tokens", action="store_true",
                        help="the bag also counts the tokenizer's [CLS] / [SEP] (runs before wide.count_special_tokens)")
    args = parser.parse_args(argv)
    for order in args.ngrams:
        if order.rstrip("c") not in ("1", "2", "3") or order.count("c") > 1:
            parser.error(f"--ngrams: 1, 2 or 3, each with an optional c (the character view), got {order!r}")
    if len(args.buckets) not in (1, len(args.ngrams)):
        parser.error(f"--buckets: one value or one for each of the {len(args.ngrams)} orders, got {len(args.buckets)}")
    check_folders(parser, args.data)
    torch.set_num_threads(1)
    rows = []
    for folder in args.data:
        row = measure(Path(folder), args.ngrams, args.buckets, args.scaling, args.out_of_fold,
                      args.count_special_tokens)
        if row is None:
            print(f"{folder}: not a single-label set of single texts; skipped", flush=True)
            continue
        rows.append(row)
        print(f"{row['set']}: " + ", ".join(f"ngrams {n} {100 * row[f'ngrams_{n}']['test']:.1f} "
                                             f"({row[f'ngrams_{n}']['seconds']:.0f} s)" for n in args.ngrams)
              + " on test", flush=True)
    text = table(rows, args.ngrams)
    print(text)
    path = write_results(args.out, "bag-terms", {"environment": environment(), "orders": args.ngrams,
                                                 "count_special_tokens": args.count_special_tokens, "rows": rows}, text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
