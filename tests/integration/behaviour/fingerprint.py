"""Seeded tiny runs and a fingerprint of what they produce: weights, metrics and curves.

The training engine may be restructured, never changed: `fingerprints.json` beside this file was
written by this script with the code before the restructure (commit eb4fca3, the two loops of
train.py and pretrain.py), and test_behaviour.py reruns the same runs and compares.

The jobs after `finetuned` were recorded from commit 8d7d802, before the heads / runtime
restructure (the first five came out unchanged there), and go through the command line only
(`tfm_cls.cli.main`, in-process), so that they survive module moves:

- `multi_label`, `regression` (one text), `pair` (sentence pairs, single-label), `pair_regression`:
  `tfm-cls train` runs on `task_data`; the hashes of model.safetensors, metrics.json,
  history.json and (multi-label) thresholds.json.
- `distill`: `tfm-cls distill` of the `classifier` run into a smaller student; the same hashes of
  the student (metrics.json holds the distillation report: teacher, transfer set, labelling).
- `export_infer`: for classifier, multi_label, regression, pair, pair_regression and the distilled
  student, `tfm-cls export`, then `tfm-cls infer` (ONNX) and `tfm-cls predict` (PyTorch) of the
  same texts (an empty line, a text longer than max_length, normal ones; pairs from jsonl) and
  `tfm-cls eval` on the run's test split. Hashed: the output rows with floats rounded to 5
  decimals, the eval JSON likewise, and of the ONNX metadata_props all keys but only the values
  of META_VALUES (tfm_cls.version, torch.version, the weights digest etc. may differ for no
  behavioural reason).

One deliberate change since: the heads restructure gave `tfm-cls predict` the rows of `tfm-cls
infer` for every head (before, multi-label, regression and pair runs printed unrounded rows
without "truncated"), so the `predict` hashes of those four runs are their recorded `infer` hashes. And one since the
restructure: multi-label heads start each label's bias at the log-odds of its training frequency
(`multi_label.prior_init`, default true; issue 27), so the `multi_label` entries (training and
export_infer) were re-recorded at that commit, every other entry unchanged. And one more (issue 27):
single-label runs fit a calibration temperature on validation after training
(`train.calibration: auto`), so their metrics.json holds a `calibration` block and a calibrated
test loss, their exports carry `tfm_cls.temperature` and their scores are softmax(logits / T):
the `metrics` of classifier, classifier_branches, finetuned, pair and distill, and the
export_infer entries of classifier, pair and distill (infer, predict, eval, onnx_metadata) were
re-recorded; every weights and history hash, and every multi-label, regression and MLM entry,
is unchanged (calibration comes after training and is for single-label runs only).

Re-recorded on 2026-12-02 (session 12) on a new machine: every entry of the code at 226165a, the
last commit whose fresh-clone CI passed this test, differed there (MLM and training weights in
their last bits; the rounded infer rows of the classifier did not), and the code of this
session gave the same fingerprints as 226165a. The environment key gained the CPU's instruction
set flags (CPU_FEATURES) and the numpy and tokenizers versions, so a machine that differs in
those skips the comparison instead of failing it.

Session 13: finish_run records how far apart validation and test accuracy are
(`calibration.test.accuracy_shift`), so the `metrics` of classifier, classifier_branches,
finetuned, pair and distill were re-recorded; every other entry came out unchanged.

Session 14 (issue 35, the house by job): fingerprints.json holds one record per environment
(`records`); this machine's (no AMX) was recorded with the code before the restructure (3bcb6d6)
and the restructured code gives it bit for bit. The new switches of the recipe (train.eval_at_start,
train.baseline, contrastive, model.normalize, data fractions of 0) are off by default, so every
entry is unchanged by them too.

Left out as not deterministic: the TIMING_KEYS of every JSON (timing, throughput, device) and
the path of the temporary folder (written as <work>).

    python tests/integration/behaviour/fingerprint.py OUT.json # write the fingerprints of this checkout
                                                                # (add them to fingerprints.json's records)
"""

from __future__ import annotations

import hashlib
import json
import platform
import random
import sys
from pathlib import Path
from typing import Any

# Timing and throughput differ between any two runs; everything else must be equal
# (labelling_seconds: the teacher's labelling time in a distillation's metrics.json).
TIMING_KEYS = {"seconds", "texts_per_second", "train_seconds", "train_tokens_per_second", "device",
               "labelling_seconds"}

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

# ---- the jobs added before the heads / runtime restructure (commit 8d7d802) ------------------------
# They go through `tfm-cls` (tfm_cls.cli.main, in-process) only: the modules behind it may move.
TASK = [o.replace("train.epochs=6", "train.epochs=4") for o in CLASSIFIER if o != "tokenizer.max_length=16"]
TASK += ["tokenizer.max_length=24"]
MULTI_LABEL = ["data.task=multi_label", "data.label_column=labels", "train.best_metric=micro_f1"]
REGRESSION = ["data.task=regression", "data.label_column=score", "train.best_metric=pearson"]
PAIRS = ["data.text_columns=[first]", "data.text_pair_column=second"]
# The classifier run is the teacher; the student is smaller (d_model 8) and sees 3 copies per text.
DISTILL = [
    "name=tiny-distill", "seed=0", "tokenizer.vocab_size=120", "tokenizer.min_frequency=1", "tokenizer.max_length=16",
    "model.d_model=8", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=16", "model.max_len=32",
    "model.dropout=0.1", "transfer.copies=3", "train.epochs=2", "train.batch_size=16", "train.eval_batch_size=16",
    "train.lr=1e-2", "train.warmup_steps=5", "train.progress=false", "train.num_threads=1", "train.log_every=5",
    "train.device=cpu", "teacher.chunk_size=64",
]
# What every exported model is run on: normal texts, an empty line, a text longer than any max_length.
LONG_TEXT = " ".join(["the cat and the soup with golf"] * 12)
INFER_TEXTS = ["the cat sees a dog", "", "bread and cheese with soup", LONG_TEXT, "tennis golf rugby", "very very"]
INFER_PAIRS = ["a dog and a bird", "golf", "the apple", "rice", LONG_TEXT, "chess"]
# ONNX metadata whose values are behaviour (the rest, e.g. tfm_cls.version or torch.version, only by key).
META_VALUES = ("tfm_cls.format", "tfm_cls.task", "tfm_cls.head", "tfm_cls.labels", "tfm_cls.max_length",
               "tfm_cls.long_text", "tfm_cls.thresholds", "tfm_cls.fixed_threshold", "tfm_cls.ensure_label",
               "tfm_cls.text_pair")


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


def _topics_of(rng: random.Random, topics: list[str]) -> str:
    words = [rng.choice(WORDS[t]) for t in topics for _ in range(rng.randint(1, 3))]
    words += [rng.choice(FILLER) for _ in range(rng.randint(1, 4))]
    rng.shuffle(words)
    return " ".join(words)


def task_data(folder: Path) -> Path:
    """One table for every task: texts of one or two topics (`labels`: those topics, `score`:
    how many, plus noise) and pairs (`first`, `second`; `label` 0 when both share one topic, `pair_score`
    5 then, else 1, plus noise); 60 / 30 / 30."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", 60, 0), ("validation", 30, 1), ("test", 30, 2)):
        rng = random.Random(seed)
        rows = []
        for i in range(n):
            topics = [CLASSES[i % 3]] + ([CLASSES[(i + 1) % 3]] if i % 2 else [])
            a = CLASSES[i % 3]
            b = a if i % 2 == 0 else CLASSES[(i + 1) % 3]
            rows.append({"text": _topics_of(rng, topics), "labels": [CLASSES.index(t) for t in topics],
                         "score": len(topics) + rng.uniform(-0.2, 0.2),
                         "first": _topics_of(rng, [a]), "second": _topics_of(rng, [b]), "label": int(a != b),
                         "pair_score": (5.0 if a == b else 1.0) + rng.uniform(-0.3, 0.3)})
        _write_jsonl(folder / f"{split}.jsonl", rows)
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


def rounded(value: Any, digits: int = 5) -> Any:
    """`value` with every float rounded (ONNX / kernel noise below 1e-5 is no behaviour); -0.0 is 0.0."""
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    if isinstance(value, float):
        return round(value, digits) + 0.0
    return value


def value_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def rows_hash(path: Path, workdir: Path) -> str:
    """The JSONL rows of an output file, floats rounded: labels, fields and row order must match."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return value_hash(rounded(comparable(rows, str(workdir))))


def onnx_meta_hash(path: Path) -> str:
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return value_hash({"keys": sorted(meta), "values": {k: meta[k] for k in META_VALUES if k in meta}})


def cli(*argv: str) -> None:
    from tfm_cls.cli import main

    code = main([str(a) for a in argv])
    if code != 0:
        raise RuntimeError(f"tfm-cls {' '.join(map(str, argv))}: exit code {code}")


CPU_FEATURES = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16",
                "amx_int8")
"""Instruction-set flags that change which CPU kernels torch picks (and so the last bits of a
float): two AVX512 machines with and without AMX gave other weights from the same code."""


def cpu_features() -> str:
    """The CPU_FEATURES this machine has, from /proc/cpuinfo ('' where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return " ".join(f for f in CPU_FEATURES if f in flags)


def environment() -> dict[str, str]:
    """What the bits depend on besides the code: a fingerprint is only comparable on the same."""
    import numpy
    import tokenizers
    import torch

    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "machine": platform.machine(), "cpu_features": cpu_features(), "numpy": numpy.__version__,
            "tokenizers": tokenizers.__version__}


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
    cli_jobs(workdir, topics, out)
    return out


def cli_jobs(workdir: Path, topics: Path, out: dict[str, Any]) -> None:
    """Distillation, the other task types, and export / infer / predict / eval of each, all
    through the command line (recorded from commit 8d7d802)."""
    tasks = task_data(workdir / "tasks")
    for name in ("multi_label", "regression", "pair", "pair_regression"):  # the train / validation / test files
        (workdir / name).mkdir()
        for split in ("train", "validation", "test"):
            (workdir / name / f"{split}.jsonl").symlink_to(tasks / f"{split}.jsonl")
    (workdir / "multi_label" / "labels.json").write_text(json.dumps(CLASSES), encoding="utf-8")
    (workdir / "pair" / "labels.json").write_text(json.dumps(["same", "different"]), encoding="utf-8")
    defaults = workdir / "defaults.yaml"  # an empty config file: the built-in defaults, no preset
    defaults.write_text("{}\n", encoding="utf-8")

    def result_files(run: Path) -> dict[str, str]:
        got = {"weights": weights_hash(run / "model.safetensors"), "metrics": json_hash(run / "metrics.json", workdir),
               "history": json_hash(run / "history.json", workdir)}
        if (run / "thresholds.json").is_file():
            got["thresholds"] = json_hash(run / "thresholds.json", workdir)
        return got

    runs = {"classifier": workdir / "classifier"}
    for name, extra in (("multi_label", MULTI_LABEL), ("regression", REGRESSION), ("pair", PAIRS),
                        ("pair_regression", [*PAIRS, *REGRESSION[:1], "data.label_column=pair_score",
                                             "train.best_metric=pearson"])):
        run = runs[name] = workdir / f"{name}_run"
        cli("train", "--config", defaults, *TASK, *extra, f"data.path={workdir / name}", f"run_dir={run}")
        out[name] = result_files(run)

    student = workdir / "distill_run"
    cli("distill", "--config", defaults, *DISTILL, f"data.path={topics}", f"teacher.path={runs['classifier']}",
        f"run_dir={student}")
    out["distill"] = result_files(student)
    runs["distill"] = student

    texts = workdir / "infer.txt"
    texts.write_text("".join(t + "\n" for t in INFER_TEXTS), encoding="utf-8")
    pairs = workdir / "infer_pairs.jsonl"
    _write_jsonl(pairs, [{"text": a, "text_pair": b} for a, b in zip(INFER_TEXTS, INFER_PAIRS)])
    exported: dict[str, Any] = {}
    for name, run in runs.items():
        pair = name.startswith("pair")
        source = pairs if pair else texts
        cli("export", "--run", run)
        onnx_rows, torch_rows, evaluation = (workdir / f"{name}.{k}" for k in ("infer.jsonl", "predict.jsonl", "eval.json"))
        cli("infer", "--model", run / "model.onnx", "--input", source, "--output", onnx_rows, "--threads", "1",
            "--no-progress")
        cli("predict", "--run", run, "--input", source, "--output", torch_rows, "--threads", "1",
            *(["--pair-field", "text_pair"] if pair else []))
        cli("eval", "--run", run, "--output", evaluation, "--threads", "1")
        exported[name] = {"onnx_metadata": onnx_meta_hash(run / "model.onnx"), "infer": rows_hash(onnx_rows, workdir),
                          "predict": rows_hash(torch_rows, workdir),
                          "eval": value_hash(rounded(comparable(json.loads(evaluation.read_text()), str(workdir))))}
    out["export_infer"] = exported


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = fingerprints(Path(tmp))
    text = json.dumps(result, indent=2) + "\n"
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text, encoding="utf-8")
    print(text)
