"""The model card of a run directory: RUN/README.md in the Hugging Face model-card convention.

    write_card(run_dir)        # at the end of `tfm-cls train`; again after `eval` and `export`

The card is rendered from the run's own files only (config.yaml, model_config.json, labels.json,
metrics.json, evaluations.json, confusion_matrix.png, model.onnx), so rewriting it is idempotent
and every number in it is one that the run measured: YAML front matter (language, tags, datasets,
metrics and a `model-index` with the validation and test scores, unrounded), then what the model
is, the data and split sizes, the labels, the metrics table, the confusion matrix, the limits,
how to run it (ONNX and Python) and the resolved training config. A TF-IDF baseline appears only
where metrics.json holds the run's own (`baseline`, `train.baseline`); none is ever made up here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml

from tfm_cls import runs as R
from tfm_cls.classify.baseline import reported
from tfm_cls.classify.calibration import SHIFT_Z
from tfm_cls.io import read_json, write_json, write_text
from tfm_cls.model.classifier import describe_config

logger = logging.getLogger(__name__)

EVALUATIONS_FILE = "evaluations.json"
"""`tfm-cls eval` results of a run ({"<data> (<split>)": metrics}), shown on the card."""
ONNX_FILE = R.ONNX_FILE
METRIC_NAMES = {"accuracy": "Accuracy", "macro_f1": "Macro-F1", "micro_f1": "Micro-F1",
                "subset_accuracy": "Subset accuracy", "pearson": "Pearson", "spearman": "Spearman", "mse": "MSE",
                "loss": "Loss"}
"""The title of each metric a head reports (its `summary_keys`)."""
HF_METRIC_TYPES = {"accuracy": "accuracy", "macro_f1": "f1", "micro_f1": "f1", "subset_accuracy": "accuracy",
                   "pearson": "pearsonr", "spearman": "spearmanr", "mse": "mse", "loss": "loss"}


def card_metrics(config: dict[str, Any]) -> tuple[str, ...]:
    """The metrics of the card's table, in order: the run's head's summary (loss last)."""
    from tfm_cls.classify.heads import HEAD_TYPES

    keys = HEAD_TYPES[config.get("data", {}).get("task", "single_label")].summary_keys
    return (*(k for k in keys if k != "loss"), "loss")


def _read_optional(path: Path) -> Any:
    return read_json(path) if path.is_file() else None


def guess_language(vocabulary: list[str]) -> str:
    """`zh` when a fifth or more of the word pieces hold CJK characters, else `en` (the card's
    language tag; the run has no language setting)."""
    cjk = sum(any("\u4e00" <= ch <= "\u9fff" for ch in piece) for piece in vocabulary)
    return "zh" if vocabulary and cjk >= 0.2 * len(vocabulary) else "en"


def record_evaluation(run_dir: str | Path, source: str, metrics: dict[str, Any]) -> None:
    """Keep one `tfm-cls eval` result in RUN/evaluations.json (the latest per data source)."""
    path = Path(run_dir) / EVALUATIONS_FILE
    evaluations = _read_optional(path) or {}
    evaluations[source] = {k: metrics[k] for k in (*METRIC_NAMES, "num_examples") if k in metrics}
    write_json(path, evaluations)


def _dataset_name(config: dict[str, Any]) -> str:
    data = config.get("data", {})
    return Path(data["path"]).name if data.get("path") else str(data.get("name"))


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else "–" if value is None else str(value)


def front_matter(config: dict[str, Any], metrics: dict[str, Any] | None, language: str) -> dict[str, Any]:
    """The card's YAML header: Hugging Face model-card metadata, with a model-index of the scores."""
    dataset = _dataset_name(config)
    meta: dict[str, Any] = {
        "language": [language],
        "library_name": "tfm-cls",
        "pipeline_tag": "text-classification",
        "tags": ["text-classification", "tfm-cls", "onnx"],
        "datasets": [dataset],
        "metrics": ["accuracy", "f1"],
    }
    if metrics:
        results = []
        for split in ("validation", "test"):
            if split not in metrics:
                continue
            results.append({
                "task": {"type": "text-classification", "name": "Text Classification"},
                "dataset": {"name": dataset, "type": dataset, "split": split},
                "metrics": [
                    {"type": HF_METRIC_TYPES[k], "value": metrics[split][k], "name": f"{split} {METRIC_NAMES[k]}"}
                    for k in card_metrics(config) if k in metrics[split]
                ],
            })
        meta["model-index"] = [{"name": config.get("name", "run"), "results": results}]
    return meta


def _metrics_table(metrics: dict[str, Any], evaluations: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    columns = [(split, metrics[split]) for split in ("validation", "test") if split in metrics]
    for name, baseline in reported(metrics).items():  # only what the run computed
        for split, values in baseline.items():
            columns.append((f"{name} ({split})", values))
    columns += [(f"eval: {source}", values) for source, values in evaluations.items()]
    lines = ["| metric | " + " | ".join(name for name, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for key in keys:
        lines.append(f"| {METRIC_NAMES[key]} | " + " | ".join(_fmt(values.get(key)) for _, values in columns) + " |")
    return lines


def _loss_weights_lines(metrics: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The loss weights the run trained with (metrics.json `loss_weights`), as a card paragraph."""
    record = metrics.get("loss_weights")
    if not record:
        return []
    section, key = record["key"].split(".", 1)
    given = (config.get(section) or {}).get(key)
    weights = list(record["weights"].items())
    shown = ", ".join(f"{label} {w:.3g}" for label, w in weights[:30])
    more = f", ... ({len(weights)} in all: metrics.json)" if len(weights) > 30 else ""
    return ["", f"Loss weights (`{record['key']}: {given if isinstance(given, str) else 'a mapping'}`): {shown}{more}."]


def _data_lines(config: dict[str, Any], metrics: dict[str, Any] | None) -> list[str]:
    """## Data: the source, what was carved from train, and each split's size."""
    out = ["## Data", ""]
    if not metrics:
        return out + [f"Dataset: `{_dataset_name(config)}` (the run has not finished: no metrics.json yet)."]
    data = metrics.get("data", {})
    out.append(f"Source: `{data.get('source', _dataset_name(config))}`.")
    carved = data.get("carved_from_train") or []
    if carved:
        out.append(f"Carved from the training split (seeded, stratified): {', '.join(carved)}.")
    out += ["", "| split | examples | truncated | empty |", "|---|---:|---:|---:|"]
    for split in ("train", "validation", "test"):
        if f"{split}_examples" in data:
            out.append(f"| {split} | {data[f'{split}_examples']} | {data.get('truncated', {}).get(split, 0)} | "
                       f"{data.get('empty', {}).get(split, 0)} |")
    return out


def _results_lines(config: dict[str, Any], metrics: dict[str, Any] | None, evaluations: dict[str, Any]) -> list[str]:
    """## Results: how the best weights were chosen, the metrics table, the loss weights."""
    out = ["## Results", ""]
    if not metrics:
        return out
    best = metrics.get("best_metric")
    out.append(f"Scores of the best weights (selected by validation {best} at step {metrics.get('best_step')} "
               f"of {metrics.get('steps')}; {metrics.get('epochs', 0):.2f} epochs, stopped: {metrics.get('stopped')}, "
               f"{metrics.get('train_seconds', 0):.0f} s of training on {metrics.get('device')}).")
    if "test" not in metrics:
        out.append("This run did not score a test split (validation only: a tuning trial, or a TextClassifier fit on "
                   "texts of its own).")
    out += ["", *_metrics_table(metrics, evaluations, card_metrics(config))]
    out += _loss_weights_lines(metrics, config)
    if not reported(metrics):
        out += ["", "No TF-IDF baseline was computed by this run (see `python -m benchmarks.accuracy`)."]
    return out


def _candidates_lines(candidates: dict[str, Any] | None) -> list[str]:
    """## What the run chose: each candidate's scores and cost, and the rule (tfm_cls.bag.candidates)."""
    if not candidates:
        return []
    out = ["", "## What the run chose", "", f"The run made {len(candidates['front'])} deployable models and ships "
           f"`{candidates['chosen']}`: {candidates['rule']}.", "",
           "| candidate | validation | test | texts/s (1 thread) | weights MB | within tolerance | shipped |",
           "|---|---:|---:|---:|---:|---|---|"]
    for row in candidates["front"]:
        (metric, value), = row["validation"].items()
        test = (row.get("test") or {}).get(metric)
        out.append(f"| {_name(row)} | {metric} {value:.4f} | {'' if test is None else f'{test:.4f}'} | "
                   f"{row['texts_per_second']:.0f} | {row['size_mb']:.1f} | "
                   f"{holds_text(row)} (±{row['tolerance']:.4f}) | {'**yes**' if row['chosen'] else ''} |")
    return out


def _name(row: dict[str, Any]) -> str:
    """A candidate's name, and whose logits it computes where it computes another's (its test score is that one's)."""
    twin = row.get("same_logits_as")
    return f"{row['name']} (the logits of {twin})" if twin else row["name"]


def holds_text(row: dict[str, Any]) -> str:
    """Whether a candidate holds the best score, and why not: who beat it, or how far it may trail the
    best (its loss bound, over the most it may lose; tfm_cls.bag.compare.MAX_LOSS)."""
    beaten_by = row.get("beaten_by")
    if row.get("holds_best"):
        return "yes"
    if beaten_by:
        return f"no (beaten by {', '.join(beaten_by)})"
    bound = row.get("loss_bound")
    return f"no (may trail the best by {bound:.4f})" if bound is not None else "no"


def _calibration_lines(calibration: dict[str, Any] | None) -> list[str]:
    """## Calibration: the temperature and the ECE / NLL before and after, with the shift warning."""
    if not calibration:
        return []
    out = ["## Calibration", "",
           f"Scores are softmax(logits / T) with T = {calibration['temperature']:.4f}, fitted on the validation "
           f"split (temperature scaling: LBFGS on the NLL); predicted labels are those of the raw logits. "
           f"Expected calibration error ({calibration.get('ece_bins', 15)} bins):", "",
           "| split | ECE before | ECE after | NLL before | NLL after |", "|---|---:|---:|---:|---:|"]
    for split in ("validation", "test"):
        if split in calibration:
            c = calibration[split]
            out.append(f"| {split} | {c['ece_before']:.4f} | {c['ece_after']:.4f} | {c['nll_before']:.4f} | "
                       f"{c['nll_after']:.4f} |")
    shift = calibration.get("test", {}).get("accuracy_shift")
    if shift is not None and abs(shift) >= SHIFT_Z:
        out += ["", f"**Validation and test accuracy are {abs(shift):.1f} standard errors apart**: the validation "
                "split, where T was fitted, does not represent test, and T may not carry to it."]
    return out


def _limits_lines(config: dict[str, Any], model_config: dict[str, Any], metrics: dict[str, Any] | None,
                  labels: list[str], language: str) -> list[str]:
    tok = config.get("tokenizer", {})
    truncated = (f"; {sum((metrics.get('data') or {}).get('truncated', {}).values())} texts of the run's data were."
                 if metrics else ".")
    return [
        "## Limits", "",
        f"- Inputs longer than {tok.get('max_length')} tokens (including [CLS] and [SEP]) are truncated{truncated}",
        f"- Vocabulary: {model_config['vocab_size']} {tok.get('kind', 'wordpiece')} pieces learnt from the training "
        f"texts{' (lowercased)' if tok.get('lowercase', True) else ''}; words outside it become sub-words or [UNK].",
        f"- Only the {len(labels)} classes above; language tag `{language}` is guessed from the vocabulary.",
        "- Trained and evaluated on one dataset; expect lower accuracy on texts of another domain.",
    ]


def _usage_lines(run_dir: Path) -> list[str]:
    """## How to use: the ONNX file (exported or not yet) and the Python API."""
    onnx = run_dir / ONNX_FILE
    out = ["## How to use", "", "ONNX (torch-free: onnxruntime, tokenizers and numpy; the tokenizer, labels and max",
           "length travel inside the file):", "", "```bash"]
    if not onnx.is_file():
        out.append(f"tfm-cls export --run {run_dir}        # writes and verifies model.onnx")
    out += ["python export/infer.py --model model.onnx --input texts.txt --output predictions.jsonl",
            "# or: tfm-cls infer --model model.onnx --input texts.txt", "```", ""]
    if onnx.is_file():
        out += [f"`{ONNX_FILE}` is here ({onnx.stat().st_size / 2**20:.1f} MB).", ""]
    return out + ["Python:", "", "```python", "from tfm_cls import TextClassifier", "",
                  f'clf = TextClassifier.load("{run_dir}")', 'clf.predict(["some text"])', "```", ""]


def render_card(run_dir: str | Path) -> str:
    """The Markdown text of RUN/README.md (see the module docstring)."""
    run_dir = Path(run_dir)
    config = yaml.safe_load((run_dir / R.CONFIG_FILE).read_text(encoding="utf-8")) or {}
    model_config = read_json(run_dir / R.MODEL_CONFIG_FILE)
    labels: list[str] = read_json(run_dir / R.LABELS_FILE)
    metrics = _read_optional(run_dir / R.METRICS_FILE)
    evaluations = _read_optional(run_dir / EVALUATIONS_FILE) or {}
    vocabulary = list((read_json(run_dir / R.TOKENIZER_FILE).get("model") or {}).get("vocab") or [])
    language = guess_language(vocabulary)
    train_cfg = config.get("train", {})
    init_from = (config.get("model") or {}).get("init_from")
    start = f"fine-tuned from `{init_from}`" if init_from else "trained from scratch (random initialisation)"
    params = f"{metrics['num_parameters']:,} parameters, " if metrics else ""
    out = ["---", yaml.safe_dump(front_matter(config, metrics, language), sort_keys=False, allow_unicode=True).rstrip(),
           "---", "", f"# {config.get('name', run_dir.name)}", "",
           f"A text classifier ({len(labels)} classes) built with tfm-cls: a Transformer "
           f"encoder written in plain PyTorch, {start}; {params}{describe_config(model_config)}.", ""]
    out += _data_lines(config, metrics)
    out += ["", "## Labels", "", "| index | label |", "|---:|---|", *(f"| {i} | {x} |" for i, x in enumerate(labels))]
    out += ["", *_results_lines(config, metrics, evaluations)]
    out += _candidates_lines((metrics or {}).get("candidates"))
    calibration = _calibration_lines((metrics or {}).get("calibration"))
    out += ["", *calibration] if calibration else []
    if (run_dir / R.REPORT_HTML_FILE).is_file():
        out += ["", f"The full report (errors, calibration, likely label errors, a TF-IDF baseline): "
                f"[{R.REPORT_HTML_FILE}]({R.REPORT_HTML_FILE})."]
    if (run_dir / R.CONFUSION_FILE).is_file():
        out += ["", "## Confusion matrix (test)", "", f"![confusion matrix]({R.CONFUSION_FILE})"]
    out += ["", *_limits_lines(config, model_config, metrics, labels, language)]
    out += ["", *_usage_lines(run_dir)]
    out += ["## Training config", "", f"Resolved `{R.CONFIG_FILE}` (train: {train_cfg.get('epochs')} epochs max, "
            f"batch {train_cfg.get('batch_size')}, lr {train_cfg.get('lr')}):", "", "```yaml",
            (run_dir / R.CONFIG_FILE).read_text(encoding="utf-8").rstrip(), "```", ""]
    return "\n".join(out)


def write_card(run_dir: str | Path) -> Path:
    """(Re)write RUN/README.md atomically; returns its path."""
    path = Path(run_dir) / R.CARD_FILE
    write_text(path, render_card(run_dir))
    logger.debug("model card -> %s", path)
    return path


def parse_front_matter(text: str) -> dict[str, Any]:
    """The YAML header of a card (for tests and tools reading cards back)."""
    if not text.startswith("---\n"):
        return {}
    end = text.index("\n---\n", 4)
    return yaml.safe_load(text[4:end]) or {}
