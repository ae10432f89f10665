"""Distillation benchmark (issue 14): the MiniLM teacher, ours supervised, ours distilled, the TF-IDF
baselines and model2vec, side by side in one run: test accuracy, size on disk, end-to-end texts/s
on the test set with ONE thread (tokenization included; ours through the ONNX inference path of
export/infer.py, fp32 and int8).

Runs are given (they take long to make; each has its own command in docs/distillation.md):

    python benchmarks/bench_distill.py --dataset trec --teacher runs/trec-minilm \\
        --supervised runs/trec --distilled runs/trec-distill [--distilled-variant NAME=RUN ...] \\
        [--model2vec-dir bench_results/model2vec-minilm]

Each run directory gets model.onnx (exported and verified) and model.int8.onnx (per-channel
dynamic int8) if it lacks them. Writes bench_results/distill-<dataset>-<time>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import BASELINES, Split, run_baseline, splits_of  # noqa: E402

from tfm_cls.io import write_json  # noqa: E402

logger = logging.getLogger("bench_distill")


def onnx_files(run_dir: Path) -> dict[str, Path]:
    """RUN/model.onnx (exported + verified) and RUN/model.int8.onnx, made where missing."""
    from tfm_cls.export.exporter import export_run
    from tfm_cls.export.quantize import quantize_model
    from tfm_cls.export.verify import verify

    from tfm_cls.runs import load_run

    fp32, int8 = run_dir / "model.onnx", run_dir / "model.int8.onnx"
    if not fp32.is_file():
        export_run(run_dir)
        logger.info("%s", verify(load_run(run_dir).model, fp32))
    if not int8.is_file():
        quantize_model(fp32, int8, per_channel=True)
    return {"fp32": fp32, "int8": int8}


def speed_sample(test: Split, size: int) -> list[str]:
    """The first `size` test texts: what the timed passes run on (accuracy takes the whole set)."""
    return test.texts[:size] if size else test.texts


def onnx_row(name: str, path: Path, test: Split, repeats: int, speed_texts: int = 0) -> dict:
    """Accuracy (one pass over the test set), size and one-thread end-to-end texts/s (median of
    `repeats` passes over the first `speed_texts` test texts; 0: all) of one ONNX file."""
    from sklearn.metrics import accuracy_score, f1_score

    from tfm_cls.runtime.session import Classifier

    clf = Classifier(str(path), threads=1)
    clf.predict_proba(test.texts[:64], 32)  # warm-up
    probs, _ = clf.predict_proba(test.texts, 32)
    sample = speed_sample(test, speed_texts)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        clf.predict_proba(sample, 32)
        seconds.append(time.perf_counter() - start)
    predicted = probs.argmax(1)
    return {
        "system": name, "accuracy": float(accuracy_score(test.labels, predicted)),
        "macro_f1": float(f1_score(test.labels, predicted, average="macro")),
        "size_mb": path.stat().st_size / 2**20, "texts_per_s": len(sample) / float(np.median(seconds)),
        "file": str(path),
    }


def paired_speed(teacher: Path, student: Path, texts: list[str], repeats: int, pairs: list[str] | None = None) -> dict:
    """Texts/s of two ONNX files timed in alternating passes (teacher, student, teacher, ...), so
    that a machine whose load drifts slows both alike; the median of the per-pair ratios.
    Sentence-pair models read `pairs`, the second text of each."""
    from tfm_cls.runtime.session import Classifier

    models = {"teacher": Classifier(str(teacher), threads=1), "student": Classifier(str(student), threads=1)}
    for clf in models.values():
        clf.predict_proba(texts[:64], 32, None if pairs is None else pairs[:64])  # warm-up
    rates: dict[str, list[float]] = {"teacher": [], "student": []}
    for _ in range(repeats):
        for name, clf in models.items():
            start = time.perf_counter()
            clf.predict_proba(texts, 32, pairs)
            rates[name].append(len(texts) / (time.perf_counter() - start))
    ratios = [s / t for s, t in zip(rates["student"], rates["teacher"])]
    return {"teacher": str(teacher), "student": str(student), "teacher_texts_per_s": rates["teacher"],
            "student_texts_per_s": rates["student"], "median_ratio": float(np.median(ratios))}


def ours_rows(label: str, run_dir: Path, test: Split, repeats: int, speed_texts: int) -> list[dict]:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    rows = []
    for precision, path in onnx_files(run_dir).items():
        row = onnx_row(f"{label} ({precision})", path, test, repeats, speed_texts)
        row.update(run_dir=str(run_dir), num_parameters=metrics["num_parameters"],
                   train_minutes=metrics["train_seconds"] / 60)
        if "distillation" in metrics:
            d = metrics["distillation"]
            row.update(transfer_texts=d["transfer_set"]["transfer_texts"], labelling_minutes=d["labelling_seconds"] / 60)
        rows.append(row)
    return rows


def tfidf_rows(splits: dict[str, Split], out: Path, repeats: int, speed_texts: int) -> list[dict]:
    """The TF-IDF baselines (benchmarks/baselines.py) with the size of the pickled pipeline and
    one-process texts/s (sklearn predicts single-threaded)."""
    rows = []
    for name, (factory, _) in BASELINES.items():
        row = run_baseline(name, splits["train"], splits["validation"], splits["test"])
        model = factory(row["C"]).fit(splits["train"].texts, splits["train"].labels)  # the chosen C, again
        path = out / f"{name}.pkl"
        path.write_bytes(pickle.dumps(model))
        sample = speed_sample(splits["test"], speed_texts)
        model.predict(sample[:64])
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            model.predict(sample)
            seconds.append(time.perf_counter() - start)
        row.update(size_mb=path.stat().st_size / 2**20, texts_per_s=len(sample) / float(np.median(seconds)))
        rows.append(row)
    return rows


def load_splits(dataset: str, folder: Path) -> dict[str, Split]:
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.data.sources import load_data

    cfg = load_config(ClassifierConfig, ROOT / f"configs/cls/{dataset}.yaml", [f"data.path={folder}"])
    data = load_data(cfg.data)
    return splits_of(data.splits)


def format_table(rows: list[dict]) -> str:
    header = f"{'system':<36} {'test acc':>8} {'macro-F1':>8} {'size MB':>8} {'texts/s':>9} {'x teacher int8':>14}"
    teacher = next((r["texts_per_s"] for r in rows if r["system"] == "teacher MiniLM (int8)"), None)
    lines = [header, "-" * len(header)]
    for r in rows:
        if "skipped" in r:
            lines.append(f"{r['system']:<36} skipped: {r['skipped']}")
            continue
        ratio = f"{r['texts_per_s'] / teacher:.1f}x" if teacher else ""
        lines.append(f"{r['system']:<36} {100 * r['accuracy']:>8.1f} {100 * r['macro_f1']:>8.1f} {r['size_mb']:>8.1f} "
                     f"{r['texts_per_s']:>9,.0f} {ratio:>14}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", required=True)
    p.add_argument("--data-root", default="../shared/data")
    p.add_argument("--teacher", required=True, help="the MiniLM teacher's run directory")
    p.add_argument("--supervised", help="ours trained supervised only (configs/cls/<dataset>.yaml)")
    p.add_argument("--distilled", help="ours distilled (configs/distill/<dataset>.yaml)")
    p.add_argument("--distilled-variant", action="append", default=[], metavar="NAME=RUN",
                   help="more distilled runs (options measured against the default)")
    p.add_argument("--model2vec-dir", default="bench_results/model2vec-minilm",
                   help="the static model distilled from MiniLM (made here once)")
    p.add_argument("--no-model2vec", action="store_true")
    p.add_argument("--repeats", type=int, default=3, help="timed passes over the speed sample (median)")
    p.add_argument("--speed-texts", type=int, default=1000,
                   help="timed passes run on the first N test texts (0: all); accuracy is always the whole test set")
    p.add_argument("--paired", metavar="RUN",
                   help="only time RUN/model.int8.onnx against the teacher's int8 file in alternating passes")
    p.add_argument("--out", default="bench_results")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    import datasets

    datasets.disable_progress_bars()
    out = Path(args.out)
    work = out / f"distill-{args.dataset}"
    work.mkdir(parents=True, exist_ok=True)
    splits = load_splits(args.dataset, Path(args.data_root) / args.dataset)
    test = splits["test"]
    if test.pairs is not None and not args.paired:
        p.error(f"{args.dataset} holds sentence pairs: the full table takes single texts; "
                "bench_accuracy.py scores pair models, --paired RUN times them")
    if args.paired:
        sample = speed_sample(test, args.speed_texts)
        result = paired_speed(onnx_files(Path(args.teacher))["int8"], onnx_files(Path(args.paired))["int8"],
                              sample, args.repeats, None if test.pairs is None else test.pairs[: len(sample)])
        print(json.dumps(result, indent=2))
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        write_json(out / f"distill-{args.dataset}-paired-{stamp}.json", result)
        return 0

    rows = ours_rows("teacher MiniLM", Path(args.teacher), test, args.repeats, args.speed_texts)
    if args.supervised:
        rows += ours_rows("ours supervised", Path(args.supervised), test, args.repeats, args.speed_texts)
    if args.distilled:
        rows += ours_rows("ours distilled", Path(args.distilled), test, args.repeats, args.speed_texts)
    for item in args.distilled_variant:
        name, run = item.split("=", 1)
        rows += ours_rows(f"distilled {name}", Path(run), test, args.repeats, args.speed_texts)
    rows += tfidf_rows(splits, work, args.repeats, args.speed_texts)
    paired = None
    if args.distilled:  # the speed target's ratio, timed in alternating passes (a drifting load slows both alike)
        paired = paired_speed(onnx_files(Path(args.teacher))["int8"], onnx_files(Path(args.distilled))["int8"],
                              speed_sample(test, args.speed_texts), max(args.repeats, 5))
    if not args.no_model2vec:
        from model2vec_peer import available, run_model2vec, static_model

        reason = available()
        if reason:
            rows.append({"system": "model2vec", "skipped": reason})
        else:
            static_dir, seconds = static_model(Path(args.model2vec_dir))
            row = run_model2vec(static_dir, splits["train"], splits["validation"], test, work / "model2vec")
            row["static_distill_minutes"] = seconds / 60
            rows.append(row)
    table = format_table(rows)
    print("\n" + table)
    if paired:
        print(f"\nours distilled int8 vs teacher int8, alternating passes: median ratio {paired['median_ratio']:.1f}x")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = out / f"distill-{args.dataset}-{stamp}.json"
    env = {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "threads": 1}
    write_json(path, {"args": vars(args), "environment": env, "results": rows, "paired": paired})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
