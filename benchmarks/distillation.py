"""Distillation (issue 14): teacher, students, TF-IDF and model2vec side by side; the targets; the curves.

Distillation (issue 14): the MiniLM teacher, ours supervised, ours distilled, the TF-IDF
baselines and model2vec side by side; the targets checked across datasets; the curves where they
are missed. Runs are given (they take long to make; each has its own command in docs/distillation.md).

    python -m benchmarks.distillation table --dataset trec --teacher runs/trec-minilm \\
        --supervised runs/trec --distilled runs/trec-distill [--distilled-variant NAME=RUN ...] \\
        [--model2vec-dir bench_results/model2vec-minilm] [--paired RUN]
    python -m benchmarks.distillation summary bench_results/distill-sst2-*.json bench_results/distill-trec-*.json
    python -m benchmarks.distillation curves --out bench_results/distill_curves.png \\
        --transfer "own tokenizer=runs/trec-distill-c0,runs/trec-distill" \\
        --size "10 minutes=runs/trec-size-d128-l2,runs/trec-size-d256-l2" --teacher runs/trec-minilm \\
        --baseline "TF-IDF + LR=88.4"

table: test accuracy, size on disk, end-to-end texts/s on the test set with ONE thread
(tokenization included; ours through the runtime's ONNX inference, fp32 and int8). Each run
directory gets model.onnx (exported and verified) and model.int8.onnx (per-channel dynamic int8)
if it lacks them. With --distilled, the student's int8 speed against the teacher's in paired
rounds; `--paired RUN` times only that (sentence pairs too). Writes
bench_results/distill-<dataset>-<time>.json (distill-<dataset>-paired-<time>.json).

summary: one table across datasets from the table's JSON files: the issue-14 target per dataset
(the distilled student within GAP points of its MiniLM teacher, ahead of the better TF-IDF
baseline and of model2vec, at >= SPEED x the teacher's int8 texts/s, within BUDGET minutes of
labelling + training). The latest file per dataset wins. Accuracies are the int8 files' (what is
deployed); the speed ratio is the median of the paired rounds (`paired` in the JSON) where the
run has one.

curves: student test accuracy against the size of the transfer set (`--transfer`) and against
the student's size (`--size`: its parameters outside the token embedding table, the part that
costs time per token), read from finished distillation runs; each --transfer / --size is one
line, a label and the run directories of its points (comma-separated); the teacher and
baselines are horizontal lines. A table of the points goes to stdout, the figure (PNG) and its
data (JSON) to --out.
"""

from __future__ import annotations

import argparse
import json
import logging
import pickle
from pathlib import Path

from benchmarks.harness.baselines import baseline_row
from benchmarks.harness.data import DATA_ROOT, Split, config_splits, speed_sample
from benchmarks.harness.models import exported
from benchmarks.harness.results import OUT, Results, environment
from benchmarks.harness.timing import median_seconds, paired_rounds
from tfm_cls.io import atomic_path, read_json, write_json

logger = logging.getLogger("benchmarks.distillation")

GAP, SPEED, BUDGET = 1.5, 10.0, 30.0
"""The issue-14 target: points behind the teacher at most, x the teacher's int8 texts/s at least,
minutes of labelling + training at most."""


# ---- table: the systems side by side -------------------------------------------------------------


def onnx_files(run_dir: Path) -> dict[str, Path]:
    """RUN/model.onnx (exported + verified) and RUN/model.int8.onnx (per-channel dynamic int8), made where missing."""
    from tfm_cls.export.quantize import quantize_model

    fp32, int8 = exported(run_dir), run_dir / "model.int8.onnx"
    if not int8.is_file():
        quantize_model(fp32, int8, per_channel=True)
    return {"fp32": fp32, "int8": int8}


def onnx_row(name: str, path: Path, test: Split, repeats: int, speed_texts: int = 0) -> dict:
    """Accuracy (one pass over the test set), size and one-thread end-to-end texts/s (median of
    `repeats` passes over the first `speed_texts` test texts; 0: all) of one ONNX file."""
    from sklearn.metrics import accuracy_score, f1_score

    from tfm_cls.runtime.session import Classifier

    clf = Classifier(str(path), threads=1)
    clf.predict_proba(test.texts[:64], 32)  # warm-up
    probs, _ = clf.predict_proba(test.texts, 32)
    sample = speed_sample(test, speed_texts)
    seconds, _ = median_seconds(lambda: clf.predict_proba(sample, 32), repeats)
    predicted = probs.argmax(1)
    return {
        "system": name, "accuracy": float(accuracy_score(test.targets, predicted)),
        "macro_f1": float(f1_score(test.targets, predicted, average="macro")),
        "size_mb": path.stat().st_size / 2**20, "texts_per_s": len(sample) / seconds, "file": str(path),
    }


def paired_speed(teacher: Path, student: Path, texts: list[str], repeats: int, pairs: list[str] | None = None) -> dict:
    """Texts/s of two ONNX files timed in paired rounds (teacher, student, teacher, ...), so that a
    machine whose load drifts slows both alike; the median of the per-round ratios. Sentence-pair
    models read `pairs`, the second text of each."""
    from tfm_cls.runtime.session import Classifier

    models = {"teacher": Classifier(str(teacher), threads=1), "student": Classifier(str(student), threads=1)}
    for clf in models.values():
        clf.predict_proba(texts[:64], 32, None if pairs is None else pairs[:64])  # warm-up
    rounds = paired_rounds({name: (lambda clf=clf: clf.predict_proba(texts, 32, pairs)) for name, clf in models.items()},
                           repeats, warmup=0)
    rates = {name: [len(texts) / s for s in rounds.wall[name]] for name in models}
    return {"teacher": str(teacher), "student": str(student), "teacher_texts_per_s": rates["teacher"],
            "student_texts_per_s": rates["student"], "median_ratio": rounds.ratio("student", "teacher")}


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
    """The single-label TF-IDF baselines (tfm_cls.classify.baseline, C picked on validation) with
    the size of the pickled model and one-process texts/s (scikit-learn predicts single-threaded)."""
    rows = []
    for name in ("tfidf-word-lr", "tfidf-char-svm"):
        row, fitted = baseline_row(name, splits["train"], splits["validation"], splits["test"])
        path = out / f"{name}.pkl"
        path.write_bytes(pickle.dumps(fitted))
        sample = speed_sample(splits["test"], speed_texts)
        fitted.predict(sample[:64])
        seconds, _ = median_seconds(lambda sample=sample, fitted=fitted: fitted.predict(sample), repeats)
        row.update(size_mb=path.stat().st_size / 2**20, texts_per_s=len(sample) / seconds)
        rows.append(row)
    return rows


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


def table(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import datasets

    datasets.disable_progress_bars()
    out = args.out
    splits, _ = config_splits(args.dataset, args.data_root / args.dataset)
    test = splits["test"]
    if test.pairs is not None and not args.paired:
        parser.error(f"{args.dataset} holds sentence pairs: the full table takes single texts; "
                     "benchmarks.accuracy scores pair models, --paired RUN times them")
    work = out / f"distill-{args.dataset}"
    work.mkdir(parents=True, exist_ok=True)
    if args.paired:
        sample = speed_sample(test, args.speed_texts)
        result = paired_speed(onnx_files(Path(args.teacher))["int8"], onnx_files(Path(args.paired))["int8"],
                              sample, args.repeats, None if test.pairs is None else test.pairs[: len(sample)])
        print(json.dumps(result, indent=2))
        Results(out, f"distill-{args.dataset}-paired").write(result)
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
    if args.distilled:  # the speed target's ratio, timed in paired rounds (a drifting load slows both alike)
        paired = paired_speed(onnx_files(Path(args.teacher))["int8"], onnx_files(Path(args.distilled))["int8"],
                              speed_sample(test, args.speed_texts), max(args.repeats, 5))
    if not args.no_model2vec:
        rows.append(model2vec_row(splits, args.model2vec_dir, work))
    text = format_table(rows)
    print("\n" + text)
    if paired:
        print(f"\nours distilled int8 vs teacher int8, paired rounds: median ratio {paired['median_ratio']:.1f}x")
    path = Results(out, f"distill-{args.dataset}").write(
        {"args": vars(args), "environment": {**environment(), "threads": 1}, "results": rows, "paired": paired}, text)
    print(f"\nwrote {path}")
    return 0


def model2vec_row(splits: dict[str, Split], static_dir: Path, work: Path) -> dict:
    """The model2vec peer's row (static embeddings distilled from MiniLM once, its classifier)."""
    from benchmarks.peers.model2vec_peer import available, run_model2vec, static_model

    reason = available()
    if reason:
        return {"system": "model2vec", "skipped": reason}
    static_dir, seconds = static_model(static_dir)
    row = run_model2vec(static_dir, splits["train"], splits["validation"], splits["test"], work / "model2vec")
    row["static_distill_minutes"] = seconds / 60
    return row


# ---- summary: the targets across datasets -------------------------------------------------------------


def row_of(results: list[dict], system: str) -> dict | None:
    """The first measured row whose system name is `system` or starts with it (model2vec's carries its shape)."""
    return next((r for r in results if str(r.get("system", "")).startswith(system) and "skipped" not in r), None)


def summarize(path: Path) -> dict:
    data = read_json(path)
    results = data["results"]
    teacher, student = row_of(results, "teacher MiniLM (int8)"), row_of(results, "ours distilled (int8)")
    if teacher is None or student is None:
        raise SystemExit(f"error: {path}: no teacher or distilled int8 row (a `table` run with --distilled?)")
    tfidf = max((r for r in results if str(r.get("system", "")).startswith("tfidf")), key=lambda r: r["accuracy"])
    m2v = row_of(results, "model2vec")
    paired = data.get("paired") or {}
    ratio = paired.get("median_ratio", student["texts_per_s"] / teacher["texts_per_s"])
    minutes = student.get("train_minutes", 0.0) + student.get("labelling_minutes", 0.0)
    out = {
        "dataset": data["args"]["dataset"], "file": str(path),
        "teacher": 100 * teacher["accuracy"], "student": 100 * student["accuracy"],
        "tfidf": 100 * tfidf["accuracy"], "tfidf_name": tfidf["system"],
        "model2vec": None if m2v is None else 100 * m2v["accuracy"],
        "ratio": ratio, "paired": bool(paired), "student_mb": student["size_mb"], "teacher_mb": teacher["size_mb"],
        "minutes": minutes, "transfer_texts": student.get("transfer_texts"),
    }
    checks = {
        "gap": out["teacher"] - out["student"] <= GAP,
        "tfidf": out["student"] > out["tfidf"],
        "model2vec": out["model2vec"] is None or out["student"] > out["model2vec"],
        "speed": ratio >= SPEED,
        "budget": minutes <= BUDGET,
    }
    out["checks"] = checks
    return out


def markdown(rows: list[dict]) -> str:
    lines = [
        "| dataset | teacher int8 | ours distilled int8 | gap | best TF-IDF | model2vec | x teacher int8 texts/s "
        "| size MB (teacher) | labelling + training min | target |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        missed = [name for name, ok in r["checks"].items() if not ok]
        m2v = "" if r["model2vec"] is None else f"{r['model2vec']:.1f}"
        lines.append(
            f"| {r['dataset']} | {r['teacher']:.1f} | **{r['student']:.1f}** | {r['student'] - r['teacher']:+.1f} "
            f"| {r['tfidf']:.1f} | {m2v} | {r['ratio']:.1f}x{'' if r['paired'] else ' (unpaired)'} "
            f"| {r['student_mb']:.1f} ({r['teacher_mb']:.1f}) | {r['minutes']:.1f} "
            f"| {'met' if not missed else 'missed: ' + ', '.join(missed)} |"
        )
    return "\n".join(lines)


def summary(args: argparse.Namespace) -> int:
    latest: dict[str, dict] = {}
    for path in sorted(args.files, key=lambda f: f.name):  # the time stamp sorts: the latest last
        if "-paired-" in path.name:
            continue
        row = summarize(path)
        latest[row["dataset"]] = row
    print(markdown(list(latest.values())))
    for r in latest.values():
        print(f"{r['dataset']}: {r['file']}")
    return 0


# ---- curves: accuracy against transfer-set size and student size ----------------------------------------------


def point(run_dir: Path) -> dict:
    """One run's test accuracy, transfer-set size and parameter counts (metrics.json, model_config.json)."""
    metrics = read_json(run_dir / "metrics.json")
    config = read_json(run_dir / "model_config.json")
    embedding = config["vocab_size"] * config["d_model"]
    distillation = metrics.get("distillation", {})
    return {
        "run_dir": str(run_dir),
        "test_accuracy": 100 * metrics["test"]["accuracy"],
        "transfer_texts": distillation.get("transfer_set", {}).get("transfer_texts"),
        "num_parameters": metrics["num_parameters"],
        "encoder_parameters": metrics["num_parameters"] - embedding,
        "d_model": config["d_model"],
        "num_layers": config["num_layers"],
        "steps": metrics["steps"],
        "train_minutes": metrics["train_seconds"] / 60,
    }


def parse_line(text: str) -> tuple[str, list[Path]]:
    label, sep, runs = text.partition("=")
    if not sep or not runs:
        raise SystemExit(f"expected LABEL=RUN[,RUN...], got {text!r}")
    return label, [Path(r) for r in runs.split(",") if r]


def curves(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    panels = [("transfer", "transfer_texts", "transfer-set size (texts labelled by the teacher)", args.transfer),
              ("size", "encoder_parameters", "student parameters outside the embedding table", args.size)]
    panels = [panel for panel in panels if panel[3]]
    if not panels:
        parser.error("give at least one --transfer or --size line")
    lines_ref = []
    if args.teacher:
        lines_ref.append(("teacher", 100 * read_json(Path(args.teacher) / "metrics.json")["test"]["accuracy"]))
    for item in args.baseline:
        label, _, value = item.partition("=")
        lines_ref.append((label, float(value)))
    fig = Figure(figsize=(6 * len(panels), 4.2))
    data = {"reference": dict(lines_ref), "panels": {}}
    for i, (name, key, xlabel, specs) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        data["panels"][name] = {}
        for spec in specs:
            label, runs = parse_line(spec)
            points = sorted((point(r) for r in runs), key=lambda pt: pt[key])
            data["panels"][name][label] = points
            ax.plot([pt[key] for pt in points], [pt["test_accuracy"] for pt in points], marker="o", label=label)
            for pt in points:
                print(f"{name:<9} {label:<28} {key}={pt[key]:>10,} test {pt['test_accuracy']:5.1f}  "
                      f"(d {pt['d_model']}, {pt['num_layers']} layers, {pt['steps']} steps, {pt['run_dir']})")
        for ref_label, value in lines_ref:
            ax.axhline(value, linestyle="--", linewidth=1, color="grey")
            ax.annotate(f"{ref_label} {value:.1f}", (0.01, value), xycoords=("axes fraction", "data"),
                        fontsize=8, va="bottom")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ticks: list[float] = []
        for x in sorted({pt[key] for pts in data["panels"][name].values() for pt in pts}):
            if not ticks or x > 1.3 * ticks[-1]:  # labels that would overlap on the log axis: the first only
                ticks.append(x)
        ax.set_xticks(ticks)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy (%)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    write_json(out.with_suffix(".json"), data)
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.distillation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("table", help="the systems side by side on one dataset")
    p.add_argument("--dataset", required=True)
    p.add_argument("--data-root", type=Path, default=DATA_ROOT, help="folder of dataset folders (default: %(default)s)")
    p.add_argument("--teacher", required=True, help="the MiniLM teacher's run directory")
    p.add_argument("--supervised", help="ours trained supervised only (configs/cls/<dataset>.yaml)")
    p.add_argument("--distilled", help="ours distilled (configs/distill/<dataset>.yaml)")
    p.add_argument("--distilled-variant", action="append", default=[], metavar="NAME=RUN",
                   help="more distilled runs (options measured against the default)")
    p.add_argument("--model2vec-dir", type=Path, default=OUT / "model2vec-minilm",
                   help="the static model distilled from MiniLM (made here once)")
    p.add_argument("--no-model2vec", action="store_true")
    p.add_argument("--repeats", type=int, default=3, help="timed passes over the speed sample (median)")
    p.add_argument("--speed-texts", type=int, default=1000,
                   help="timed passes run on the first N test texts (0: all); accuracy is always the whole test set")
    p.add_argument("--paired", metavar="RUN",
                   help="only time RUN/model.int8.onnx against the teacher's int8 file in paired rounds")
    p.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")
    p = sub.add_parser("summary", help="the issue-14 targets across datasets, from table's JSON files")
    p.add_argument("files", nargs="+", type=Path, help="distill-<dataset>-<time>.json files of `table`")
    p = sub.add_parser("curves", help="accuracy against transfer-set size and student size")
    p.add_argument("--transfer", action="append", default=[], metavar="LABEL=RUN,RUN", help="accuracy vs transfer-set size")
    p.add_argument("--size", action="append", default=[], metavar="LABEL=RUN,RUN", help="accuracy vs student size")
    p.add_argument("--teacher", help="the teacher's run directory (a horizontal line)")
    p.add_argument("--baseline", action="append", default=[], metavar="LABEL=ACCURACY", help="a horizontal line (%%)")
    p.add_argument("--out", default=str(OUT / "distill_curves.png"), help="the figure (default: %(default)s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if args.what == "table":
        return table(args, sub.choices["table"])
    return summary(args) if args.what == "summary" else curves(args, sub.choices["curves"])


if __name__ == "__main__":
    raise SystemExit(main())
