"""What several commands do after parsing: a failure they already explained (exit code attached),
the one summary line of a finished run, the verification of an .onnx file. Imports nothing heavy
at the top (the commands' `--help` import this module)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


class CommandFailed(Exception):
    """A command failed for a reason it already explained (exit code attached): `error: MESSAGE`."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def quiet_datasets() -> None:
    import datasets

    datasets.disable_progress_bars()  # our own bars and log lines say what happens


def print_run_summary(run_dir: Path, metrics: dict, keys) -> None:
    """One JSON line: the run directory and the validation / test metrics of a finished run."""
    summary = {split: {k: metrics[split][k] for k in keys} for split in ("validation", "test") if split in metrics}
    if os.environ.get("RANK", "0") == "0":  # under torchrun every rank returns the metrics; one prints
        print(json.dumps({"run_dir": str(run_dir), **summary}))


def check_onnx(model, path: Path, providers: list[str] | None, name: Path, weights: Path | None = None) -> None:
    """Verify `path` (shown as `name`) against `model` (and the `weights` it must come from);
    print the report once; CommandFailed (exit 1) on failure."""
    from tfm_cls.export.verify import VerificationError, first_failure, verify

    try:
        report = verify(model, path, providers, name=str(name), weights=weights)
    except VerificationError as err:
        print(err.report, file=sys.stderr)  # the full report, then the one-line error
        raise CommandFailed(f"{name}: verification failed ({first_failure(err.report)})", 1) from err
    print(report)
