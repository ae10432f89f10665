"""Class weights (issue 27): the same preset, seed and step budget without and with balanced weights.

Class weights (issue 27): the same preset, seed and step budget with and without
`train.class_weight: balanced` (single-label) / `multi_label.pos_weight: balanced` (multi-label).

    python -m benchmarks.class_weights                        # sms_spam and go_emotions
    python -m benchmarks.class_weights --datasets sms_spam --steps 600 --seeds 42,43

sms_spam (13 % spam; configs/cls/sms_spam.yaml, from scratch): test spam recall and precision,
accuracy, macro-F1. go_emotions (28 labels; configs/cls/go_emotions.yaml, from scratch):
test macro-F1, micro-F1, subset accuracy. Budgets are optimizer steps (train.max_steps, no time
limit), so a shared machine gives every run the same work. Writes
bench_results/class-weights-<time>.json and prints one table.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from benchmarks.harness.cpu import CpuClock
from benchmarks.harness.data import DATA_ROOT, REPO
from benchmarks.harness.results import OUT, Results, environment

# dataset -> (preset, the weighting key, the minority class whose recall is reported, or None)
DATASETS = {
    "sms_spam": ("sms_spam", "train.class_weight", "spam"),
    "go_emotions": ("go_emotions", "multi_label.pos_weight", None),
}
DEFAULT_STEPS = {"sms_spam": 600, "go_emotions": 1000}


def run(dataset: str, weighting: str, seed: int, steps: int, data_root: Path, out: Path, extra: list[str]) -> dict:
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.train import train

    preset, key, minority = DATASETS[dataset]
    run_dir = out / "runs" / f"{dataset}-{weighting}-seed{seed}"
    overrides = [f"data.path={data_root / dataset}", f"run_dir={run_dir}", f"seed={seed}", "train.progress=false",
                 f"train.max_steps={steps}", "train.max_minutes=null", "train.early_stopping_patience=null",
                 f"{key}={weighting}", *extra]
    cfg = load_config(ClassifierConfig, [REPO / "configs" / "cls" / f"{preset}.yaml"], overrides)
    cpu = CpuClock()
    metrics = train(cfg, overwrite=True)
    test = metrics["test"]
    row = {"dataset": dataset, "weighting": f"{key}={weighting}", "seed": seed, "steps": metrics["steps"],
           "best_step": metrics["best_step"], "cpu_minutes": cpu.minutes,
           "train_minutes": metrics["train_seconds"] / 60, "macro_f1": test["macro_f1"], "run_dir": str(run_dir)}
    if minority is not None:
        row.update(accuracy=test["accuracy"], minority=minority, minority_recall=test["per_class"][minority]["recall"],
                   minority_precision=test["per_class"][minority]["precision"])
        row["weights"] = metrics.get("loss_weights", {}).get("weights")
    else:
        row.update(micro_f1=test["micro_f1"], subset_accuracy=test["subset_accuracy"])
    return row


def format_table(rows: list[dict]) -> str:
    lines = [f"{'dataset':<12} {'weighting':<36} {'seed':>4} {'steps':>5} {'macro-F1':>8} {'accuracy':>8} "
             f"{'min. recall':>11} {'min. prec.':>10} {'micro-F1':>8} {'cpu min':>7}"]
    def cell(r: dict, key: str, width: int) -> str:
        return f"{r[key]:>{width}.4f}" if key in r else " " * width

    for r in rows:
        lines.append(f"{r['dataset']:<12} {r['weighting']:<36} {r['seed']:>4} {r['steps']:>5} {cell(r, 'macro_f1', 8)} "
                     f"{cell(r, 'accuracy', 8)} {cell(r, 'minority_recall', 11)} {cell(r, 'minority_precision', 10)} "
                     f"{cell(r, 'micro_f1', 8)} {r['cpu_minutes']:>7.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.class_weights", description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="sms_spam,go_emotions")
    parser.add_argument("--data-root", type=Path, default=DATA_ROOT)
    parser.add_argument("--seeds", default="42")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps of every run (default: per dataset)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--set", dest="extra", action="append", default=[], help="one more override for every run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    results = Results(args.out, "class-weights")
    rows = []
    for dataset in args.datasets.split(","):
        steps = args.steps or DEFAULT_STEPS[dataset]
        for seed in map(int, args.seeds.split(",")):
            for weighting in ("none", "balanced"):  # paired: the two runs of a seed one after the other
                rows.append(run(dataset, weighting, seed, steps, args.data_root, args.out, args.extra))
                print(format_table(rows[-1:]), flush=True)
                results.write({"rows": rows, **environment()}, format_table(rows))
    print(format_table(rows))
    print(f"wrote {results.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
