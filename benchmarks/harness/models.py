"""The ONNX files benchmarks time: a finished run's export, and a random-weight student of a given
shape (speed does not depend on the weights)."""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def exported(run_dir: str | Path) -> Path:
    """RUN/model.onnx, exported and verified against the run's model where it is missing."""
    from tfm_cls.export.exporter import export_run
    from tfm_cls.export.verify import verify

    from tfm_cls.runs import load_run

    path = Path(run_dir) / "model.onnx"
    if not path.is_file():
        export_run(run_dir)
        logger.info("%s", verify(load_run(run_dir).model, path))
    return path


def random_student(texts: list[str], out: str | Path, d_model: int = 128, layers: int = 2) -> Path:
    """A random-weight classifier (d_model, layers, 4 heads, feed-forward 4 x d_model, 6 classes,
    64 tokens), exported to `out` with a WordPiece tokenizer trained on `texts`."""
    import torch
    from tfm_cls.export.exporter import export_classifier

    from tfm_cls.config import TokenizerConfig
    from tfm_cls.data.tokenizer import train_tokenizer
    from tfm_cls.model import TransformerClassifier

    tok = train_tokenizer(texts, TokenizerConfig(vocab_size=4000, min_frequency=1, max_length=64))
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=tok.get_vocab_size(), num_classes=6, d_model=d_model, nhead=4,
                                  num_layers=layers, dim_feedforward=4 * d_model, dropout=0.0, max_len=64).eval()
    return export_classifier(model, out, tokenizer=tok, labels=[f"c{i}" for i in range(6)], max_length=64)


def small_trained_run(data_dir: str | Path, run_dir: str | Path, quick: bool) -> Path:
    """A small classifier trained on a data folder with the project's own training code (the
    default model, 8k vocabulary, 128 tokens; 3 minutes, or 40 steps on 3,000 texts when `quick`:
    for speed only)."""
    from tfm_cls.config import ClassifierConfig, DataConfig, TokenizerConfig, TrainConfig
    from tfm_cls.train import train

    cfg = ClassifierConfig(
        name="bench-infer",
        run_dir=str(run_dir),
        data=DataConfig(path=str(data_dir), max_train_samples=3000 if quick else None),
        tokenizer=TokenizerConfig(vocab_size=8000, max_length=128),
        train=TrainConfig(epochs=1, max_steps=40 if quick else None, max_minutes=None if quick else 3.0,
                          batch_size=32, lr=1e-3, progress=False, eval_every=None),
    )
    logger.info("training a small model on %s into %s", data_dir, run_dir)
    train(cfg, overwrite=True)
    return Path(run_dir)
