"""A trained run evaluated on labelled data: the work of `tfm-cls eval`. The split is the run's own
data (a split of it) or a labelled file / folder, tokenized with the run's tokenizer and long-text
policy, scored by the run's head; the metrics go to a JSON file or stdout and into the run's record
of evaluations. The command then writes the report page when asked (report/ builds on classify/,
not the other way round) and refreshes the model card, which shows both."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfm_cls.runs import LoadedRun

logger = logging.getLogger(__name__)


def _labelled_split(run: LoadedRun, data: str | None, split: str, overrides: Sequence[str]):
    """(the examples, a name for them): `split` of `data` (a file or folder) or of the run's own data,
    read with the run's data config (+ `overrides`, e.g. label_column=topic) and the run's labels."""
    from tfm_cls.config import DataConfig, apply_overrides, from_dict, to_dict
    from tfm_cls.data.sources import load_data, load_eval_split
    from tfm_cls.errors import DataError

    data_cfg = run.config.data
    if overrides:
        data_cfg = from_dict(DataConfig, apply_overrides(to_dict(data_cfg), list(overrides), DataConfig), "data")
    if data:
        return load_eval_split(data_cfg, data, split, run.labels), data
    loaded = load_data(data_cfg)
    if loaded.labels != run.labels:
        raise DataError(f"the run's data now has classes {loaded.labels}, the model {run.labels}")
    return loaded.splits[split], f"{loaded.source} ({split})"


def evaluate_run(
    run_dir: str | Path, data: str | None = None, split: str = "test", overrides: Sequence[str] = (), *,
    batch_size: int = 128, device: str = "cpu", threads: int = 0, max_length: int | None = None,
    long_text: dict[str, Any] | None = None, output: str | None = None, candidate: str | None = None,
) -> dict[str, Any]:
    """Evaluate the run in `run_dir` on `split` of `data` (default: its own data) and return
    {"run", "data", **metrics}. `max_length` truncates below the run's length, `long_text` overrides
    its long-text policy (LongText fields), `threads` sets torch's intra-op threads (0: torch's
    default). The metrics JSON is written to `output` (default: stdout) and recorded among the run's
    evaluations, for its card (classify.card.write_card, which the caller runs). `candidate`: another
    model the run made (metrics.json `candidates`; RUN/candidates/NAME) with its own decision rule,
    evaluated the same way; its result names it and is not recorded (the card's table is the shipped
    model's)."""
    import torch

    from tfm_cls.classify.card import record_evaluation
    from tfm_cls.classify.predict import evaluate, run_head, run_policy
    from tfm_cls.data.tokenized import tokenize_dataset
    from tfm_cls.io import write_text
    from tfm_cls.runs import load_run
    from tfm_cls.training.distributed import select_device

    if threads:
        torch.set_num_threads(threads)
    run = load_run(run_dir, candidate=candidate)
    dataset, source = _labelled_split(run, data, split, overrides)
    tokenizer = run.tokenizer
    if max_length is not None:
        from tfm_cls.data.tokenizer import load_tokenizer_str
        from tfm_cls.model.classifier import token_limit

        tokenizer = load_tokenizer_str(tokenizer.to_str(), max_length, limit=token_limit(run.model.config))
    examples = tokenize_dataset(dataset, tokenizer, policy=run_policy(run, **(long_text or {})))
    target = select_device(device)
    run.model.to(target)
    head = run_head(run)
    metrics, logits = evaluate(run.model, examples, run.labels, batch_size, target,
                               run.model.config.get("pad_token_id") or 0, head=head)
    logger.info("%s: %d examples\n%s", source, len(examples), head.report(examples.labels, logits, run.labels))
    result = {"run": str(run_dir), **({"candidate": candidate} if candidate else {}), "data": str(source), **metrics}
    text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    if output:
        write_text(output, text)
    else:
        sys.stdout.write(text)  # the command's output, not a log line
    if candidate is None:
        record_evaluation(run_dir, str(source), {**metrics, "num_examples": len(examples)})
    return result
