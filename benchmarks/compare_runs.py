"""Comparing runs: what each finished run changed against the first, and its steps, minutes and metric.

Side-by-side table of finished run directories (e.g. distillation probes): what
each changed against the first one, and its steps, minutes and validation / test metric.

    python -m benchmarks.compare_runs /work/runs/probe/mr-base /work/runs/probe/mr-out ... \\
        --out bench_results/probes-mr.json

"changed" lists the config keys (distill_config.yaml, else config.yaml, with defaults filled in)
whose value differs from the first run's, run_dir, name and the teacher's hash aside. The metric is train.best_metric's family: accuracy for
single-label runs, else the task's first metric. A table goes to stdout, the rows (JSON) to --out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfm_cls.config import ClassifierConfig, load_config, to_dict
from tfm_cls.distill import DistillConfig
from tfm_cls.errors import ConfigError
from tfm_cls.io import read_json, write_json
from tfm_cls.runs import config_differences

SKIPPED_KEYS = ("run_dir", "name", "teacher.sha256")


class BadRun(Exception):
    """A run directory the table cannot read: main prints one `error:` line and exits with 2."""


METRICS = ("accuracy", "micro_f1", "macro_f1", "pearson")


def run_config(run_dir: Path) -> dict:
    """The run's resolved config, keys it predates filled in with their defaults."""
    for name, cls in (("distill_config.yaml", DistillConfig), ("config.yaml", ClassifierConfig)):
        if (run_dir / name).is_file():
            try:
                return to_dict(load_config(cls, run_dir / name))
            except ConfigError as err:
                raise BadRun(f"{run_dir / name}: {err}") from err
    raise BadRun(f"{run_dir}: no distill_config.yaml or config.yaml (not a run directory)")


def row(run_dir: Path, reference: dict) -> dict:
    metrics_path = run_dir / "metrics.json"
    if not metrics_path.is_file():
        raise BadRun(f"{run_dir}: metrics.json missing (the run has not finished)")
    metrics = read_json(metrics_path)
    metric = next((m for m in METRICS if m in metrics["test"]), None)
    changed = [(k, b) for k, _, b in config_differences(reference, run_config(run_dir)) if k not in SKIPPED_KEYS]
    return {
        "run_dir": str(run_dir),
        "changed": {k: v for k, v in changed},
        "steps": metrics.get("steps"),
        "train_minutes": metrics.get("train_seconds", 0.0) / 60,
        "metric": metric,
        "validation": metrics["validation"].get(metric),
        "test": metrics["test"].get(metric),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compare_runs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="finished run directories; the first is the reference")
    p.add_argument("--out", type=Path, help="write the rows here (JSON)")
    args = p.parse_args(argv)
    try:
        reference = run_config(args.runs[0])
        rows = [row(r, reference) for r in args.runs]
    except BadRun as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{'run':<24} {'steps':>6} {'min':>5} {'metric':<9} {'val':>6} {'test':>6}  changed vs {args.runs[0].name}")
    for r in rows:
        changed = ", ".join(f"{k}={v}" for k, v in r["changed"].items()) or "-"
        print(f"{Path(r['run_dir']).name:<24} {r['steps'] or 0:>6} {r['train_minutes']:>5.1f} {r['metric']:<9} "
              f"{100 * r['validation']:>6.2f} {100 * r['test']:>6.2f}  {changed}")
    if args.out:
        write_json(args.out, {"reference": str(args.runs[0]), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
