"""Seeded tiny runs and a fingerprint of what they produce: weights, metrics and curves.

The training engine may be restructured, never changed: `fingerprints.json` beside this file was
written by this script with the code before the restructure (commit eb4fca3, the two loops of
train.py and pretrain.py), and test_behaviour.py reruns the same runs and compares.

    python tests/behaviour/fingerprint.py OUT.json     # write the fingerprints of this checkout
"""

from __future__ import annotations

import hashlib
import json
import platform
import random
import sys
from pathlib import Path
from typing import Any

# Timing and throughput differ between any two runs; everything else must be equal.
TIMING_KEYS = {"seconds", "texts_per_second", "train_seconds", "train_tokens_per_second", "device"}

CLASSES = ["animals", "food", "sports"]
WORDS = {
    "animals": ["cat", "dog", "horse", "tiger", "bird", "fish"],
    "food": ["bread", "apple", "cheese", "pasta", "soup", "rice"],
    "sports": ["tennis", "soccer", "golf", "rugby", "boxing", "chess"],
}
FILLER = ["the", "a", "some", "very", "really", "about", "and", "with"]
NOUNS = "cat dog bird horse fish mouse".split()
VERBS = "sees chases likes follows".split()
PLACES = "garden house river forest".split()

CLASSIFIER = [
    "name=tiny", "seed=0", "tokenizer.vocab_size=120", "tokenizer.min_frequency=1", "tokenizer.max_length=16",
    "model.d_model=16", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=32", "model.max_len=32",
    "model.dropout=0.1", "train.epochs=6", "train.batch_size=8", "train.eval_batch_size=16", "train.lr=1e-2",
    "train.warmup_steps=5", "train.progress=false", "train.num_threads=1", "train.log_every=5", "train.device=cpu",
]
# The same run through every branch of the loop: accumulation, step-wise evaluation, a head-only
# phase, label smoothing, early stopping, layer-wise rates.
CLASSIFIER_BRANCHES = [
    "train.grad_accum_steps=2", "train.eval_every=4", "train.head_only_steps=3", "train.label_smoothing=0.1",
    "train.early_stopping_patience=3", "train.layerwise_lr_decay=0.8", "train.head_lr=2e-2", "train.epochs=12",
    "train.checkpoint_every=5", "train.best_metric=accuracy", "model.num_layers=2",
]
MLM = [
    "tokenizer.vocab_size=100", "tokenizer.min_frequency=1", "tokenizer.max_length=32", "model.d_model=16",
    "model.nhead=4", "model.num_layers=2", "model.dim_feedforward=32", "model.max_len=64", "mlm.seq_len=32",
    "train.batch_size=8", "train.epochs=4", "train.lr=3e-3", "train.warmup_steps=5", "train.eval_every=20",
    "train.checkpoint_every=10", "train.log_every=5", "train.progress=false", "train.num_threads=1",
    "train.device=cpu",
]
MLM_BRANCHES = ["mlm.masking=span", "train.grad_accum_steps=2", "mlm.pack=false", "train.max_steps=30"]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def topic_data(folder: Path) -> Path:
    """Texts whose class is given away by their topic words; 60 / 30 / 30."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", 60, 0), ("validation", 30, 1), ("test", 30, 2)):
        rng = random.Random(seed)
        rows = []
        for i in range(n):
            label = i % len(CLASSES)
            words = [rng.choice(WORDS[CLASSES[label]]) for _ in range(rng.randint(2, 5))]
            words += [rng.choice(FILLER) for _ in range(rng.randint(1, 6))]
            rng.shuffle(words)
            rows.append({"text": " ".join(words), "label": label})
        _write_jsonl(folder / f"{split}.jsonl", rows)
    (folder / "labels.json").write_text(json.dumps(CLASSES), encoding="utf-8")
    return folder


def grammar_data(folder: Path) -> Path:
    """Sentences of a small grammar (learnable by MLM); label: is a cat mentioned."""
    rng = random.Random(0)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 240), ("validation", 40), ("test", 40)):
        rows = []
        for _ in range(n):
            a, b = rng.choice(NOUNS), rng.choice(NOUNS)
            rows.append({"text": f"the {a} {rng.choice(VERBS)} the {b} in the {rng.choice(PLACES)} .",
                         "label": int("cat" in (a, b))})
        _write_jsonl(folder / f"{split}.jsonl", rows)
    (folder / "labels.json").write_text(json.dumps(["no_cat", "cat"]), encoding="utf-8")
    return folder


def weights_hash(path: Path) -> str:
    from safetensors.numpy import load_file

    tensors = load_file(str(path))
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].tobytes())
    return digest.hexdigest()


def comparable(value: Any, workdir: str) -> Any:
    """`value` without timing fields, and with the temporary folder's path written as <work>."""
    if isinstance(value, dict):
        return {k: comparable(v, workdir) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [comparable(v, workdir) for v in value]
    if isinstance(value, str):
        return value.replace(workdir, "<work>")
    return value


def json_hash(path: Path, workdir: Path) -> str:
    value = comparable(json.loads(path.read_text()), str(workdir))
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def environment() -> dict[str, str]:
    """What the bits depend on besides the code: a fingerprint is only comparable on the same."""
    import torch

    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "machine": platform.machine()}


def fingerprints(workdir: Path) -> dict[str, Any]:
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.pretrain import PretrainConfig, pretrain
    from tfm_cls.train import train

    topics, grammar = topic_data(workdir / "topics"), grammar_data(workdir / "grammar")
    out: dict[str, Any] = {"environment": environment()}

    def classify(name: str, overrides: list[str], data: Path) -> None:
        run = workdir / name
        train(load_config(ClassifierConfig, None, [*overrides, f"data.path={data}", f"run_dir={run}"]))
        out[name] = {"weights": weights_hash(run / "model.safetensors"), "metrics": json_hash(run / "metrics.json", workdir),
                     "history": json_hash(run / "history.json", workdir)}

    def mlm(name: str, overrides: list[str]) -> Path:
        run = workdir / name
        pretrain(load_config(PretrainConfig, None, [*overrides, f"data.path={grammar}", f"run_dir={run}"]))
        out[name] = {"encoder": weights_hash(run / "encoder.safetensors"),
                     "mlm_head": weights_hash(run / "mlm_head.safetensors"),
                     "metrics": json_hash(run / "metrics.json", workdir),
                     "history": json_hash(run / "history.json", workdir)}
        return run

    classify("classifier", CLASSIFIER, topics)
    classify("classifier_branches", CLASSIFIER + CLASSIFIER_BRANCHES, topics)
    mlm_run = mlm("mlm", MLM)
    mlm("mlm_branches", MLM + MLM_BRANCHES)
    # Fine-tuning from the pretraining run: the init_from path and the pretrained tokenizer.
    classify("finetuned", [o for o in CLASSIFIER if not o.startswith(("tokenizer.", "model."))]
             + ["tokenizer.max_length=32", f"model.init_from={mlm_run}", "train.head_only_steps=2"], grammar)
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = fingerprints(Path(tmp))
    text = json.dumps(result, indent=2) + "\n"
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    print(text)
