"""Issue 36's targets: the recipe (`tfm-cls train --data DIR`) against TF-IDF, fastText and SetFit, per set and K/class.

Rows: data set x sample. `full` is the shared folder as it is; `K/class` rows are seeded samples
of K training examples per class (--shots, --seeds; benchmarks.harness.samples: the whole test
split kept, no validation file), drawn once into --samples-dir and reused. Columns: the test
metric of each system (accuracy for single-label, micro-F1 for multi-label, Pearson for
regression; x 100; K/class rows: the mean over the seeds, then each seed's value), the CPU minutes
of each, and the issue's targets: the recipe >= the best classical baseline, >= SetFit, and never
below its own step-0 validation score.

    python -m benchmarks.recipe --quick --systems tfidf,recipe       # smoke run: trec, 8/class, seed 0, 2 min
    python -m benchmarks.recipe --list                               # the planned rows, and which are cached
    python -m benchmarks.recipe                                      # the whole table (~12 hours of one core)
    python -m benchmarks.recipe --sets sst2,ag_news --samples few --systems recipe,setfit
    python -m benchmarks.recipe --sets trec,/tmp/longtail            # a folder outside --data-root
Writes bench_results/recipe-<time>.json and .md; the rows are cached (below), so the table can be
filled over several invocations and an interrupted one resumes.

Systems (--systems; a system that cannot run here is a skipped cell with its reason):
- recipe: `tfm-cls train --data SAMPLE --minutes M run_dir=RUN train.num_threads=1` in a
  subprocess (OMP_NUM_THREADS=1); its test metrics, best_step, step-0 and kept validation scores
  (history.json, metrics.json) and its own TF-IDF baseline (metrics.json `baseline`) are read back.
  CPU minutes: the child processes' user + system time (getrusage RUSAGE_CHILDREN), loading,
  evaluation and export included. The optimizer checkpoint (last.ckpt) is deleted after a finished
  run unless --keep-checkpoints.
- tfidf: the library's selected baselines (tfm_cls.classify.baseline: baseline_names, plus
  tfidf-ovr-svm for multi-label since micro-F1 is the table's metric there); the column shows the
  one with the best mean. Each picks its C (or alpha; multi-label: each label's threshold too) on
  the folder's validation split where it has one. Where it has none: with at most CV_MAX_TRAIN
  training texts (every few-label sample), a seeded 5-fold cross-validation on train (stratified
  for single-label; out-of-fold scores over the whole grid, the thresholds tuned on them), then a
  refit on all of train; on larger sets, a seeded 10 % of train held out as validation (the fit
  then sees 90 %, as benchmarks.accuracy's baselines do). Cross-validation rather than
  `tfidf-word-svm` (the one-value grid that needs no validation) because that baseline drops
  words seen once (min_df 2), most words of 16 texts, has no multi-label form, and a baseline given
  its best chance is the honest bar; the 10 % hold-out on large sets because 5 folds x a grid on
  53k texts (tnews) cost more than the recipe's own 15 minutes.
- fasttext: benchmarks.peers.fasttext_peer, the bigram recipe (no autotune: few-label samples have
  no validation); single-label single texts only.
- setfit: benchmarks.peers.setfit_peer, SetFit 1.2 in its own interpreter (--setfit-python) on the
  packaged MiniLM, the paper's settings, one thread, the body's training stopped at --minutes.
  Run on the few-label samples, and on full sets of at most --setfit-max-train texts (its pairs
  grow with N); not on sentence pairs or regression.

Cache: one JSON file per (system, set, sample) under OUT/recipe-rows/ (OUT/recipe-rows-quick/ for
--quick), reused when its settings (the budget, the folds, ...) match the run's (--reuse, the
default); --fresh recomputes. Failed rows are not cached (the next invocation retries them).
Runs go to OUT/recipe-runs/<set>-<sample>[-<system>]/.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.baselines import CV_FOLDS, CV_MAX_TRAIN, HOLDOUT, TASK_METRIC, tfidf_row
from benchmarks.harness.cpu import CpuClock
from benchmarks.harness.data import DATA_ROOT, Split
from benchmarks.harness.results import OUT, Results, environment
from benchmarks.harness.samples import Columns, columns_of, read_splits, sample_name, write_sample
from tfm_cls.classify.baseline import split_metrics
from tfm_cls.io import write_text
from tfm_cls.runtime.jsonl import read_jsonl

logger = logging.getLogger("benchmarks.recipe")

SETS = ("ag_news", "go_emotions", "mr_polarity", "sick", "sms_spam", "sst2", "tnews", "trec")
"""Every shared data set: a `full` row each."""
FEW_SETS = ("sst2", "ag_news", "trec", "go_emotions")
"""The sets the few-label samples are drawn from (issue 36's targets table)."""
SYSTEMS = ("recipe", "tfidf", "fasttext", "setfit")
SETFIT_MAX_TRAIN = 1000
"""Full sets SetFit runs on by default: at most this many training texts (40k pairs)."""
QUICK = {"sets": ["trec"], "samples": ["few"], "shots": [8], "seeds": [0], "minutes": 2.0}


# ---- what is measured: samples ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Sample:
    """One row's data: a set's folder as it is (shots None) or its K-shot sample of one seed."""

    set: str
    source: Path
    shots: int | None = None
    seed: int | None = None

    @property
    def name(self) -> str:
        return sample_name(self.shots, self.seed)

    def folder(self, samples_dir: Path) -> Path:
        """The folder systems read: the source, or the sample's (drawn and written on first use)."""
        if self.shots is None:
            return self.source
        return write_sample(self.source, samples_dir / f"{self.set}-{self.shots}-{self.seed}", self.shots, self.seed)


def set_folder(name: str, data_root: Path) -> tuple[str, Path]:
    """(set name, folder) of a --sets item: a name under --data-root, or a folder's path."""
    path = Path(name).expanduser()
    if os.sep in name or (path.is_dir() and not (data_root / name).is_dir()):
        return path.resolve().name, path
    return name, data_root / name


@functools.cache
def peek(folder: Path, rows: int = 200) -> tuple[Columns, int]:
    """A folder's columns and task (from its first training rows) and its number of training rows."""
    first = []
    count = 0
    for _, row in read_jsonl(folder / "train.jsonl"):  # lines end at "\n" only (tfm_cls.runtime.jsonl)
        count += 1
        if len(first) < rows:
            first.append(row)
    return columns_of(first), count


def plan_samples(sets: list[str], few_sets: list[str], kinds: list[str], shots: list[int], seeds: list[int],
                 data_root: Path) -> tuple[list[Sample], list[str]]:
    """The rows' samples in table order (per set: full, then each K and seed), and one line per
    set left out (no folder)."""
    samples, missing = [], []
    for item in sets:
        name, folder = set_folder(item, data_root)
        if not (folder / "train.jsonl").is_file():
            missing.append(f"{name}: no {folder}/train.jsonl")
            continue
        if "full" in kinds:
            samples.append(Sample(name, folder))
        if "few" in kinds and (name in few_sets or item in few_sets) and peek(folder)[0].task != "regression":
            samples += [Sample(name, folder, k, s) for k in shots for s in seeds]
    return samples, missing


# ---- the result cache ---------------------------------------------------------------------------------


class RowCache:
    """One JSON file per (system, set, sample): `get` returns a finished row made with the same
    settings, `put` stores one (atomically). Rows with an error or a skip are never stored."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def path(self, system: str, set_name: str, sample: str) -> Path:
        return self.folder / f"{set_name}-{sample}-{system}.json"

    def get(self, system: str, set_name: str, sample: str, settings: dict[str, Any]) -> dict[str, Any] | None:
        path = self.path(system, set_name, sample)
        if not path.is_file():
            return None
        row = json.loads(path.read_text(encoding="utf-8"))
        if row.get("settings") != json.loads(json.dumps(settings)):
            logger.info("%s: made with other settings (%s), recomputed", path.name, row.get("settings"))
            return None
        return row

    def put(self, row: dict[str, Any]) -> None:
        if "error" in row or "skipped" in row:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        write_text(self.path(row["system"], row["set"], row["sample"]),
                   json.dumps(row, indent=2, ensure_ascii=False, default=_plain) + "\n")


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def measured(cache: RowCache, system: str, sample: Sample, settings: dict[str, Any], compute: Callable[[], dict],
             fresh: bool = False) -> tuple[dict[str, Any], bool]:
    """The row of `system` on `sample`: the cached one (unless `fresh`), else `compute()`'s, stored.
    A failure becomes a row with `error` (one failing system must not lose the others' rows).
    Returns (row, whether it came from the cache)."""
    if not fresh:
        cached = cache.get(system, sample.set, sample.name, settings)
        if cached is not None:
            return cached, True
    key = {"set": sample.set, "sample": sample.name, "shots": sample.shots, "seed": sample.seed, "system": system}
    try:
        row = {**key, **compute(), "settings": settings}
    except Exception as err:
        logger.exception("%s %s %s failed", sample.set, sample.name, system)
        row = {**key, "error": f"{type(err).__name__}: {err}"[:500], "settings": settings}
    cache.put(row)
    return row, False


# ---- the systems --------------------------------------------------------------------------------------


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def recipe_row(folder: Path, run_dir: Path, minutes: float, metric_name: str, keep_checkpoint: bool = False) -> dict:
    """`tfm-cls train --data folder` in a child process, and what its run directory says."""
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir.parent / f"{run_dir.name}.log"
    command = [sys.executable, "-m", "tfm_cls.cli", "train", "--data", str(folder), "--minutes", f"{minutes:g}",
               "--overwrite", f"run_dir={run_dir}", "train.num_threads=1", "train.progress=false"]
    before, start = _children_cpu_seconds(), time.perf_counter()
    with log.open("w", encoding="utf-8") as sink:
        done = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **ONE_THREAD},
                              timeout=minutes * 60 * 2 + 900)
    wall, cpu = time.perf_counter() - start, _children_cpu_seconds() - before
    text = log.read_text(encoding="utf-8", errors="replace")
    if done.returncode != 0 or not (run_dir / "metrics.json").is_file():
        errors = [line for line in text.splitlines() if line.startswith("error:") or "Error" in line]
        raise RuntimeError(f"tfm-cls train exited {done.returncode}: {(errors or text.strip().splitlines() or [''])[-1]}"
                           f" (log: {log})")
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    history_file = run_dir / "history.json"
    evals = json.loads(history_file.read_text(encoding="utf-8")).get("eval", []) if history_file.is_file() else []
    best_metric = metrics.get("best_metric") or metric_name
    start_value = next((e.get(best_metric) for e in evals if e.get("step") == 0), None)
    baseline = metrics.get("baseline") or {}
    regime = re.search(r"regime: (\w+)", text)
    if not keep_checkpoint:
        (run_dir / "last.ckpt").unlink(missing_ok=True)
    test = metrics.get("test") or {}
    return {
        **{k: test.get(k) for k in ("accuracy", "macro_f1", "micro_f1", "subset_accuracy", "pearson", "spearman")
           if k in test},
        "metric_name": metric_name, "metric": test.get(metric_name),
        "cpu_minutes": cpu / 60, "wall_minutes": wall / 60, "train_seconds": metrics.get("train_seconds"),
        "regime": regime.group(1) if regime else None,
        "best_step": metrics.get("best_step"), "steps": metrics.get("steps"), "stopped": metrics.get("stopped"),
        "best_metric": best_metric, "start_validation": start_value,
        "kept_validation": (metrics.get("validation") or {}).get(best_metric),
        "baseline": {"model": baseline.get("model"), "validation": (baseline.get("validation") or {}).get(metric_name),
                     "test": (baseline.get("test") or {}).get(metric_name)} if baseline else None,
        "run_dir": str(run_dir), "log": str(log),
    }


def fasttext_row(splits: dict[str, Split], work: Path, metric_name: str, seed: int = 0) -> dict[str, Any]:
    """fastText's bigram recipe on train, scored on test (its model file deleted afterwards: 80 MB)."""
    from benchmarks.peers.fasttext_peer import train_fasttext

    clock = CpuClock()
    trained = train_fasttext(splits["train"], None, work, seed=seed + 42)
    predicted = trained["predictor"](splits["test"].texts)
    metrics = split_metrics("single_label", splits["test"].targets, predicted)
    Path(trained["model_path"]).unlink(missing_ok=True)
    return {**metrics, "metric_name": metric_name, "metric": metrics[metric_name], "cpu_minutes": clock.minutes,
            "params": trained["params"]}


def setfit_row(splits: dict[str, Split], columns: Columns, work: Path, metric_name: str, minutes: float,
               seed: int, python: Path) -> dict[str, Any]:
    """SetFit (benchmarks.peers.setfit_peer) on train, scored on test with the library's metrics."""
    from benchmarks.peers.setfit_peer import run_setfit

    train, test = splits["train"], splits["test"]
    result = run_setfit(train.texts, train.targets.tolist(), test.texts, work, multi_label=columns.task == "multi_label",
                        minutes=minutes, seed=seed, python=python)
    predicted = np.asarray(result.pop("predicted"), dtype=np.int64)
    metrics = split_metrics(columns.task, test.targets, predicted)
    return {**metrics, "metric_name": metric_name, "metric": metrics[metric_name], **result}


def applies(system: str, columns: Columns, train_rows: int, shots: int | None, setfit_max_train: int) -> str | None:
    """None when `system` runs on such a sample, else why not (one line)."""
    if system == "fasttext" and (columns.task != "single_label" or columns.pair is not None):
        return "the fastText peer classifies single texts into one class"
    if system == "setfit":
        if columns.pair is not None or columns.task == "regression":
            return "SetFit classifies single texts"
        if shots is None and train_rows > setfit_max_train:
            return f"{train_rows:,} training texts > --setfit-max-train {setfit_max_train:,} (its pairs grow with N)"
    return None


def availability(systems: list[str], setfit_python: Path) -> dict[str, str | None]:
    """system -> None where it can run here, else the reason."""
    out: dict[str, str | None] = {s: None for s in systems}
    if "fasttext" in out:
        from benchmarks.peers import fasttext_peer

        out["fasttext"] = fasttext_peer.available()
    if "setfit" in out:
        from benchmarks.peers import setfit_peer

        out["setfit"] = setfit_peer.available(setfit_python)
    return out


# ---- the table ------------------------------------------------------------------------------------------


def _usable(row: dict[str, Any]) -> bool:
    return "error" not in row and "skipped" not in row and row.get("metric") is not None


def _by_seed(rows: list[dict[str, Any]], value: Callable[[dict], float | None]) -> dict[Any, float]:
    out = {}
    for r in rows:
        if _usable(r) and value(r) is not None:
            out[r.get("seed")] = value(r)
    return out


def _mean(values: dict[Any, float], seeds: list[Any] | None = None) -> float | None:
    chosen = [values[s] for s in (seeds if seeds is not None else values) if s in values]
    return statistics.fmean(chosen) if chosen else None


def _state(rows: list[dict[str, Any]]) -> str | None:
    """error where a row failed, skipped where the system does not apply, else None."""
    return "error" if any("error" in r for r in rows) else "skipped" if any("skipped" in r for r in rows) else None


def _at_least(ours: dict[Any, float], theirs: dict[Any, float]) -> bool | None:
    """Ours >= theirs on the mean over the seeds both have (None: no seed in common)."""
    common = [s for s in ours if s in theirs]
    if not common:
        return None
    return _mean(ours, common) >= _mean(theirs, common) - 1e-12


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table row per (set, sample kind): each system's value per seed and mean, its mean CPU
    minutes, the best classical baseline (the TF-IDF baseline with the best mean), and the targets:
    recipe >= that baseline, >= SetFit (means over the seeds both have), and its kept validation
    score >= its step-0 one (None where no run was evaluated at step 0, e.g. no validation)."""
    groups: dict[tuple[str, int | None], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["set"], r.get("shots")), []).append(r)
    table = []
    for (set_name, shots), members in groups.items():
        systems = {s: [r for r in members if r["system"] == s] for s in SYSTEMS}
        metric = next((r["metric_name"] for r in members if r.get("metric_name")), None)
        line: dict[str, Any] = {"set": set_name, "shots": shots, "sample": "full" if shots is None else f"{shots}/class",
                                "metric": metric, "seeds": sorted({r.get("seed") for r in members}, key=str)}
        for system in ("recipe", "fasttext", "setfit"):
            values = _by_seed(systems[system], lambda r: r["metric"])
            line[system] = {"values": values, "mean": _mean(values),
                            "cpu_minutes": _mean(_by_seed(systems[system], lambda r: r.get("cpu_minutes"))),
                            "state": _state(systems[system])}
        names = sorted({n for r in systems["tfidf"] if _usable(r) for n in r.get("baselines", {})})
        per_name = {n: _by_seed(systems["tfidf"], lambda r, n=n, m=metric: (r["baselines"].get(n) or {}).get(m)) for n in names}
        best = max(names, key=lambda n: _mean(per_name[n]) if per_name[n] else -np.inf, default=None)
        line["tfidf"] = {"name": best, "values": per_name.get(best, {}), "mean": _mean(per_name[best]) if best else None,
                         "means": {n: _mean(v) for n, v in per_name.items()},
                         "cpu_minutes": _mean(_by_seed(systems["tfidf"], lambda r, n=best: (r["baselines"].get(n) or {})
                                                       .get("cpu_minutes"))) if best else None,
                         "state": _state(systems["tfidf"])}
        recipe = line["recipe"]["values"]
        line["recipe_ge_tfidf"] = _at_least(recipe, line["tfidf"]["values"])
        line["recipe_ge_setfit"] = _at_least(recipe, line["setfit"]["values"])
        starts = {r.get("seed"): (r["kept_validation"], r["start_validation"]) for r in systems["recipe"]
                  if _usable(r) and r.get("start_validation") is not None and r.get("kept_validation") is not None}
        below = {s: v for s, v in starts.items() if v[0] < v[1] - 1e-12}
        line["recipe_ge_start"] = None if not starts else not below
        line["recipe_below_start"] = below
        line["best_steps"] = _by_seed(systems["recipe"], lambda r: r.get("best_step"))
        line["recipe_baseline"] = _mean(_by_seed(systems["recipe"], lambda r: (r.get("baseline") or {}).get("test")))
        table.append(line)
    return table


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _cell(entry: dict[str, Any], shots: int | None, name: str | None = None) -> str:
    if entry["mean"] is None:
        return {"error": "error", "skipped": "n/a"}.get(entry.get("state"), "–")
    text = _pct(entry["mean"]) + (f" {name}" if name else "")
    if shots is not None:
        text += " (" + " / ".join(_pct(v) for _, v in sorted(entry["values"].items(), key=lambda kv: str(kv[0]))) + ")"
    return text


def _yes(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "**no**")


def _minutes(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def format_table(table: list[dict[str, Any]]) -> str:
    """The Markdown table of `summarise`'s rows."""
    header = ("| set | sample | metric ×100 | recipe | TF-IDF (best) | fastText | SetFit | recipe ≥ TF-IDF | "
              "recipe ≥ SetFit | recipe ≥ its step 0 | best step | recipe's own TF-IDF | CPU-min recipe | "
              "CPU-min TF-IDF | CPU-min fastText | CPU-min SetFit |")
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for t in table:
        shots = t["shots"]
        tfidf = t["tfidf"]
        short = (tfidf["name"] or "").removeprefix("tfidf-") or None
        start = _yes(t["recipe_ge_start"])
        if t["recipe_ge_start"] is None and t["recipe"]["mean"] is not None:
            start = "n/a (no step-0 evaluation)"
        steps = " / ".join(str(v) for _, v in sorted(t["best_steps"].items(), key=lambda kv: str(kv[0]))) or "–"
        lines.append(
            f"| {t['set']} | {t['sample']} | {t['metric'] or '–'} | {_cell(t['recipe'], shots)} | "
            f"{_cell(tfidf, shots, short)} | {_cell(t['fasttext'], shots)} | {_cell(t['setfit'], shots)} | "
            f"{_yes(t['recipe_ge_tfidf'])} | {_yes(t['recipe_ge_setfit'])} | {start} | {steps} | "
            f"{_pct(t['recipe_baseline'])} | {_minutes(t['recipe']['cpu_minutes'])} | {_minutes(tfidf['cpu_minutes'])} | "
            f"{_minutes(t['fasttext']['cpu_minutes'])} | {_minutes(t['setfit']['cpu_minutes'])} |")
    return "\n".join(lines)


# ---- the run --------------------------------------------------------------------------------------------


def _split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.recipe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=DATA_ROOT, help="folder of data set folders (default: %(default)s)")
    parser.add_argument("--sets", default=",".join(SETS),
                        help="comma-separated set names under --data-root, or folders (default: %(default)s)")
    parser.add_argument("--few-sets", default=",".join(FEW_SETS),
                        help="the sets few-label samples are drawn from (default: %(default)s)")
    parser.add_argument("--samples", default="full,few", help="full (each folder as it is), few (K/class samples), or both "
                                                              "(default: %(default)s)")
    parser.add_argument("--shots", type=int, nargs="+", default=[8, 64], help="K, examples per class (default: 8 64)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="sample seeds (default: 0 1 2)")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated of %(default)s (default: all; "
                                                                     "those that cannot run here are skipped cells)")
    parser.add_argument("--minutes", type=float, default=15.0, help="budget per run: the recipe's and SetFit's (default 15)")
    parser.add_argument("--setfit-python", type=Path, default=None,
                        help="interpreter with setfit 1.2 (default: benchmarks.peers.setfit_peer.DEFAULT_PYTHON)")
    parser.add_argument("--setfit-max-train", type=int, default=SETFIT_MAX_TRAIN,
                        help="full sets SetFit runs on: at most this many training texts (default: %(default)s)")
    parser.add_argument("--samples-dir", type=Path, default=None, help="where samples are drawn to (default: OUT/recipe-samples)")
    parser.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")
    reuse = parser.add_mutually_exclusive_group()
    reuse.add_argument("--reuse", dest="fresh", action="store_false", help="reuse cached rows (the default)")
    reuse.add_argument("--fresh", dest="fresh", action="store_true", help="recompute every planned row")
    parser.set_defaults(fresh=False)  # else --reuse's store_false makes the default True
    parser.add_argument("--keep-checkpoints", action="store_true", help="keep each recipe run's last.ckpt (270 MB)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: trec, 8/class, seed 0, --minutes 2 (rows cached apart from the real ones: add --fresh "
                             "to run it again)")
    parser.add_argument("--list", action="store_true", help="print the planned rows (and which are cached) and exit")
    args = parser.parse_args(argv)
    args.systems = _split_list(args.systems)
    unknown = sorted(set(args.systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown system(s) {unknown}; known: {', '.join(SYSTEMS)}")
    args.sets, args.few_sets, args.samples = _split_list(args.sets), _split_list(args.few_sets), _split_list(args.samples)
    if not set(args.samples) <= {"full", "few"}:
        parser.error(f"--samples: full, few or both, not {args.samples}")
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
        args.few_sets = QUICK["sets"]
    if args.setfit_python is None:
        from benchmarks.peers.setfit_peer import DEFAULT_PYTHON

        args.setfit_python = DEFAULT_PYTHON
    args.samples_dir = args.samples_dir or args.out / "recipe-samples"
    args.rows_dir = args.out / ("recipe-rows-quick" if args.quick else "recipe-rows")
    args.runs_dir = args.out / ("recipe-runs-quick" if args.quick else "recipe-runs")
    return args


def settings_of(system: str, args: argparse.Namespace) -> dict[str, Any]:
    """What a cached row must have been made with to be reused."""
    if system == "recipe":
        return {"minutes": args.minutes, "threads": 1}
    if system == "setfit":
        from benchmarks.peers.setfit_peer import SETTINGS

        return {"minutes": args.minutes, "threads": 1, **SETTINGS}
    if system == "tfidf":
        return {"folds": CV_FOLDS, "cv_max_train": CV_MAX_TRAIN, "holdout": HOLDOUT}
    from benchmarks.peers.fasttext_peer import BIGRAMS

    return dict(BIGRAMS)


def run_system(system: str, sample: Sample, args: argparse.Namespace) -> dict[str, Any]:
    """One system on one sample (the sample drawn first where it is new)."""
    folder = sample.folder(args.samples_dir)
    splits, columns, _ = read_splits(folder)
    metric = TASK_METRIC[columns.task]
    seed = sample.seed or 0
    work = args.runs_dir / f"{sample.set}-{sample.name}"
    if system == "recipe":
        return recipe_row(folder, work, args.minutes, metric, args.keep_checkpoints)
    if system == "tfidf":
        return tfidf_row(splits, columns, metric, seed)
    if system == "fasttext":
        return fasttext_row(splits, work.with_name(work.name + "-fasttext"), metric, seed)
    return setfit_row(splits, columns, work.with_name(work.name + "-setfit"), metric, args.minutes, seed,
                      args.setfit_python)


def _describe(row: dict[str, Any], cached: bool) -> str:
    head = f"{row['set']} {row['sample']} {row['system']}: "
    if "skipped" in row:
        return head + f"skipped ({row['skipped']})"
    if "error" in row:
        return head + f"error ({row['error']})"
    extra = ""
    if row["system"] == "tfidf":
        extra = f" ({row['best']})"
    elif row["system"] == "recipe":
        extra = (f" (regime {row.get('regime')}, best step {row.get('best_step')} of {row.get('steps')}, step-0 "
                 f"validation {row.get('start_validation')}, kept {row.get('kept_validation')})")
    return head + f"{row['metric_name']} {row['metric']:.4f}{extra}, {row.get('cpu_minutes', 0):.2f} CPU-min" + (
        " (cached)" if cached else "")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    samples, missing = plan_samples(args.sets, args.few_sets, args.samples, args.shots, args.seeds, args.data_root)
    for line in missing:
        logger.warning("left out: %s", line)
    cache = RowCache(args.rows_dir)
    reasons = availability(args.systems, args.setfit_python)

    def why_not(system: str, sample: Sample) -> str | None:
        columns, train_rows = peek(sample.source)
        return reasons[system] or applies(system, columns, train_rows, sample.shots, args.setfit_max_train)

    if args.list:
        for sample in samples:
            for system in args.systems:
                why = why_not(system, sample)
                cached = not why and not args.fresh and cache.get(system, sample.set, sample.name, settings_of(system, args))
                print(f"{sample.set:<14} {sample.name:<8} {system:<9} "
                      f"{f'skipped: {why}' if why else 'cached' if cached else 'to run'}")
        return 0

    from threadpoolctl import threadpool_limits

    results = Results(args.out, "recipe", args.quick)
    rows: list[dict[str, Any]] = []
    with threadpool_limits(1):  # the in-process systems (TF-IDF, fastText) on one thread, as the others
        for sample in samples:
            for system in args.systems:
                why = why_not(system, sample)
                if why:
                    row, cached = {"set": sample.set, "sample": sample.name, "shots": sample.shots,
                                   "seed": sample.seed, "system": system, "skipped": why}, False
                else:
                    row, cached = measured(cache, system, sample, settings_of(system, args),
                                           lambda system=system, sample=sample: run_system(system, sample, args),
                                           args.fresh)
                logger.info("%s", _describe(row, cached))
                rows.append(row)
                table = summarise(rows)  # rewritten after every row: a long run leaves its table so far
                results.write({"args": vars(args), "environment": environment(), "table": table, "rows": rows},
                              format_table(table))
    print("\n" + format_table(summarise(rows)))
    print(f"\nwrote {results.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
