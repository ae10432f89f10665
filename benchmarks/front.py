"""The accuracy-speed front (issue 26): every system on one dataset, test accuracy against one-thread texts/s.

The accuracy-speed front (issue 26): every system on one dataset as a point of test accuracy
against end-to-end texts/s on ONE thread (tokenisation / normalisation included), sizes as labels.

    python -m benchmarks.front --dataset trec --teacher runs/trec-minilm \\
        [--supervised RUN ...] [--student RUN ...] [--cut NAME=RUN ...] [--fasttext-autotune 300]
    python -m benchmarks.front --dataset trec --runs runs      # the runs found by name

Systems: TF-IDF (tfm_cls.classify.baseline), fastText with word bigrams and with autotune on the
validation split (benchmarks/peers/fasttext_peer.py), model2vec where installed, and ours through the
ONNX runtime of `tfm-cls infer`: the teacher fp32 / int8, ours supervised, the d128 student,
students cut from the teacher (`tfm-cls compress`; drawn as a line). A run given several times
under one name (`--cut cut3=RUN_SEED1 --cut cut3=RUN_SEED2`, `--student` twice) is one point:
the mean test accuracy of its seeds, with their standard deviation; its speed is the first run's.

Each ONNX run directory gets model.onnx (exported, verified) and model.int8.onnx (per-channel
int8 with int8 embedding tables where the gate allows: `tfm-cls quantize`, gated on the
dataset's test.jsonl as docs/distillation.md does) where it lacks them. Speed: `--repeats` passes
over the first `--speed-texts` test texts, the systems taking turns within each pass (paired
rounds: a drifting load on a shared machine slows all alike); the median per system. Writes
bench_results/front-<dataset>-<time>.json and .md, and the figure docs/img/front-<dataset>.png.
"""

from __future__ import annotations

import argparse
import json
import logging
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.harness.baselines import baseline_row
from benchmarks.harness.data import DATA_ROOT, REPO, Split, config_splits, speed_sample
from benchmarks.harness.models import exported
from benchmarks.harness.results import OUT, Results, environment
from benchmarks.harness.timing import paired_rounds

logger = logging.getLogger("benchmarks.front")

Predictor = Callable[[list[str]], np.ndarray]


# ---- our runs -----------------------------------------------------------------------------------------


def onnx_pair(run_dir: Path, gate_data: Path) -> dict[str, Path]:
    """RUN/model.onnx and RUN/model.int8.onnx (the gated quantization, int8 tables where it allows)."""
    from tfm_cls.export.quantize import quantize_and_evaluate

    fp32, int8 = exported(run_dir), run_dir / "model.int8.onnx"
    if not int8.is_file():
        logger.info("%s", quantize_and_evaluate(fp32, gate_data, int8, per_channel=True, threshold=0.5))
    return {"fp32": fp32, "int8": int8}


def onnx_predictor(path: Path) -> Predictor:
    from tfm_cls.runtime.session import Classifier

    clf = Classifier(str(path), threads=1)
    return lambda texts: clf.predict_proba(texts, 32)[0].argmax(1)


def run_info(run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    info = {"run_dir": str(run_dir), "num_parameters": metrics.get("num_parameters"),
            "train_minutes": metrics.get("train_seconds", 0) / 60}
    if "distillation" in metrics:
        d = metrics["distillation"]
        info.update(labelling_minutes=d.get("labelling_seconds", 0) / 60, student_layers=d.get("student_layers"))
    return info


# ---- the points ---------------------------------------------------------------------------------------


def accuracy(predicted: np.ndarray, gold: np.ndarray) -> float:
    return float(np.mean(np.asarray(predicted) == np.asarray(gold)))


def ours_points(kind: str, name: str, runs: list[Path], test: Split, gate: Path, precisions=("int8",)) -> list[dict]:
    """One point per precision: accuracy over the seeds' runs, the first run timed."""
    points = []
    for precision in precisions:
        accs, infos = [], []
        for run in runs:
            path = onnx_pair(run, gate)[precision]
            accs.append(accuracy(onnx_predictor(path)(test.texts), test.targets))
            infos.append(run_info(run))
        first = onnx_pair(runs[0], gate)[precision]
        meta = _quantization(first)
        points.append({
            "system": f"{name} ({precision})", "kind": kind, "accuracy": float(np.mean(accs)),
            "accuracy_std": float(np.std(accs, ddof=1)) if len(accs) > 1 else None, "seeds": len(accs),
            "seed_accuracies": accs, "size_mb": first.stat().st_size / 2**20, "file": str(first),
            "embeddings": meta.get("embeddings"), "runs": infos, "predictor": onnx_predictor(first),
        })
    return points


def _quantization(path: Path) -> dict:
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return json.loads(meta.get("tfm_cls.quantization", "{}"))


def tfidf_points(splits: dict[str, Split], work: Path) -> list[dict]:
    """The two single-label TF-IDF baselines (C picked on validation), sized as pickled."""
    points = []
    for name in ("tfidf-word-lr", "tfidf-char-svm"):
        row, fitted = baseline_row(name, splits["train"], splits["validation"], splits["test"])
        path = work / f"{name}.pkl"
        path.write_bytes(pickle.dumps(fitted))
        points.append({"system": name, "kind": "classical", "accuracy": row["accuracy"], "size_mb": path.stat().st_size / 2**20,
                       "C": row["C"], "train_minutes": row["train_minutes"], "predictor": fitted.predict})
    return points


def fasttext_points(splits: dict[str, Split], work: Path, autotune_seconds: int, seed: int) -> list[dict]:
    from benchmarks.peers.fasttext_peer import available, train_fasttext

    reason = available()
    if reason:
        return [{"system": "fastText", "kind": "classical", "skipped": reason}]
    points = []
    for seconds in (0, autotune_seconds) if autotune_seconds else (0,):
        ft = train_fasttext(splits["train"], splits["validation"], work / "fasttext", autotune_seconds=seconds, seed=seed)
        predictor = ft.pop("predictor")
        points.append({**ft, "kind": "classical", "accuracy": accuracy(predictor(splits["test"].texts), splits["test"].targets),
                       "size_mb": Path(ft["model_path"]).stat().st_size / 2**20, "predictor": predictor,
                       "autotune_seconds": seconds})
    return points


def model2vec_points(splits: dict[str, Split], work: Path, static_dir: Path) -> list[dict]:
    from benchmarks.peers.model2vec_peer import available, run_model2vec, static_model

    reason = available()
    if reason:
        return [{"system": "model2vec", "kind": "peer", "skipped": reason}]
    folder, _ = static_model(static_dir)
    row = run_model2vec(folder, splits["train"], splits["validation"], splits["test"], work / "model2vec")
    return [{**row, "kind": "peer", "timed_apart": True}]  # its own timing (a torch pipeline, one thread)


# ---- timing, table, figure ----------------------------------------------------------------------------


def time_in_turns(points: list[dict], texts: list[str], repeats: int) -> None:
    """texts/s of every point with a predictor: `repeats` paired rounds, each system once per round
    (after a warm-up on the first 64 texts)."""
    timed = [p for p in points if "predictor" in p]
    for p in timed:
        p["predictor"](texts[:64])  # warm-up
    rounds = paired_rounds({i: (lambda p=p: p["predictor"](texts)) for i, p in enumerate(timed)}, repeats, warmup=0)
    for i, p in enumerate(timed):
        p["texts_per_s"] = len(texts) / rounds.median(i)
        p["texts_per_s_passes"] = repeats
        del p["predictor"]


def format_table(points: list[dict]) -> str:
    teacher = next((p["texts_per_s"] for p in points if p.get("kind") == "teacher" and "int8" in p["system"]), None)
    lines = ["| system | test acc % | ± (seeds) | size MB | texts/s (1 thread) | x teacher int8 |",
             "|---|---:|---:|---:|---:|---:|"]
    for p in points:
        if "skipped" in p:
            lines.append(f"| {p['system']} | skipped: {p['skipped']} | | | | |")
            continue
        spread = f"{100 * p['accuracy_std']:.1f} ({p['seeds']})" if p.get("accuracy_std") is not None else f"({p.get('seeds', 1)})"
        ratio = f"{p['texts_per_s'] / teacher:.1f}x" if teacher else ""
        lines.append(f"| {p['system']} | {100 * p['accuracy']:.1f} | {spread} | {p['size_mb']:.1f} | "
                     f"{p['texts_per_s']:,.0f} | {ratio} |")
    return "\n".join(lines)


KIND_STYLE = {"teacher": ("tab:red", "s"), "ours": ("tab:blue", "o"), "student": ("tab:blue", "D"),
              "cut": ("tab:purple", "^"), "classical": ("tab:gray", "o"), "peer": ("tab:green", "v")}


def plot_front(points: list[dict], dataset: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [p for p in points if "skipped" not in p]
    fig, ax = plt.subplots(figsize=(8, 5.2))
    for p in shown:
        color, marker = KIND_STYLE.get(p["kind"], ("black", "o"))
        x, y = p["texts_per_s"], 100 * p["accuracy"]
        err = 100 * p["accuracy_std"] if p.get("accuracy_std") else None
        ax.errorbar(x, y, yerr=err, color=color, marker=marker, markersize=7, capsize=3, linestyle="none")
        ax.annotate(f"{p['system']}\n{p['size_mb']:.1f} MB", (x, y), textcoords="offset points", xytext=(6, 4), fontsize=7)
    # the line: the first-K cuts (`tfm-cls compress --layers K`: cutK), and the teacher, the cut that keeps every layer
    first_k = [p for p in shown if p["kind"] == "cut" and re.fullmatch(r"cut\d+ \(int8\)", p["system"])]
    teacher = [p for p in shown if p["kind"] == "teacher" and "int8" in p["system"]]
    line = sorted(teacher + first_k, key=lambda p: p["texts_per_s"])
    if len(line) > 1:
        ax.plot([p["texts_per_s"] for p in line], [100 * p["accuracy"] for p in line], color="tab:purple", alpha=0.6,
                label="the teacher's first K layers (int8)")
        ax.legend(loc="lower left", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("texts/s, end to end, one thread (log scale)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{dataset}: accuracy vs speed")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def grouped(items: list[str]) -> dict[str, list[Path]]:
    """NAME=RUN items -> {NAME: [RUN, ...]} in the order given (several runs of a name: seeds)."""
    groups: dict[str, list[Path]] = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"expected NAME=RUN, got {item!r}")
        name, run = item.split("=", 1)
        groups.setdefault(name, []).append(Path(run))
    return groups


def discovered(runs: Path, dataset: str) -> dict[str, list[str]]:
    """The runs of `dataset` under `runs` by the names the docs' commands give them: D-minilm (the
    teacher), D (ours supervised), D-distill (the d128 student), D-minilm-cut* (`tfm-cls compress`);
    a `-seedN` suffix makes a run one more seed of the same point."""
    found: dict[str, list[str]] = {"teacher": [], "supervised": [], "student": [], "cut": []}
    for run in sorted(p for p in runs.glob(f"{dataset}*") if (p / "metrics.json").is_file()):
        base = re.sub(r"-seed\d+$", "", run.name)
        if base == f"{dataset}-minilm":
            found["teacher"].append(str(run))
        elif base == dataset:
            found["supervised"].append(str(run))
        elif base == f"{dataset}-distill":
            found["student"].append(str(run))
        elif base.startswith(f"{dataset}-minilm-cut"):
            found["cut"].append(f"{base.removeprefix(f'{dataset}-minilm-')}={run}")
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.front", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", required=True)
    p.add_argument("--data-root", type=Path, default=DATA_ROOT, help="folder of dataset folders (default: %(default)s)")
    p.add_argument("--runs", help="find the runs here by name (D-minilm, D, D-distill, D-minilm-cut*, -seedN)")
    p.add_argument("--teacher", help="the teacher's run directory (MiniLM fine-tuned)")
    p.add_argument("--supervised", action="append", default=[], help="ours trained supervised (a run; again: a seed)")
    p.add_argument("--student", action="append", default=[], help="the d128 distilled student (a run; again: a seed)")
    p.add_argument("--cut", action="append", default=[], metavar="NAME=RUN", help="a student cut from the teacher")
    p.add_argument("--fasttext-autotune", type=int, default=300, help="seconds of fastText autotune (0: bigrams only)")
    p.add_argument("--no-fasttext", action="store_true")
    p.add_argument("--no-model2vec", action="store_true")
    p.add_argument("--model2vec-dir", type=Path, default=OUT / "model2vec-minilm")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds (median)")
    p.add_argument("--speed-texts", type=int, default=500, help="texts of each timed pass (the first N test texts)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")
    p.add_argument("--img", type=Path, default=REPO / "docs" / "img", help="where the figure goes (default: %(default)s)")
    args = p.parse_args(argv)
    if args.runs:
        found = discovered(Path(args.runs), args.dataset)
        args.teacher = args.teacher or (found["teacher"] or [None])[0]
        args.supervised += found["supervised"]
        args.student += found["student"]
        args.cut += found["cut"]
    if not args.teacher:
        p.error(f"no teacher: give --teacher RUN, or --runs ROOT holding {args.dataset}-minilm")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    import datasets

    datasets.disable_progress_bars()
    folder = Path(args.data_root) / args.dataset
    gate = folder / ("validation.jsonl" if (folder / "validation.jsonl").is_file() else "test.jsonl")
    out = Path(args.out)
    work = out / f"front-{args.dataset}"
    work.mkdir(parents=True, exist_ok=True)
    splits, _ = config_splits(args.dataset, folder)
    test = splits["test"]

    points = ours_points("teacher", "teacher MiniLM", [Path(args.teacher)], test, gate, ("fp32", "int8"))
    if args.supervised:
        points += ours_points("ours", "ours supervised", [Path(r) for r in args.supervised], test, gate)
    if args.student:
        points += ours_points("student", "d128 student", [Path(r) for r in args.student], test, gate)
    for name, runs in grouped(args.cut).items():
        points += ours_points("cut", name, runs, test, gate)
    points += tfidf_points(splits, work)
    if not args.no_fasttext:
        points += fasttext_points(splits, work, args.fasttext_autotune, args.seed)
    time_in_turns(points, speed_sample(test, args.speed_texts), args.repeats)
    if not args.no_model2vec:
        points += model2vec_points(splits, work, Path(args.model2vec_dir))

    table = format_table(points)
    print("\n" + table)
    figure = plot_front(points, args.dataset, Path(args.img) / f"front-{args.dataset}.png")
    path = Results(out, f"front-{args.dataset}").write(
        {"args": vars(args), "environment": {**environment(), "threads": 1}, "gate_data": str(gate), "points": points,
         "figure": str(figure)}, table)
    print(f"\nwrote {path} and {figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
