"""Helpers of the reliability suite (tests/integration/reliability): tiny data, the tiny run's
overrides, and a Runner that runs the real command lines as subprocesses.

Every case runs `python -m tfm_cls.cli ...` or `python export/infer.py ...` in a fresh process,
with HOME pointing at a temporary folder (so a write outside the run directory would show), and
asserts the exit code, a fragment of the one-line message and, with `hashes`, that no earlier
artifact changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from kits.tiny_topics import CLASSES, FILLER, WORDS, write_dataset

REPO = Path(__file__).resolve().parents[2]
INFER = REPO / "export" / "infer.py"
TINY = [
    "name=tiny", "seed=0",
    "tokenizer.vocab_size=120", "tokenizer.min_frequency=1", "tokenizer.max_length=16",
    "model.d_model=16", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=32", "model.max_len=32",
    "train.epochs=2", "train.batch_size=16", "train.eval_batch_size=32", "train.lr=1e-2",
    "train.warmup_steps=2", "train.progress=false", "train.num_threads=1", "train.log_every=2",
]


def make_rows(n: int, seed: int, labels=None) -> list[dict]:
    """Short texts whose class is given away by their topic words; `labels` maps the class index
    to the label written (default: the class name)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        c = i % len(CLASSES)
        words = [rng.choice(WORDS[CLASSES[c]]) for _ in range(rng.randint(2, 4))] + [rng.choice(FILLER)]
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": labels(i, c) if labels else CLASSES[c]})
    return rows


def make_data(folder: Path, labels=None) -> Path:
    """train (90) / validation (30) / test (30) of make_rows; no labels.json."""
    splits = {"train": make_rows(90, 0, labels), "validation": make_rows(30, 1, labels), "test": make_rows(30, 2, labels)}
    return write_dataset(folder, splits)


def environment(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=str(home), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO))
    env.pop("ORT_DISABLE_TELEMETRY", None)  # our entry points must switch it off themselves
    return env


class Runner:
    """Runs the command lines in `cwd` with HOME = `home`."""

    def __init__(self, cwd: Path, home: Path):
        self.cwd, self.home = cwd, home
        home.mkdir(parents=True, exist_ok=True)

    def _run(self, argv: list[str], stdin: bytes | None, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(argv, cwd=self.cwd, env=environment(self.home), input=stdin, capture_output=True,
                              timeout=timeout)

    def cli(self, *args: str, stdin: bytes | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        return self._run([sys.executable, "-m", "tfm_cls.cli", *map(str, args)], stdin, timeout)

    def infer(self, *args: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return self._run([sys.executable, str(INFER), "--no-progress", *map(str, args)], stdin, timeout)


def stderr_of(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.decode("utf-8", "replace")


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The last stderr line (the one-line error), asserting there is no traceback."""
    err = stderr_of(proc)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines, f"no message on stderr (exit {proc.returncode})"
    return lines[-1]


def hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder` (relative path -> digest)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def read_jsonl(data: bytes | Path) -> list[dict]:
    text = data.read_text(encoding="utf-8") if isinstance(data, Path) else data.decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line]
