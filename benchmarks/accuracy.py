"""Accuracy: our classifier (one or more variants) against the TF-IDF baselines, per dataset.

For each dataset folder under --data-root (train.jsonl / validation.jsonl / test.jsonl +
labels.json), each variant trains with configs/cls/<name>.yaml (or its own config) plus
`data.path=<folder>`, and the library's TF-IDF baselines (tfm_cls.classify.baseline) are fit on
exactly the same splits. One table: test accuracy, macro-F1, training minutes, prediction texts/s
(end to end, from raw text).

    python -m benchmarks.accuracy --data-root ../shared/data                 # all, 20 min each
    python -m benchmarks.accuracy --datasets trec,sms_spam --minutes 5
    python -m benchmarks.accuracy --quick                                    # smoke run
    python -m benchmarks.accuracy --variants ours,minilm                     # more columns
    python -m benchmarks.accuracy --datasets go_emotions,sick,sick-relatedness --int8   # issue 15
    python -m benchmarks.accuracy --variants minilm,distilled --model2vec    # teacher, student, peer
Writes bench_results/accuracy-<time>.json; runs go to bench_results/runs/<dataset>-<variant>.

Adding a column = adding a Variant to VARIANTS (config template + overlay configs, optionally a
`prepare` hook that runs first, e.g. MLM pretraining, and returns extra overrides).

The "ours + in-domain MLM" column (`ours+mlm`, `prepare_mlm`): MLM pretraining with
configs/pretrain/<dataset>.yaml on the dataset's *training split only* (the data section is taken
from configs/cls/<dataset>.yaml, so the split is exactly the classifier's: no validation or test
text is ever pretrained on), then fine-tuning from it with configs/finetune/from-mlm.yaml.
Pretraining + fine-tuning share one total per dataset (`--minutes`, else TOTAL_MINUTES),
PRETRAIN_SHARE of it for MLM. Extra unlabelled text (`--mlm-extra`): the *training* texts of other
datasets under --data-root, added through the pretraining config's `extra_text.paths`, whose
overlap guard drops every extra text that holds a piece of an evaluation text
(tfm_cls.pretrain.corpus.find_overlap). That matters for sst2 and mr_polarity, both cut from
Rotten Tomatoes sentences: most SST-2 phrases that come from MR's test sentences are dropped as
pieces of them, and the count is in the pretraining run's metrics. `auto` takes every other
dataset in the same language.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness.baselines import baseline_names, baseline_row
from benchmarks.harness.data import DATA_ROOT, REPO, Split, config_splits
from benchmarks.harness.results import OUT, Results, environment

DATASETS = ("sst2", "trec", "ag_news", "mr_polarity", "sms_spam", "tnews", "go_emotions", "sick", "sick-relatedness")
# A dataset name whose files lie in another folder (one folder, two targets).
DATA_FOLDERS = {"sick-relatedness": "sick"}
# The metric each task is judged by (the "metric" column), as in docs/tasks.md.
TASK_METRIC = {"single_label": "accuracy", "multi_label": "macro_f1", "regression": "pearson"}

# Test accuracy (%) of the TF-IDF baselines as measured earlier by the lead (ag_news: 5k train).
REFERENCE = {"sst2": 84.8, "trec": 88.4, "ag_news": 88.9, "mr_polarity": 80.4, "sms_spam": 99.3, "tnews": 57.1}

TOTAL_MINUTES = 30.0
"""ours+mlm: pretraining + fine-tuning per dataset when --minutes is not given (the issue's equal budget)."""
PRETRAIN_SHARE = 2 / 3
"""Fine-tuning a pretrained encoder early-stops within a few minutes; pretraining is what needs time."""
FINETUNE_OVERLAY = "configs/finetune/from-mlm.yaml"
"""How the "ours + MLM" column fine-tunes, on top of configs/cls/<name>.yaml (the settings live there)."""
LANGUAGE = {"sst2": "en", "trec": "en", "ag_news": "en", "mr_polarity": "en", "sms_spam": "en", "tnews": "zh"}

logger = logging.getLogger("benchmarks.accuracy")


def extra_datasets(dataset: str, spec: str, root: Path) -> list[str]:
    """The datasets whose training texts are extra MLM text for `dataset`, from --mlm-extra."""
    if spec in ("", "none"):
        return []
    if spec == "auto":
        wanted = [d for d, lang in LANGUAGE.items() if d != dataset and lang == LANGUAGE.get(dataset)]
    else:
        wanted = [d.strip() for d in spec.split(",") if d.strip() and d.strip() != dataset]
    return [d for d in wanted if (root / d / "train.jsonl").is_file()]


def prepare_mlm(dataset: str, folder: Path, args: argparse.Namespace) -> list[str]:
    """The ours+mlm variant's `prepare` hook: MLM pretraining (module docstring); returns the
    overrides that fine-tune from it with the rest of the budget."""
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.pretrain import PretrainConfig, pretrain

    total = args.minutes if args.minutes is not None else TOTAL_MINUTES
    pretrain_minutes = 0.5 if args.quick else PRETRAIN_SHARE * total
    run_dir = Path(args.out) / "runs" / f"{dataset}-mlm-pretrain"
    overrides = [f"data.path={folder}", f"run_dir={run_dir}", "train.progress=false",
                 f"train.max_minutes={pretrain_minutes}"]
    extra = extra_datasets(dataset, args.mlm_extra, folder.parent)
    if extra:
        paths = ",".join(str(folder.parent / d / "train.jsonl") for d in extra)
        overrides.append(f"extra_text.paths=[{paths}]")
        logger.info("%s: extra MLM text from the training splits of %s", dataset, extra)
    if args.quick:
        overrides += ["data.max_train_samples=1500", "train.eval_every=null"]
    cfg = load_config(PretrainConfig, REPO / f"configs/pretrain/{dataset}.yaml", overrides)
    classifier = load_config(
        ClassifierConfig, REPO / f"configs/cls/{dataset}.yaml",
        [f"data.path={folder}"] + (["data.max_train_samples=1500"] if args.quick else []),
    )
    cfg = dataclasses.replace(cfg, data=classifier.data)  # the classifier's split, whatever its config says
    metrics = pretrain(cfg, overwrite=True)
    logger.info(
        "%s: MLM pretraining %.1f min, %d steps, validation MLM loss %s -> %s", dataset,
        metrics["train_seconds"] / 60, metrics["steps"], json.dumps(metrics.get("validation")), run_dir,
    )
    logger.info("%s: MLM corpus %s", dataset, json.dumps(metrics.get("corpus")))
    finetune_minutes = max(total - metrics["train_seconds"] / 60, 0.5)
    return [f"model.init_from={run_dir}", f"train.max_minutes={finetune_minutes:.2f}"]


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
        return REPO / self.config.format(name=dataset)


VARIANTS: list[Variant] = [
    Variant("ours", "configs/cls/{name}.yaml"),
    # + in-domain MLM, then fine-tuning with the overlay configs/finetune/from-mlm.yaml
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


def run_variant(variant: Variant, dataset: str, folder: Path, args: argparse.Namespace, test: Split) -> dict:
    import torch

    from tfm_cls.classify.predict import predict_proba, texts_logits
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.runs import load_run
    from tfm_cls.train import train

    test_texts = test.texts

    config_path = variant.config_path(dataset)
    if not config_path.is_file():
        return {"system": variant.name, "skipped": f"no config {config_path.relative_to(REPO)}"}
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
        cfg = load_config(DistillConfig, [config_path, *(REPO / o for o in variant.overlays)], overrides)
        metrics = distill(cfg, overwrite=True)
        pretrain_minutes = metrics["distillation"]["labelling_seconds"] / 60  # labelling counts as training time
    else:
        cfg = load_config(ClassifierConfig, [config_path, *(REPO / o for o in variant.overlays)], overrides)
        metrics = train(cfg, overwrite=True)
    run = load_run(run_dir)
    if cfg.data.task == "single_label" and test.pairs is None:
        predict_proba(run, test_texts[:64])  # warm-up
        start = time.perf_counter()
        predict_proba(run, test_texts, batch_size=64)
    else:
        texts_logits(run, test_texts[:64], None if test.pairs is None else test.pairs[:64])[0]  # warm-up
        start = time.perf_counter()
        texts_logits(run, test_texts, test.pairs, batch_size=64)[0]
    seconds = time.perf_counter() - start
    metric_name = TASK_METRIC[cfg.data.task]
    int8 = int8_row(run_dir, cfg, folder, test, args.per_channel) if args.int8 else {}
    return {
        "system": variant.name,
        "accuracy": metrics["test"].get("accuracy"),
        "macro_f1": metrics["test"].get("macro_f1"),
        "metric_name": metric_name,
        "metric": metrics["test"][metric_name],
        "validation_metric": metrics["validation"][metric_name],
        **int8,
        "train_minutes": metrics["train_seconds"] / 60 + pretrain_minutes,
        "pretrain_minutes": pretrain_minutes,
        "predict_texts_per_s": len(test_texts) / max(seconds, 1e-9),
        "steps": metrics["steps"],
        "stopped": metrics["stopped"],
        "num_parameters": metrics["num_parameters"],
        "run_dir": str(run_dir),
        "torch_threads": torch.get_num_threads(),
    }


def int8_row(run_dir: Path, cfg, folder: Path, test: Split, per_channel: bool = False) -> dict:
    """Export the run, quantize it to int8 (per tensor, or per channel; gated on the task's metric
    on validation.jsonl) and measure the int8 file's texts/s on the test texts with
    export/infer.py on one thread."""
    from tfm_cls.export.exporter import export_run
    from tfm_cls.export.quantize import quantize_and_evaluate

    from tfm_cls.runtime.session import Classifier

    fp32 = export_run(run_dir)
    report = quantize_and_evaluate(
        fp32, folder / "validation.jsonl", threshold=1.0, per_channel=per_channel, text_field=cfg.data.text_columns[0],
        label_field=cfg.data.label_column, pair_field=cfg.data.text_pair_column or "text_pair",
    )
    row = {"int8_accepted": report.accepted, "int8_gate_metric": report.metric,
           "int8_gate_fp32": report.accuracy_fp32, "int8_gate_int8": report.accuracy_int8}
    if report.accepted:
        clf = Classifier(report.int8_path, threads=1)
        clf.predict_proba(test.texts[:64], 64, None if test.pairs is None else test.pairs[:64])  # warm-up
        start = time.perf_counter()
        clf.predict_proba(test.texts, 64, test.pairs)
        row["int8_texts_per_s"] = len(test.texts) / max(time.perf_counter() - start, 1e-9)
    return row


def _pct(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}"


def model2vec_row(dataset: str, splits: dict[str, Split], args: argparse.Namespace) -> dict:
    from benchmarks.peers.model2vec_peer import available, run_model2vec, static_model

    reason = available()
    if reason:
        return {"system": "model2vec", "skipped": reason}
    static_dir, _ = static_model(Path(args.out) / "model2vec-minilm")
    row = run_model2vec(static_dir, splits["train"], splits["validation"], splits["test"],
                        Path(args.out) / "runs" / f"{dataset}-model2vec")
    return {**row, "predict_texts_per_s": row["texts_per_s"]}


def format_table(rows: list[dict]) -> str:
    header = (f"{'dataset':<16} {'system':<18} {'test acc':>8} {'macro-F1':>8} {'task metric':>18} {'train min':>9} "
              f"{'predict/s':>10} {'int8/s':>8} {'lead ref':>8}")
    lines = [header, "-" * len(header)]
    for r in rows:
        ref = REFERENCE.get(r["dataset"])
        ref_text = f"{ref:.1f}" if ref is not None and r.get("first") else ""  # once per dataset
        if "skipped" in r or "error" in r:
            lines.append(f"{r['dataset']:<16} {r['system']:<18} {r.get('skipped') or r.get('error')}")
            continue
        name = r.get("metric_name", "accuracy")
        metric = r.get("metric", r.get("accuracy"))
        task_metric = f"{name} {metric:.4f}" if metric is not None else ""
        int8 = r.get("int8_texts_per_s")
        int8_text = f"{int8:,.0f}" if int8 else ("refused" if r.get("int8_accepted") is False else "")
        lines.append(
            f"{r['dataset']:<16} {r['system']:<18} {_pct(r.get('accuracy')):>8} {_pct(r.get('macro_f1')):>8} "
            f"{task_metric:>18} {r['train_minutes']:>9.2f} {r['predict_texts_per_s']:>10,.0f} {int8_text:>8} {ref_text:>8}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.accuracy", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=Path, default=DATA_ROOT, help="folder of dataset folders (default: %(default)s)")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated (default: %(default)s)")
    parser.add_argument("--variants", default=None,
                        help=f"comma-separated of {[v.name for v in VARIANTS]} (default: {[v.name for v in VARIANTS if v.default]})")
    parser.add_argument("--minutes", type=float, default=None, help="training budget per dataset (train.max_minutes)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,500 training texts, 30 s of training")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument("--int8", action="store_true",
                        help="also export each run, quantize it to int8 (gated on validation) and measure its texts/s")
    parser.add_argument("--per-channel", action="store_true",
                        help="--int8: quantize per channel (slower to make, closer to fp32; sick-minilm needs it)")
    parser.add_argument("--model2vec", action="store_true",
                        help="add the model2vec peer (static MiniLM embeddings + its classifier; the bench extra)")
    parser.add_argument("--teacher-root", default=None,
                        help="distilled: folder of <dataset>-minilm teacher runs (default: OUT/runs)")
    parser.add_argument("--mlm-extra", default="none",
                        help="ours+mlm: extra unlabelled text = other datasets' training texts: none, auto "
                             "(same language, no shared source), or a comma-separated list (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=OUT, help="results folder (default: %(default)s)")
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
        folder = root / DATA_FOLDERS.get(dataset, dataset)
        if not (folder / "train.jsonl").is_file():
            rows.append({"dataset": dataset, "system": "-", "skipped": f"no {folder}/train.jsonl"})
            continue
        splits, task = config_splits(dataset, folder, ["data.max_train_samples=1500"] if args.quick else [])
        first = True
        for variant in variants:
            try:
                row = run_variant(variant, dataset, folder, args, splits["test"])
            except Exception as err:  # one failing system must not lose the others' results
                logging.exception("%s / %s failed", dataset, variant.name)
                row = {"system": variant.name, "error": f"{type(err).__name__}: {err}"[:200]}
            rows.append({"dataset": dataset, "first": first, **row})
            first = False
        if not args.no_baselines:
            for name in baseline_names(task, splits["train"].pairs is not None):
                row, _ = baseline_row(name, splits["train"], splits["validation"], splits["test"])
                rows.append({"dataset": dataset, "first": first, **row})
                first = False
        if args.model2vec:
            rows.append({"dataset": dataset, "first": first, **model2vec_row(dataset, splits, args)})
            first = False
        print(format_table([r for r in rows if r["dataset"] == dataset]), flush=True)

    table = format_table(rows)
    print("\n" + table)
    import torch

    env = {**environment(), "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    path = Results(args.out, "accuracy", args.quick).write(
        {"args": vars(args), "environment": env, "reference": REFERENCE,
         "results": [{k: v for k, v in r.items() if k != "first"} for r in rows]}, table)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
