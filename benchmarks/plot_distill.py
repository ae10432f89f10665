"""The curves of issue 14 where the target is missed: student test accuracy against the size of the
transfer set and against the student's size, read from finished distillation run directories.

    python benchmarks/plot_distill.py --out bench_results/distill_curves.png \\
        --transfer "own tokenizer=runs/trec-distill-c0,runs/trec-distill" \\
        --transfer "teacher tokenizer + PCA=runs/trec-distill-tpca,runs/trec-distill-tpca-c20" \\
        --size "10 minutes=runs/trec-size-d128-l2,runs/trec-size-d256-l2,runs/trec-size-d128-l4" \\
        --teacher runs/trec-minilm --baseline "TF-IDF + LR=88.4"

Each --transfer / --size is one line: a label and the run directories of its points (comma-separated).
x is the transfer set's size (texts the teacher labelled) or the student's parameters outside
its token embedding table (the part that costs time per token); y is test accuracy (%). The
teacher and baselines are horizontal lines. A table of the points goes to stdout, the figure
(PNG) and its data (JSON) to --out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfm_cls.io import atomic_path, read_json, write_json  # noqa: E402


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--transfer", action="append", default=[], metavar="LABEL=RUN,RUN", help="accuracy vs transfer-set size")
    p.add_argument("--size", action="append", default=[], metavar="LABEL=RUN,RUN", help="accuracy vs student size")
    p.add_argument("--teacher", help="the teacher's run directory (a horizontal line)")
    p.add_argument("--baseline", action="append", default=[], metavar="LABEL=ACCURACY", help="a horizontal line (%%)")
    p.add_argument("--out", default="bench_results/distill_curves.png")
    args = p.parse_args(argv)
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, NullFormatter

    panels = [("transfer", "transfer_texts", "transfer-set size (texts labelled by the teacher)", args.transfer),
              ("size", "encoder_parameters", "student parameters outside the embedding table", args.size)]
    panels = [panel for panel in panels if panel[3]]
    if not panels:
        raise SystemExit("give at least one --transfer or --size line")
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


if __name__ == "__main__":
    sys.exit(main())
