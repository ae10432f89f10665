"""The report: calibration, the label-error ranking and the TF-IDF baseline's accuracy (issue 27).

Its measurable claims (issue 27), calibration and the label-error ranking, and its
TF-IDF baseline's accuracy.

    python -m benchmarks.report ece --run RUN [--run RUN2 ...]
        For each finished single-label run (read only: nothing in it is written), fit the
        temperature on its validation split as `train.calibration` does and report the test ECE
        (15 bins) and NLL before / after. Runs trained before calibration existed work too. The
        last column is the noise floor: the ECE a perfectly calibrated model with the same scores
        shows on this many test texts (labels drawn from its own probabilities, median / p90).

    python -m benchmarks.report label-errors --data ../shared/data/trec --share 0.05 \\
        --minutes 5 [--seed 0]
        Copy the training file with `share` of its labels flipped to another class (seeded) into a
        temporary folder outside the repository, train the trec preset on it (train.max_minutes),
        rank the training split as the report does (confident learning on the run's in-sample
        probabilities, tfm_cls.report.label_errors) and count how many of the flipped examples are
        in the top 10 % of the ranking. The validation split is carved from the noisy file, as a
        user's would be. `--systems tfidf-oof` ranks the same flips from out-of-fold probabilities
        of the report's TF-IDF baseline instead (5 folds, seconds): the reference for what
        out-of-fold probabilities buy.

    python -m benchmarks.report baseline [--data-root ../shared/data] [--datasets tnews,trec,sst2] \\
        [--train-cap 10000]
        The report's TF-IDF baseline (tfm_cls.classify.baseline.run_baseline, kind "classes") on a
        few single-label data sets: test accuracy and macro-F1 (docs/report.md quotes the tnews
        figures). Training splits over --train-cap texts are replaced by a seeded sample of that
        many. Run it with another checkout's python (its editable tfm_cls) to measure that
        checkout's baseline.

Each writes bench_results/report-<what>-<time>.json and prints one table.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness.data import DATA_ROOT, read_labelled, read_rows
from benchmarks.harness.results import OUT, Results


def _save(out_dir: Path, what: str, result: dict, table: str | None = None) -> Path:
    return Results(out_dir, f"report-{what}").write({"machine": platform.platform(), **result}, table)


def ece_of_run(run_dir: Path) -> dict:
    """Fit T on the run's validation split, ECE / NLL of test before and after."""
    from tfm_cls.classify.calibration import (
        calibrated_ece_noise,
        calibration_summary,
        fit_temperature,
        softmax,
    )
    from tfm_cls.classify.predict import run_head, texts_logits
    from tfm_cls.data.sources import load_data
    from tfm_cls.runs import load_run

    run = load_run(run_dir)
    data = load_data(run.config.data)
    head = run_head(run)
    if not head.calibratable:
        raise SystemExit(f"{run_dir} is a {head.task} run: calibration is for single-label runs")
    split = {}
    for name in ("validation", "test"):
        ds = data.splits[name]
        pairs = list(ds["text_pair"]) if "text_pair" in ds.column_names else None
        logits, _, _ = texts_logits(run, list(ds["text"]), pairs)
        split[name] = (logits, np.asarray(ds["label"], dtype=np.int64))
    recorded = run.temperature
    t = fit_temperature(*split["validation"])
    test_logits = split["test"][0]
    return {"run": str(run_dir), "name": run.config.name, "init_from": run.config.model.init_from,
            "label_smoothing": run.config.train.label_smoothing, "recorded_temperature": recorded,
            "temperature": t, "validation": calibration_summary(*split["validation"], t),
            "test": calibration_summary(*split["test"], t), "test_examples": len(split["test"][1]),
            "test_ece_floor": calibrated_ece_noise(softmax(test_logits / t), draws=1000)}


def flip_labels(src: Path, dst: Path, share: float, seed: int) -> list[int]:
    """dst/train.jsonl = src's with `share` of the rows relabelled to another class; test.jsonl
    and labels.json copied. Returns the flipped row indices."""
    dst.mkdir(parents=True, exist_ok=True)
    rows = read_rows(src / "train.jsonl")
    classes = sorted({r["label"] for r in rows})
    rng = random.Random(seed)
    flipped = sorted(rng.sample(range(len(rows)), round(share * len(rows))))
    for i in flipped:
        rows[i]["label"] = rng.choice([c for c in classes if c != rows[i]["label"]])
        rows[i]["_flipped"] = True
    (dst / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for name in ("test.jsonl", "labels.json"):
        if (src / name).is_file():
            (dst / name).write_text((src / name).read_text(encoding="utf-8"), encoding="utf-8")
    return flipped


def _caught(ranking: np.ndarray, issues: int, is_flipped: np.ndarray) -> dict:
    top = ranking[: len(ranking) // 10]
    return {"top_10_percent": len(top), "flipped_in_top_10_percent": int(is_flipped[top].sum()),
            "recall_at_10_percent": float(is_flipped[top].sum() / max(int(is_flipped.sum()), 1)),
            "issues_flagged": issues, "flipped_among_issues": int(is_flipped[ranking[:issues]].sum())}


def tfidf_out_of_fold(data: Path, share: float, seed: int, folds: int = 5) -> dict:
    """The same flips, ranked by confident learning on out-of-fold probabilities of the report's
    TF-IDF + logistic-regression baseline (k-fold: each text scored by a model that never saw it)."""
    from tfm_cls.classify.baseline import out_of_fold_probabilities
    from tfm_cls.report.label_errors import likely_label_errors

    with tempfile.TemporaryDirectory(prefix="tfm_cls-flips-") as tmp:
        flipped = flip_labels(data, Path(tmp), share, seed)
        rows = read_rows(Path(tmp) / "train.jsonl")
    texts, labels = [r["text"] for r in rows], np.array([r["label"] for r in rows])
    is_flipped = np.zeros(len(rows), dtype=bool)
    is_flipped[flipped] = True
    start = time.perf_counter()
    probs = out_of_fold_probabilities(texts, None, labels, int(labels.max()) + 1, folds, seed)
    found = likely_label_errors(probs, labels)
    return {"system": f"tfidf-lr, out-of-fold ({folds} folds)", "seconds": time.perf_counter() - start,
            "train_examples": len(rows), "flipped_in_train_split": len(flipped),
            **_caught(found["ranking"], found["issues"], is_flipped)}


def label_errors(data: Path, share: float, minutes: float, seed: int, overrides: list[str],
                 keep: Path | None = None) -> dict:
    from tfm_cls.classify.predict import run_head, texts_logits
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.data.sources import load_data
    from tfm_cls.report.label_errors import likely_label_errors
    from tfm_cls.runs import load_run
    from tfm_cls.train import train

    with tempfile.TemporaryDirectory(prefix="tfm_cls-flips-") as tmp:
        # --keep: the run and its noisy data stay (beside each other, outside the repository)
        noisy = keep.with_name(keep.name + "-data") if keep is not None else Path(tmp) / "data"
        flipped = flip_labels(data, noisy, share, seed)
        run_dir = keep if keep is not None else Path(tmp) / "run"
        cfg = load_config(ClassifierConfig, "trec", [
            f"data.path={noisy}", f"run_dir={run_dir}", f"train.max_minutes={minutes}", "train.progress=false",
            "train.tensorboard=false", *overrides])
        start = time.perf_counter()
        metrics = train(cfg)
        seconds = time.perf_counter() - start
        run = load_run(run_dir)
        ds = load_data(run.config.data).splits["train"]  # the carved training split, noisy labels
        # which of its rows were flipped: the `_flipped` column travels with the rows if kept,
        # else match by text (trec questions are unique enough; duplicates counted once)
        source = read_rows(noisy / "train.jsonl")
        flipped_texts = {source[i]["text"] for i in flipped}
        texts = list(ds["text"])
        is_flipped = np.array([t in flipped_texts for t in texts])
        logits, _, _ = texts_logits(run, texts)
        probs = run_head(run).scores(logits)
        found = likely_label_errors(probs, np.asarray(ds["label"], dtype=np.int64))
    return {"system": "the trained Transformer, in-sample (as the report)", "data": str(data), "share": share,
            "seed": seed, "minutes": minutes, "train_seconds": seconds, "steps": metrics["steps"],
            "test_accuracy": metrics["test"]["accuracy"], "train_examples": len(texts),
            "flipped_in_train_split": int(is_flipped.sum()), **_caught(found["ranking"], found["issues"], is_flipped)}


def baseline(args: argparse.Namespace) -> int:
    """The report's baseline on each dataset's test split (module docstring)."""
    from sklearn.metrics import accuracy_score, f1_score

    import tfm_cls.classify.baseline as library

    print(f"tfm_cls from {library.__file__}")
    lines = ["| data | train | test | accuracy | macro-F1 | seconds | baseline |", "|---|---:|---:|---:|---:|---:|---|"]
    print("\n".join(lines))
    rows = []
    for name in args.datasets.split(","):
        root = args.data_root / name
        train, test = read_labelled(root / "train.jsonl", cap=args.train_cap), read_labelled(root / "test.jsonl")
        num_classes = len(json.loads((root / "labels.json").read_text(encoding="utf-8")))
        out = library.run_baseline("classes", {"texts": train.texts, "pairs": None, "targets": train.targets},
                                   {"texts": test.texts, "pairs": None, "targets": test.targets}, num_classes)
        predicted = out["logits"].argmax(axis=1)
        row = {"data": name, "train": len(train.texts), "test": len(test.texts),
               "accuracy": float(accuracy_score(test.targets, predicted)),
               "macro_f1": float(f1_score(test.targets, predicted, average="macro")), "seconds": out["seconds"],
               "model": out["model"]}
        rows.append(row)
        lines.append(f"| {name} | {row['train']} | {row['test']} | {row['accuracy']:.3f} | {row['macro_f1']:.3f} "
                     f"| {row['seconds']:.0f} | {row['model']} |")
        print(lines[-1], flush=True)
    print(_save(args.out, "baseline", {"library": library.__file__, "train_cap": args.train_cap, "rows": rows},
                "\n".join(lines)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("ece")
    p.add_argument("--run", action="append", required=True, type=Path)
    p = sub.add_parser("label-errors")
    p.add_argument("--data", type=Path, default=DATA_ROOT / "trec")
    p.add_argument("--share", type=float, default=0.05)
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--systems", default="transformer,tfidf-oof",
                   help="transformer (train and rank in-sample, as the report), tfidf-oof (out-of-fold TF-IDF)")
    p.add_argument("--keep", type=Path, help="train the run here and keep it and its noisy data (DIR-data) "
                   "(default: a temporary folder); keep it outside the repository")
    p.add_argument("overrides", nargs="*", help="more config overrides of the trec preset")
    p = sub.add_parser("baseline")
    p.add_argument("--data-root", type=Path, default=DATA_ROOT)
    p.add_argument("--datasets", default="tnews,trec,sst2")
    p.add_argument("--train-cap", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.what == "baseline":
        return baseline(args)
    if args.what == "ece":
        rows = [ece_of_run(run) for run in args.run]
        print(f"{'run':40} {'T':>7} {'ECE before':>11} {'ECE after':>10} {'NLL before':>11} {'NLL after':>10} "
              f"{'calibrated ECE median / p90':>28}")
        for r in rows:
            t, floor = r["test"], r["test_ece_floor"]
            print(f"{r['run'][-40:]:40} {r['temperature']:7.3f} {t['ece_before']:11.4f} {t['ece_after']:10.4f} "
                  f"{t['nll_before']:11.4f} {t['nll_after']:10.4f} {floor['median']:19.4f} / {floor['p90']:.4f}")
        print(_save(args.out, "ece", {"runs": rows}))
    else:
        systems = args.systems.split(",")
        rows = []
        if "tfidf-oof" in systems:
            rows.append(tfidf_out_of_fold(args.data, args.share, args.seed))
        if "transformer" in systems:
            rows.append(label_errors(args.data, args.share, args.minutes, args.seed, args.overrides, args.keep))
        print(f"{'ranking from':52} {'flipped':>7} {'in top 10 %':>11} {'recall':>7}")
        for r in rows:
            print(f"{r['system']:52} {r['flipped_in_train_split']:7d} {r['flipped_in_top_10_percent']:11d} "
                  f"{r['recall_at_10_percent']:7.3f}")
        print(_save(args.out, "label-errors", {"share": args.share, "seed": args.seed, "systems": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
