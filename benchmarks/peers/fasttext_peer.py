"""The fastText peer (Joulin et al., "Bag of Tricks"): `train_supervised` on our splits, with word
bigrams, and with its autotune on the validation split. Benchmark-only (the `bench` extra installs
fasttext-numpy2, which provides the `fasttext` module: fasttext 0.9.x's predict fails under numpy 2).

Texts are lowercased and punctuation split off (fastText splits on whitespace only); that
normalisation is part of the timed prediction, so texts/s is end to end from raw text.

The bigram model is fitted in a Python process of its own (`_fit_in_child`) and loaded back: in a
test worker that had run other suites, fastText's fit of a 20-text set raised "Encountered NaN." at
every rate, where a fresh process fits it (the same file, seed and settings) every time.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.peers import missing

logger = logging.getLogger("bench.fasttext")

_PUNCT = re.compile(r"([^\w\s'])")
BIGRAMS = {"wordNgrams": 2, "epoch": 25, "lr": 0.5, "dim": 100, "minCount": 1, "bucket": 200_000, "loss": "softmax"}
"""The bigram model's settings: fastText's classification recipe, with a 200k-bucket n-gram table
(the default 2M makes a 0.8 GB file)."""


def available() -> str | None:
    """None when fastText trains and predicts here, else the reason (one line)."""
    return missing("fasttext")


def normalise(text: str) -> str:
    return _PUNCT.sub(r" \1 ", text.lower().replace("\n", " "))


def write_split(path: Path, texts: list[str], labels) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for text, label in zip(texts, labels):
            f.write(f"__label__{int(label)} {normalise(text)}\n")
    return path


class FastTextPredictor:
    """Raw texts -> class ids, end to end (normalisation included)."""

    def __init__(self, model) -> None:
        self.model = model

    def __call__(self, texts: list[str]) -> np.ndarray:
        labels, _ = self.model.predict([normalise(t) for t in texts], k=1)
        return np.asarray([int(row[0].removeprefix("__label__")) for row in labels])


def train_fasttext(train, validation, out_dir: Path, *, autotune_seconds: int = 0, seed: int = 42) -> dict:
    """One fastText model: the bigram recipe, or (autotune_seconds > 0) autotune on `validation`.
    Returns {"system", "model_path", "predictor", "train_minutes", "params"}."""
    import fasttext

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    train_file = write_split(out_dir / "train.txt", train.texts, train.targets)
    start = time.perf_counter()
    if autotune_seconds:
        valid_file = write_split(out_dir / "validation.txt", validation.texts, validation.targets)
        model = fasttext.train_supervised(str(train_file), autotuneValidationFile=str(valid_file),
                                          autotuneDuration=autotune_seconds, thread=2, seed=seed, verbose=0)
        # thread=2: with thread=1 autotune never returns (fasttext-numpy2 0.10.4); prediction is one thread anyway
        name, path, params = "fastText autotune", out_dir / "autotune.bin", {
            k: getattr(model, k) for k in ("dim", "epoch", "lr", "wordNgrams", "minn", "maxn", "bucket") if hasattr(model, k)}
        model.save_model(str(path))
    else:
        name, path, params = "fastText bigrams", out_dir / "bigrams.bin", dict(BIGRAMS)
        _fit_in_child(train_file, path, params, seed)
        model = fasttext.load_model(str(path))
    minutes = (time.perf_counter() - start) / 60
    return {"system": name, "model_path": str(path), "predictor": FastTextPredictor(model), "train_minutes": minutes,
            "params": params}


_FIT = """
import json, sys
import fasttext
train_file, path, params, seed = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
fasttext.train_supervised(train_file, thread=1, seed=seed, verbose=0, **params).save_model(path)
"""


def _fit_in_child(train_file: Path, path: Path, params: dict, seed: int) -> None:
    """fastText's supervised fit of `train_file` with `params`, saved to `path`, in a fresh Python
    process; RuntimeError with fastText's own last line where it fails (e.g. "Encountered NaN.")."""
    done = subprocess.run([sys.executable, "-c", _FIT, str(train_file), str(path), json.dumps(params), str(seed)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"fastText exited with {done.returncode}")
