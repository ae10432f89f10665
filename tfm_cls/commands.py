"""`tfm-cls train | eval | predict`: the classifier's subcommands (registered by tfm_cls.cli)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

def _user_errors() -> tuple[type[BaseException], ...]:
    from tfm_cls.artifacts import RunDirError
    from tfm_cls.checkpoint import CheckpointError
    from tfm_cls.config import ConfigError
    from tfm_cls.data import DataError
    from tfm_cls.init_from import InitFromError
    from tfm_cls.predict import InputError

    return (ConfigError, DataError, RunDirError, CheckpointError, InitFromError, InputError, FileNotFoundError)


def _quiet_datasets() -> None:
    import datasets

    datasets.disable_progress_bars()  # our own bars and log lines say what happens


def _guard(handler):
    """Run a handler; errors a user can fix become one clear line (no stack trace) and exit code 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except _user_errors() as err:
            print(f"error: {err}", file=sys.stderr)
            return 2

    return run


def cmd_train(args: argparse.Namespace) -> int:
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.train import train

    _quiet_datasets()
    cfg = load_config(ClassifierConfig, args.config, args.overrides)
    metrics = train(cfg, resume=args.resume, overwrite=args.overwrite)
    summary = {split: {k: metrics[split][k] for k in ("accuracy", "macro_f1", "loss")} for split in ("validation", "test")}
    if os.environ.get("RANK", "0") == "0":  # under torchrun every rank returns the metrics; one prints
        print(json.dumps({"run_dir": str(cfg.resolved_run_dir()), **summary}))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from tfm_cls.artifacts import load_run
    from tfm_cls.config import DataConfig, apply_overrides, from_dict, to_dict
    from tfm_cls.data import DataError, load_data, load_eval_split, tokenize_dataset
    from tfm_cls.distributed import select_device
    from tfm_cls.metrics import report_text
    from tfm_cls.train import evaluate

    _quiet_datasets()
    run = load_run(args.run)
    data_cfg = run.config.data
    if args.overrides:
        data_cfg = from_dict(DataConfig, apply_overrides(to_dict(data_cfg), args.overrides, DataConfig), "data")
    if args.data:
        dataset, source = load_eval_split(data_cfg, args.data, args.split, run.labels), args.data
    else:
        data = load_data(data_cfg)
        if data.labels != run.labels:
            raise DataError(f"the run's data now has classes {data.labels}, the model {run.labels}")
        dataset, source = data.splits[args.split], f"{data.source} ({args.split})"
    split = tokenize_dataset(dataset, run.tokenizer)
    device = select_device(args.device)
    run.model.to(device)
    metrics, logits = evaluate(run.model, split, run.labels, args.batch_size, device, run.model.config.get("pad_token_id") or 0)
    logger.info("%s: %d examples\n%s", source, len(split), report_text(split.labels, logits.argmax(-1), run.labels))
    result = {"run": str(args.run), "data": str(source), **metrics}
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    from tfm_cls.artifacts import load_run
    from tfm_cls.distributed import select_device
    from tfm_cls.predict import predict_proba, prediction_records, read_texts, write_jsonl

    run = load_run(args.run, device=select_device(args.device))
    texts = read_texts(args.input, args.format, args.column)
    probs = predict_proba(run, texts, args.batch_size)
    records = prediction_records(probs, run.labels)
    if args.output == "-":
        count = write_jsonl(records, sys.stdout)
    else:
        with open(args.output, "w", encoding="utf-8") as out:
            count = write_jsonl(records, out)
    logger.info("predicted %d texts -> %s", count, args.output)
    return 0


def register_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train", help="train a text classifier from a config (+ KEY=VALUE overrides)",
        description="Train, evaluate and write a run directory. Overrides: train.lr=3e-4 data.path=DIR run_dir=PATH",
    )
    p.add_argument("--config", default="configs/cls/bbc.yaml",
                   help="YAML config; several comma-separated are merged in order, later ones win (default: %(default)s)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dotted config overrides")
    p.add_argument("--resume", action="store_true", help="continue the run in run_dir from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a different run already in run_dir")
    p.set_defaults(func=_guard(cmd_train))

    p = subparsers.add_parser("eval", help="evaluate a trained run on labelled data")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--data", nargs="?", default=None,
                   help="data file or folder (default: the run's own data, --split of it)")
    p.add_argument("--split", default="test", help="split to evaluate (file stem in a folder; default: test)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="data config overrides, e.g. label_column=topic text_columns=[title,body]")
    p.add_argument("--output", help="write the metrics JSON here (default: stdout)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N (default: cpu)")
    p.set_defaults(func=_guard(cmd_eval))

    p = subparsers.add_parser("predict", help="predict labels for texts; writes JSONL")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--input", default="-", help="txt (one text per line), .jsonl or .csv; - = stdin")
    p.add_argument("--output", default="-", help="JSONL output: label, score, probabilities; - = stdout")
    p.add_argument("--format", choices=("auto", "txt", "jsonl", "csv"), default="auto",
                   help="input format (auto: by file extension; stdin: txt)")
    p.add_argument("--column", default="text", help="text field of jsonl / csv input (default: text)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N (default: cpu)")
    p.set_defaults(func=_guard(cmd_predict))
