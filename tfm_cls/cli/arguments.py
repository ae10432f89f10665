"""The argument pieces several commands share: the config arguments of the recipes, the inference
options (same names and meaning in predict, eval, infer and batch), providers, and the ONE check
of the size flags. Imports nothing heavy: every `--help` builds these."""

from __future__ import annotations

import argparse
import math
from typing import Any

from tfm_cls.errors import InputError
from tfm_cls.runtime.batching import BATCHINGS, DEFAULT_MAX_TOKENS
from tfm_cls.runtime.text import AGGREGATE_SCORES, AGGREGATES, TRUNCATIONS

DEVICE_HELP = "auto, cpu, cuda or cuda:N (default: cpu)"
REPORT_HELP = ("also write or refresh RUN/report.html (tfm-cls report; it scores the training split and "
               "trains the TF-IDF baseline, so it takes longer than this command alone)")


def config_arguments(p: argparse.ArgumentParser, kind: str, example: str, default: str | None) -> None:
    """--config, KEY=VALUE overrides, --resume and --overwrite of a recipe (train, pretrain, distill, compress)."""
    p.add_argument(
        "--config", default=default,
        help=f"a YAML file, or a preset name ({kind}: e.g. {example}); several comma-separated are merged in "
             "order, later ones win" + (f" (default: {default})" if default else " (default: the built-in defaults)"),
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dotted config overrides, e.g. train.lr=3e-4")
    p.add_argument("--resume", action="store_true", help="continue the run in run_dir from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a different or finished run in run_dir")


def positive(value: str) -> int:
    """An argparse type: an integer of 1 or more (a count, not a size flag: those go through check_sizes)."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return number


def positive_number(value: str) -> float:
    """An argparse type: a finite number above 0 (a budget such as `--minutes`); `nan`, `inf`, 0 and
    negatives are usage errors (one `error:` line, exit 2) before any work."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {value!r}")
    return number


def providers(value: str | None) -> list[str] | None:
    """A comma-separated list of onnxruntime execution providers; None when not given."""
    return [p.strip() for p in value.split(",") if p.strip()] if value else None


def add_inference_options(p: argparse.ArgumentParser, batch_size: int, streaming: bool = True,
                          max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
    """The batching, thread and long-text flags shared (same names, same meaning) by `tfm-cls infer`,
    `predict` and `batch` (`eval`: no `streaming` ones); a long-text flag left out keeps the model's
    own setting. `max_tokens`: the engine's default budget (onnxruntime's is smaller)."""
    if streaming:
        p.add_argument("--batching", choices=BATCHINGS, default="tokens",
                       help="tokens: length-sorted batches of up to --max-tokens padded tokens (default); "
                            "fixed: length-sorted batches of --batch-size texts")
        p.add_argument("--max-tokens", type=int, default=max_tokens,
                       help=f"padded tokens per batch with --batching tokens (default {max_tokens})")
        p.add_argument("--batch-size", type=int, default=batch_size,
                       help=f"texts per batch with --batching fixed (default {batch_size})")
        p.add_argument("--buffer-texts", type=int, default=8192,
                       help="texts read, sorted by length and batched at once; bounds memory (default 8192)")
    else:
        p.add_argument("--batch-size", type=int, default=batch_size, help=f"texts per batch (default {batch_size})")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: the runtime decides)")
    p.add_argument("--max-length", type=int, help="truncate to fewer tokens than the model's maximum")
    p.add_argument("--truncation", choices=TRUNCATIONS, help="keep the head, the tail or head+tail of a long text "
                   "(default: as the model was trained)")
    p.add_argument("--head-fraction", type=float, help="share of the kept tokens taken from the head with head+tail")
    p.add_argument("--chunk", action=argparse.BooleanOptionalAction, default=None,
                   help="classify long texts as overlapping windows and aggregate them (default: the model's setting)")
    p.add_argument("--stride", type=int, help="tokens each window shares with the previous one (default: a quarter of a window)")
    p.add_argument("--aggregate", choices=AGGREGATES, help="mean or max over the windows (default: the model's setting)")
    p.add_argument("--aggregate-scores", choices=AGGREGATE_SCORES,
                   help="aggregate the windows' logits or their probabilities (default: the model's setting)")


def long_text_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The LongText fields set on the command line (the rest keep the model's values)."""
    given = {"truncation": args.truncation, "head_fraction": args.head_fraction, "chunk": args.chunk,
             "stride": args.stride, "aggregate": args.aggregate, "scores": args.aggregate_scores}
    return {k: v for k, v in given.items() if v is not None}


# The size flags and the least value each takes. A command checks the ones it has (an absent or
# unset flag is skipped) and may raise a minimum (`tfm-cls batch`: --threads 1, a thread per actor).
SIZE_FLAGS = {"batch_size": 1, "max_tokens": 1, "buffer_texts": 1, "chunk_batches": 1, "concurrency": 1,
              "threads": 0, "max_restarts": 0}


def check_sizes(args: argparse.Namespace, **minimum: int) -> None:
    """The one check of the size flags, before any work: every bad one named in one InputError
    (`--batch-size: expected a positive integer, got 0; --threads: expected 0 or more, got -1`)."""
    least = {**SIZE_FLAGS, **minimum}
    bad = []
    for dest, low in least.items():
        value = getattr(args, dest, None)
        if value is not None and value < low:
            expected = "a positive integer" if low == 1 else f"{low} or more"
            bad.append(f"--{dest.replace('_', '-')}: expected {expected}, got {value}")
    if bad:
        raise InputError("; ".join(bad))
