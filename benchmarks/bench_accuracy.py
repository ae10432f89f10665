"""Accuracy benchmark: our classifier (one or more variants) vs TF-IDF baselines, per dataset.

For each dataset folder under --data-root (train.jsonl / validation.jsonl / test.jsonl +
labels.json), each variant trains with configs/cls/<name>.yaml (or its own config) plus
`data.path=<folder>`, and the scikit-learn baselines are fit on exactly the same splits. One
table: test accuracy, macro-F1, training minutes, prediction texts/s (end to end, from raw text).

    python benchmarks/bench_accuracy.py --data-root ../shared/data                 # all, 20 min each
    python benchmarks/bench_accuracy.py --datasets trec,sms_spam --minutes 5
    python benchmarks/bench_accuracy.py --quick                                    # smoke run
    python benchmarks/bench_accuracy.py --variants ours,minilm                     # more columns
    python benchmarks/bench_accuracy.py --variants minilm,distilled --model2vec    # teacher, student, peer
Writes bench_results/accuracy-<time>.json; runs go to bench_results/runs/<dataset>-<variant>.

Adding a column = adding a Variant to VARIANTS (config template + overlay configs, optionally a
`prepare` hook that runs first, e.g. MLM pretraining, and returns extra overrides).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import BASELINES, Split, run_baseline  # noqa: E402
from bench_mlm import FINETUNE_OVERLAY, prepare_mlm  # noqa: E402

DATASETS = ("sst2", "trec", "ag_news", "mr_polarity", "sms_spam", "tnews")

# Test accuracy (%) of the TF-IDF baselines as measured earlier by the lead (ag_news: 5k train).
REFERENCE = {"sst2": 84.8, "trec": 88.4, "ag_news": 88.9, "mr_polarity": 80.4, "sms_spam": 99.3, "tnews": 57.1}


@dataclasses.dataclass(frozen=True)
class Variant:
    """One column of ours: a config (with `{name}` for the dataset), plus overlay configs merged on top."""

    name: str
    config: str
    overlays: tuple[str, ...] = ()
    default: bool = True
    """Run without being named in --variants."""
    prepare: Callable[[str, Path, argparse.Namespace], list[str]] | None = None
    """Optional step before training (e.g. MLM pretraining on the dataset's texts) that returns
    extra overrides (e.g. model.init_from=<pretraining run>)."""
    distill: bool = False
    """A `tfm-cls distill` config (configs/distill/): the teacher is the minilm column's run
    (its model.int8.onnx where it has one), or --teacher-root/<dataset>-minilm."""

    def config_path(self, dataset: str) -> Path:
        return ROOT / self.config.format(name=dataset)


VARIANTS: list[Variant] = [
    Variant("ours", "configs/cls/{name}.yaml"),
    # + in-domain MLM, then fine-tuning with the recipe of configs/finetune/from-mlm.yaml
    Variant("ours+mlm", "configs/cls/{name}.yaml", overlays=(FINETUNE_OVERLAY,), prepare=prepare_mlm),
    Variant("minilm", "configs/cls/{name}-minilm.yaml", default=False),  # needs the [minilm] extra
    # distilled from the minilm column's run (run minilm first, or give --teacher-root)
    Variant("distilled", "configs/distill/{name}.yaml", default=False, distill=True),
]


def teacher_for(dataset: str, args: argparse.Namespace) -> Path:
    run = Path(args.teacher_root or Path(args.out) / "runs") / f"{dataset}-minilm"
    return run / "model.int8.onnx" if (run / "model.int8.onnx").is_file() else run


def quick_overrides() -> list[str]:
    return ["data.max_train_samples=1500", "train.epochs=1", "train.max_minutes=0.5", "train.eval_every=null"]


def run_variant(variant: Variant, dataset: str, folder: Path, args: argparse.Namespace, test_texts: list[str]) -> dict:
    import torch

    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.predict import predict_proba
    from tfm_cls.runs import load_run
    from tfm_cls.train import train

    config_path = variant.config_path(dataset)
    if not config_path.is_file():
        return {"system": variant.name, "skipped": f"no config {config_path.relative_to(ROOT)}"}
    run_dir = Path(args.out) / "runs" / f"{dataset}-{variant.name}"
    overrides = [f"data.path={folder}", f"run_dir={run_dir}", "train.progress=false"]
    if args.minutes is not None:
        overrides.append(f"train.max_minutes={args.minutes}")
    pretrain_minutes = 0.0
    if variant.prepare is not None:
        # Last, so the fine-tuning share of an equal total budget wins over --minutes.
        prepared = variant.prepare(dataset, folder, args)
        overrides += prepared
        for item in prepared:
            if item.startswith("model.init_from="):
                pretrain_metrics = Path(item.split("=", 1)[1]) / "metrics.json"
                pretrain_minutes = json.loads(pretrain_metrics.read_text())["train_seconds"] / 60
    if args.quick:
        overrides += quick_overrides()
    if variant.distill:
        from tfm_cls.distill import DistillConfig, distill

        overrides.append(f"teacher.path={teacher_for(dataset, args)}")
        cfg = load_config(DistillConfig, [config_path, *(ROOT / o for o in variant.overlays)], overrides)
        metrics = distill(cfg, overwrite=True)
        pretrain_minutes = metrics["distillation"]["labelling_seconds"] / 60  # labelling counts as training time
    else:
        cfg = load_config(ClassifierConfig, [config_path, *(ROOT / o for o in variant.overlays)], overrides)
        metrics = train(cfg, overwrite=True)
    run = load_run(run_dir)
    predict_proba(run, test_texts[:64])  # warm-up
    start = time.perf_counter()
    predict_proba(run, test_texts, batch_size=64)
    seconds = time.perf_counter() - start
    return {
        "system": variant.name,
        "accuracy": metrics["test"]["accuracy"],
        "macro_f1": metrics["test"]["macro_f1"],
        "validation_accuracy": metrics["validation"]["accuracy"],
        "train_minutes": metrics["train_seconds"] / 60 + pretrain_minutes,
        "pretrain_minutes": pretrain_minutes,
        "predict_texts_per_s": len(test_texts) / max(seconds, 1e-9),
        "steps": metrics["steps"],
        "stopped": metrics["stopped"],
        "num_parameters": metrics["num_parameters"],
        "run_dir": str(run_dir),
        "torch_threads": torch.get_num_threads(),
    }


def dataset_splits(dataset: str, folder: Path, args: argparse.Namespace) -> dict[str, Split]:
    """The splits every system sees: the data section of the dataset's config, on local files."""
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.data import load_data

    overrides = [f"data.path={folder}"] + (["data.max_train_samples=1500"] if args.quick else [])
    cfg = load_config(ClassifierConfig, ROOT / f"configs/cls/{dataset}.yaml", overrides)
    data = load_data(cfg.data)
    return {name: Split(list(ds["text"]), np.asarray(ds["label"])) for name, ds in data.splits.items()}


def model2vec_row(dataset: str, splits: dict[str, Split], args: argparse.Namespace) -> dict:
    from model2vec_peer import available, run_model2vec, static_model

    reason = available()
    if reason:
        return {"system": "model2vec", "skipped": reason}
    static_dir, _ = static_model(Path(args.out) / "model2vec-minilm")
    row = run_model2vec(static_dir, splits["train"], splits["validation"], splits["test"],
                        Path(args.out) / "runs" / f"{dataset}-model2vec")
    return {**row, "predict_texts_per_s": row["texts_per_s"]}


def format_table(rows: list[dict]) -> str:
    header = f"{'dataset':<12} {'system':<24} {'test acc':>8} {'macro-F1':>8} {'train min':>9} {'predict/s':>10} {'lead ref':>8}"
    lines = [header, "-" * len(header)]
    for r in rows:
        ref = REFERENCE.get(r["dataset"])
        ref_text = f"{ref:.1f}" if ref is not None and r.get("first") else ""  # once per dataset
        if "skipped" in r or "error" in r:
            lines.append(f"{r['dataset']:<12} {r['system']:<24} {r.get('skipped') or r.get('error')}")
            continue
        lines.append(
            f"{r['dataset']:<12} {r['system']:<24} {100 * r['accuracy']:>8.1f} {100 * r['macro_f1']:>8.1f} "
            f"{r['train_minutes']:>9.2f} {r['predict_texts_per_s']:>10,.0f} {ref_text:>8}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", default="../shared/data", help="folder of dataset folders")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated (default: all six)")
    parser.add_argument("--variants", default=None,
                        help=f"comma-separated of {[v.name for v in VARIANTS]} (default: {[v.name for v in VARIANTS if v.default]})")
    parser.add_argument("--minutes", type=float, default=None, help="training budget per dataset (train.max_minutes)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,500 training texts, 30 s of training")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--model2vec", action="store_true",
                        help="add the model2vec peer (static MiniLM embeddings + its classifier; the bench extra)")
    parser.add_argument("--teacher-root", default=None,
                        help="distilled: folder of <dataset>-minilm teacher runs (default: OUT/runs)")
    parser.add_argument("--mlm-extra", default="none",
                        help="ours+mlm: extra unlabelled text = other datasets' training texts: none, auto "
                             "(same language, no shared source), or a comma-separated list (default: %(default)s)")
    parser.add_argument("--out", default="bench_results", help="results folder (default: %(default)s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    import datasets

    datasets.disable_progress_bars()

    names = [v.name for v in VARIANTS]
    chosen = args.variants.split(",") if args.variants else [v.name for v in VARIANTS if v.default]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; known: {names}")
    variants = [v for v in VARIANTS if v.name in chosen]
    root = Path(args.data_root)
    rows: list[dict] = []
    for dataset in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        folder = root / dataset
        if not (folder / "train.jsonl").is_file():
            rows.append({"dataset": dataset, "system": "-", "skipped": f"no {folder}/train.jsonl"})
            continue
        splits = dataset_splits(dataset, folder, args)
        first = True
        for variant in variants:
            try:
                row = run_variant(variant, dataset, folder, args, splits["test"].texts)
            except Exception as err:  # one failing system must not lose the others' results
                logging.exception("%s / %s failed", dataset, variant.name)
                row = {"system": variant.name, "error": f"{type(err).__name__}: {err}"[:200]}
            rows.append({"dataset": dataset, "first": first, **row})
            first = False
        if not args.no_baselines:
            for name in BASELINES:
                row = run_baseline(name, splits["train"], splits["validation"], splits["test"])
                rows.append({"dataset": dataset, "first": first, **row})
                first = False
        if args.model2vec:
            rows.append({"dataset": dataset, "first": first, **model2vec_row(dataset, splits, args)})
            first = False
        print(format_table([r for r in rows if r["dataset"] == dataset]), flush=True)

    table = format_table(rows)
    print("\n" + table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = out / f"accuracy-{stamp}{'-quick' if args.quick else ''}.json"
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
           "torch_threads": torch.get_num_threads(), "machine": platform.machine()}
    path.write_text(json.dumps({"args": vars(args), "environment": env, "reference": REFERENCE,
                                "results": [{k: v for k, v in r.items() if k != "first"} for r in rows]}, indent=2))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
