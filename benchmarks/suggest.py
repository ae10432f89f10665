"""Issue 43: which texts to label next — the tool's picks against random and small-text's strategies, simulated.

The loop is simulated on each shared set's pool (a seeded sample of POOL training texts, labels
hidden until picked): from 0 and from 8 texts a class (a seeded stratified sample, the same for
every strategy), rounds of +8 texts a class, to 64 a class. After every round a cheap proxy model
— logistic regression (C=10)  on the frozen MiniLM vectors of the labelled texts — is
scored on the whole test split. Three seeds. Strategies:
- tool: `tfm_cls.suggest.Suggester` with its defaults and labels.json's descriptions (cold start:
  cover within each label the descriptions guess; then, on the margin of the guess model, which
  takes the descriptions as a prior, strategy `auto`: spread_uncertain below 16 labelled texts a
  class, top_uncertain from there on); its variants, so the default is chosen by measurement:
  tool-spread (always spread), tool-top (always the n most uncertain), tool-top-from-K (auto
  switching at K a class), tool-bare-names (labels.json a plain list of names; spread), tool-cover
  (no label names: cover the pool as one; spread), tool-candidates (clusters of the 5n most
  uncertain only), tool-entropy;
- random: uniform picks from the unlabelled pool;
- small-text 1.4 (benchmarks/peers/small_text_peer.py, in its own interpreter): breaking ties,
  prediction entropy, greedy coreset, contrastive AL, with the same vectors and the same LR; from 0
  it starts from random picks (its own `random_initialization`), having no cold-start strategy.
Also: the zero-shot accuracy of the label names and of their descriptions (0 labels), and what the
descriptions add to the proxy at 8 and 32 random labels a class.

    python -m benchmarks.suggest                       # sst2, ag_news, trec; 3 seeds
    python -m benchmarks.suggest --sets trec --seeds 1 --no-peers   # a quick look
    python -m benchmarks.suggest --round-gains         # one round of spread / top from the same labels
The MiniLM vectors are computed once per set into .cache/suggest/ (~6 CPU-minutes for the three).
Writes bench_results/suggest-<time>.json (+ .md) and docs/img/suggest.png.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.data import DATA_ROOT, REPO, read_rows
from benchmarks.harness.results import environment, write_results
from benchmarks.peers import small_text_peer

CACHE = REPO / ".cache" / "suggest"
SETS = ("sst2", "ag_news", "trec")
POOL = 3000
PER_ROUND = 8
"""Texts a class added per round."""
UP_TO = 64
"""Texts a class at the last round."""
C = 10.0
"""The logistic regression's C (the library's guess model's, guess.LR_C): C=1 (SetFit's default) on unit
vectors underfits a few dozen labels (sst2 at 8 a class: 50 % on 2 of 3 seeds; ag_news 43-57 % vs 52-67 %)."""
TARGET_K = (16, 32, 64)

DESCRIPTIONS = {
    # What a user would write into labels.json: a few words saying what each label means.
    "sst2": {"negative": "a negative movie review", "positive": "a positive movie review"},
    "ag_news": {"World": "world news about politics, governments, wars and international affairs",
                "Sports": "sports news about games, teams, players and matches",
                "Business": "business news about companies, markets, the economy and finance",
                "Sci/Tech": "science and technology news about computers, the internet, software, space and research"},
    "trec": {"ABBR": "a question asking what an abbreviation stands for",
             "ENTY": "a question asking which thing: an object, animal, color, food, product, sport or term",
             "DESC": "a question asking for a description, a definition, a reason or how something is done",
             "HUM": "a question asking who: a person, a group or an organization",
             "LOC": "a question asking where: a place, a city, a country or a location",
             "NUM": "a question asking for a number: how many, how much, when, what year, how long"},
}


# ---- data and vectors ------------------------------------------------------------------------------


def pool_and_test(name: str, pool_size: int = POOL, data_root: Path = DATA_ROOT) -> dict[str, tuple[list[str], np.ndarray]]:
    """The simulated pool (a seeded sample of `pool_size` training rows; `distinct` drops its
    exact duplicates) and the whole test split, as (texts, labels)."""
    folder = Path(data_root) / name
    train = read_rows(folder / "train.jsonl")
    keep = np.sort(np.random.default_rng(0).choice(len(train), min(pool_size, len(train)), replace=False))
    pool = [train[i] for i in keep]
    test = read_rows(folder / "test.jsonl")
    return {"pool": ([r["text"] for r in pool], np.array([int(r["label"]) for r in pool])),
            "test": ([r["text"] for r in test], np.array([int(r["label"]) for r in test]))}


class Encoder:
    """MiniLM vectors, computed once per (set, split) into CACHE; the model loaded only when needed."""

    def __init__(self) -> None:
        self.model = None
        self.unk_id = 100  # a model that knows meaning: the Suggester encodes label names with it
        self.name = "all-MiniLM-L6-v2 (cached)"
        self.known: dict[str, np.ndarray] = {}

    def load(self) -> Any:
        if self.model is None:
            from tfm_cls.suggest.vectors import MiniLMVectors

            self.model = MiniLMVectors()
        return self.model

    def cached(self, name: str, split: str, texts: list[str]) -> np.ndarray:
        path = CACHE / f"{name}-{split}-{len(texts)}.npy"
        if path.is_file():
            vectors = np.load(path)
        else:
            start = time.perf_counter()
            vectors = self.load()(texts)
            CACHE.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
            logging.info("%s %s: %d vectors in %.0f s", name, split, len(texts), time.perf_counter() - start)
        self.known.update(zip(texts, vectors))
        return vectors

    def unknown_share(self, texts: list[str]) -> np.ndarray:
        return np.zeros(len(texts), np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self.known]
        if missing:
            self.known.update(zip(missing, self.load()(missing)))
        return np.stack([self.known[t] for t in texts])


# ---- the simulation --------------------------------------------------------------------------------


def proxy_accuracy(x: np.ndarray, y: np.ndarray, rows: list[int], test_x: np.ndarray, test_y: np.ndarray,
                   classes: int, prototypes: np.ndarray | None = None) -> float:
    """Test accuracy of logistic regression on the labelled rows' vectors (the library's guess model)."""
    from tfm_cls.suggest.guess import fit_vectors

    guess = fit_vectors(x[rows], y[rows], [str(i) for i in range(classes)], prototypes, C)
    return float((guess(test_x).proba.argmax(1) == test_y).mean())


def stratified(y: np.ndarray, k: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return sorted(int(i) for c in np.unique(y) for i in rng.choice(np.flatnonzero(y == c), k, replace=False))


def rounds_of(start: int, classes: int) -> list[int]:
    """Texts added per round: from `start` a class to UP_TO a class, PER_ROUND a class each."""
    return [PER_ROUND * classes] * ((UP_TO - start) // PER_ROUND)


def run_tool(variant: str, texts: list[str], x: np.ndarray, y: np.ndarray, initial: list[int], rounds: list[int],
             names: Any, encoder: Encoder, seed: int) -> list[list[int]]:
    """The labelled rows after each round, picked by the library's Suggester. `names`: labels.json
    with descriptions. Variants: tool (the defaults: the cold start guided by the descriptions, the
    descriptions as a prior of the guess model, strategy auto), tool-spread, tool-top,
    tool-top-from-K (auto switching at K a class), and with spread: tool-bare-names (labels.json a
    plain list of the names), tool-cover (no label names at all: plain cover), tool-candidates,
    tool-entropy."""
    from tfm_cls.suggest import Settings, Suggester
    from tfm_cls.suggest.pool import Pool, text_key
    from tfm_cls.suggest.store import Labelled

    top_from = float(variant.rsplit("-", 1)[1]) if variant.startswith("tool-top-from-") else None
    strategy = "top" if variant == "tool-top" else "auto" if variant == "tool" or top_from is not None else "spread"
    settings = Settings(strategy=strategy, **({"top_from": top_from} if top_from is not None else {}),
                        candidates=5 if variant == "tool-candidates" else 0,
                        uncertainty="entropy" if variant == "tool-entropy" else "margin",
                        cold_start="cover" if variant == "tool-cover" else "guided", seed=seed)
    given = type(names)(names.names, [None] * len(names.names)) if variant in ("tool-bare-names", "tool-cover") else names
    suggester = Suggester(Pool(list(texts), list(range(len(texts)))), encoder, given, settings, vectors=x)
    if variant == "tool-cover":
        suggester.prototypes = None  # no label names at all
    labelled = list(initial)
    out = []
    for n in rounds:
        state = Labelled(given, [texts[i] for i in labelled], y[labelled], {text_key(texts[i]) for i in labelled})
        picked = [s.line for s in suggester.suggest(n, state)]
        if len(picked) < n:  # the pool ran short of new texts (never here)
            logging.warning("%s picked %d of %d", variant, len(picked), n)
        labelled += picked
        out.append(list(labelled))
    return out


def run_random(n_pool: int, initial: list[int], rounds: list[int], seed: int) -> list[list[int]]:
    rng = np.random.default_rng(1000 + seed)
    rest = [i for i in rng.permutation(n_pool) if i not in set(initial)]
    labelled, out = list(initial), []
    for n in rounds:
        labelled += [int(i) for i in rest[:n]]
        rest = rest[n:]
        out.append(list(labelled))
    return out


def simulate(name: str, seeds: list[int], variants: list[str], peers: bool, encoder: Encoder,
             earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """Accuracy after every round, per start (0, 8 a class), strategy and seed."""
    from tfm_cls.suggest.names import parse_labels
    from tfm_cls.suggest.pool import text_key

    data = pool_and_test(name)
    texts, y = data["pool"]
    test_texts, test_y = data["test"]
    x = encoder.cached(name, "pool", texts)
    first: dict[bytes, int] = {}
    for i, t in enumerate(texts):
        first.setdefault(text_key(t), i)
    distinct = sorted(first.values())  # exact duplicates out, as the tool's pool reader drops them
    texts, y, x = [texts[i] for i in distinct], y[distinct], x[distinct]
    test_x = encoder.cached(name, "test", test_texts)
    classes = int(y.max()) + 1
    names = parse_labels(DESCRIPTIONS[name], name)
    out: dict[str, Any] = {"pool": len(texts), "test": len(test_texts), "classes": classes, "curves": {}}
    for start in (0, PER_ROUND):
        rounds = rounds_of(start, classes)
        ks = [start + PER_ROUND * (r + 1) for r in range(len(rounds))]
        curves: dict[str, dict[str, list[float]]] = {}
        initial = {s: (stratified(y, start, s) if start else []) for s in seeds}
        first_random = {s: run_random(len(y), [], [PER_ROUND * classes], s)[0] for s in seeds}
        labelled_by: dict[str, dict[int, list[list[int]]]] = {}
        for variant in variants:
            labelled_by[variant] = {}
            for s in seeds:
                t0 = time.perf_counter()
                labelled_by[variant][s] = run_tool(variant, texts, x, y, initial[s], rounds, names, encoder, s)
                logging.info("%s from %d, %s seed %d: %.1f s", name, start, variant, s, time.perf_counter() - t0)
        labelled_by["random"] = {s: run_random(len(y), initial[s], rounds, s) for s in seeds}
        reused = ((earlier or {}).get("curves") or {}).get(str(start), {}).get("accuracy", {})
        if reused:  # small-text's curves from an earlier run of the same pools, seeds and rounds
            for system, by_seed in reused.items():
                if system.startswith("small-text") and all(str(s) in by_seed for s in seeds):
                    curves[system] = {str(s): by_seed[str(s)] for s in seeds}
        if peers and not reused:
            # small-text has no cold start: from 0 its first round is random (the same as random's)
            peer_initial = {s: initial[s] if start else first_random[s] for s in seeds}
            peer_rounds = rounds if start else rounds[1:]
            with tempfile.TemporaryDirectory() as tmp:
                inputs = Path(tmp) / "in.npz"
                np.savez(inputs, x=x, y=y, rounds=np.asarray(peer_rounds), seeds=np.asarray(seeds), c=C,
                         strategies=np.asarray(small_text_peer.STRATEGIES),
                         **{f"initial_{s}": np.asarray(peer_initial[s], np.int64) for s in seeds})
                t0 = time.perf_counter()
                result = small_text_peer.run_small_text(inputs, Path(tmp) / "out.json")
                logging.info("%s from %d: small-text in %.0f s", name, start, time.perf_counter() - t0)
            for strategy, by_seed in result.items():
                labelled_by[f"small-text {strategy}"] = {
                    s: ([] if start else [peer_initial[s]]) + by_seed[str(s)] for s in seeds}
        for system, by_seed in labelled_by.items():
            curves[system] = curves.get(system) or {str(s): [proxy_accuracy(x, y, rows, test_x, test_y, classes) for rows in by_seed[s]]
                              for s in seeds}
        out["curves"][str(start)] = {"labels_per_class": ks, "accuracy": curves}
    # the label names: zero-shot at 0, a prior at 8 and 32 random labels a class
    bare = parse_labels(list(DESCRIPTIONS[name]), name)
    out["zero_shot"] = {
        what: float((np.argmax(test_x @ encoder(labels.prompts()).T, 1) == test_y).mean())
        for what, labels in (("names", bare), ("descriptions", names))}
    prototypes = encoder(names.prompts())
    prior = {}
    for k in (8, 32):
        prior[str(k)] = {
            what: [proxy_accuracy(x, y, stratified(y, k, s), test_x, test_y, classes, protos) for s in seeds]
            for what, protos in (("without", None), ("with descriptions", prototypes))}
    out["names_prior"] = prior
    return out


ARMS = {"spread": {"strategy": "spread"}, "top": {"strategy": "top"},
        "top, no names prior": {"strategy": "top", "names_prior": False}}
"""--round-gains: the strategies compared one round at a time."""


def round_gains(name: str, seeds: list[int], encoder: Encoder) -> dict[str, Any]:
    """Which strategy's next round gains most, from the same labelled texts: along the `spread`
    path (from 0 and from 8 a class, rounds of +8 a class), before every round but the cold start,
    one round of each of ARMS is picked from the same labelled set and the proxy scored on it.
    The labels a class from which `top`'s round gains more than `spread`'s is where `auto` switches
    (docs/suggest.md)."""
    from tfm_cls.suggest import Settings, Suggester
    from tfm_cls.suggest.names import parse_labels
    from tfm_cls.suggest.pool import Pool, text_key
    from tfm_cls.suggest.store import Labelled

    data = pool_and_test(name)
    texts, y = data["pool"]
    test_texts, test_y = data["test"]
    x = encoder.cached(name, "pool", texts)
    first: dict[bytes, int] = {}
    for i, t in enumerate(texts):
        first.setdefault(text_key(t), i)
    distinct = sorted(first.values())
    texts, y, x = [texts[i] for i in distinct], y[distinct], x[distinct]
    test_x = encoder.cached(name, "test", test_texts)
    classes = int(y.max()) + 1
    names = parse_labels(DESCRIPTIONS[name], name)
    pool = Pool(list(texts), list(range(len(texts))))
    out: dict[str, Any] = {}
    for start in (0, PER_ROUND):
        rows: dict[str, Any] = {"labels_per_class": [], "after": {arm: {} for arm in ARMS}}
        for s in seeds:
            arms = {arm: Suggester(pool, encoder, names, Settings(**kw, seed=s), vectors=x) for arm, kw in ARMS.items()}
            labelled = stratified(y, start, s) if start else []
            for r, n in enumerate(rounds_of(start, classes)):
                k = start + PER_ROUND * r
                state = Labelled(names, [texts[i] for i in labelled], y[labelled], {text_key(texts[i]) for i in labelled})
                picked = {arm: [p.line for p in sug.suggest(n, state)] for arm, sug in arms.items()}
                if k and k not in rows["labels_per_class"]:
                    rows["labels_per_class"].append(k)
                if k:
                    for arm, got in picked.items():
                        rows["after"][arm].setdefault(str(s), []).append(
                            proxy_accuracy(x, y, labelled + got, test_x, test_y, classes))
                labelled = labelled + picked["spread"]
            logging.info("%s from %d seed %d: round gains done", name, start, s)
        out[str(start)] = rows
    return out


def gains_table(gains: dict[str, Any]) -> str:
    """Per set and start: labels a class before the round; each arm's accuracy after it minus spread's
    (mean of seeds), and the mean over the sets."""
    lines = []
    for start in ("0", str(PER_ROUND)):
        ks = next(iter(gains.values()))[start]["labels_per_class"]
        lines += [f"| from {start}: round at k a class -> k+{PER_ROUND} | " + " | ".join(map(str, ks)) + " |",
                  "|---" * (len(ks) + 1) + "|"]
        for arm in list(ARMS)[1:]:
            per_set = []
            for name, g in gains.items():
                after = g[start]["after"]
                d = 100 * (np.asarray(list(after[arm].values())) - np.asarray(list(after["spread"].values())))
                per_set.append(d.mean(0))
                lines.append(f"| {name}: {arm} - spread | " + " | ".join(f"{v:+.1f}" for v in d.mean(0)) + " |")
            lines.append(f"| **mean: {arm} - spread** | " + " | ".join(f"**{v:+.1f}**" for v in np.mean(per_set, 0)) + " |")
        lines.append("")
    return "\n".join(lines)


# ---- the final table: the recipe and SetFit trained on the picks ------------------------------------


ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def recipe_accuracy(folder: Path, run_dir: Path, minutes: float) -> dict[str, Any]:
    """`tfm-cls train --data folder` (the recipe) in a child process, one thread: its test accuracy."""
    import json
    import os
    import resource
    import subprocess
    import sys

    if (run_dir / "metrics.json").is_file() and (run_dir / "finished").is_file():  # measured before: reused
        return json.loads((run_dir / "finished").read_text())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    log = run_dir.parent / f"{run_dir.name}.log"
    with log.open("w") as sink:
        done = subprocess.run([sys.executable, "-m", "tfm_cls.cli", "train", "--data", str(folder), "--minutes",
                               f"{minutes:g}", "--overwrite", f"run_dir={run_dir}", "train.num_threads=1",
                               "train.progress=false"], stdout=sink, stderr=subprocess.STDOUT,
                              env={**os.environ, **ONE_THREAD})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"tfm-cls train failed (log: {log}): {log.read_text()[-500:]}")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    row = {"accuracy": metrics["test"]["accuracy"],
           "cpu_minutes": (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / 60}
    (run_dir / "finished").write_text(json.dumps(row))
    return row


def final_rows(name: str, seeds: list[int], systems: list[str], minutes: float, work: Path, encoder: Encoder,
               setfit_python: str, data_root: Path = DATA_ROOT) -> dict[str, Any]:
    """At 8 labelled texts a class: the recipe (and SetFit) trained on the tool's cold-start picks
    (cover, from 0 labels) and on a random stratified sample, per seed; test accuracy."""
    import json
    import shutil

    from benchmarks.peers import setfit_peer
    from tfm_cls.suggest.names import parse_labels
    from tfm_cls.suggest.pool import text_key

    data = pool_and_test(name)
    texts, y = data["pool"]
    x = encoder.cached(name, "pool", texts)
    first: dict[bytes, int] = {}
    for i, t in enumerate(texts):
        first.setdefault(text_key(t), i)
    distinct = sorted(first.values())
    texts, y, x = [texts[i] for i in distinct], y[distinct], x[distinct]
    classes = int(y.max()) + 1
    names = parse_labels(DESCRIPTIONS[name], name)
    test_texts, test_y = data["test"]
    out: dict[str, Any] = {}
    for s in seeds:
        picks = {"tool": run_tool("tool", texts, x, y, [], [PER_ROUND * classes], names, encoder, s)[0],
                 "random": stratified(y, PER_ROUND, s)}
        for pick_name, rows in picks.items():
            folder = work / f"{name}-{pick_name}-{s}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "train.jsonl").write_text("".join(json.dumps({"text": texts[i], "label": int(y[i])}) + "\n"
                                                        for i in rows))
            shutil.copyfile(Path(data_root) / name / "test.jsonl", folder / "test.jsonl")
            shutil.copyfile(Path(data_root) / name / "labels.json", folder / "labels.json")
            cell = out.setdefault(pick_name, {}).setdefault(str(s), {
                "per_class": np.bincount(y[rows], minlength=classes).tolist()})
            if "recipe" in systems:
                cell["recipe"] = recipe_accuracy(folder, work / f"run-{folder.name}", minutes)
                logging.info("%s %s seed %d: recipe %.3f", name, pick_name, s, cell["recipe"]["accuracy"])
            done = work / f"setfit-{folder.name}" / "finished.json"
            output = done.with_name("output.json")
            if "setfit" in systems and not done.is_file() and output.is_file():  # its parent was stopped
                predicted = json.loads(output.read_text())["predicted"]
                done.write_text(json.dumps({"accuracy": float((np.asarray(predicted) == test_y).mean()),
                                            "cpu_minutes": None}))
            if "setfit" in systems and done.is_file():  # measured before: reused
                cell["setfit"] = json.loads(done.read_text())
            elif "setfit" in systems:
                got = setfit_peer.run_setfit([texts[i] for i in rows], [int(y[i]) for i in rows], test_texts,
                                             work / f"setfit-{folder.name}", multi_label=False, minutes=minutes,
                                             seed=s, python=setfit_python, body=setfit_peer.body_folder())
                cell["setfit"] = {"accuracy": float((np.asarray(got["predicted"]) == test_y).mean()),
                                  "cpu_minutes": got["cpu_minutes"]}
                done.write_text(json.dumps(cell["setfit"]))
                logging.info("%s %s seed %d: setfit %.3f", name, pick_name, s, cell["setfit"]["accuracy"])
    return out


def final_table(final: dict[str, Any]) -> str:
    lines = ["| set | picks (8 a class) | recipe | SetFit | texts a class picked |", "|---|---|---|---|---|"]
    for name, by_pick in final.items():
        for pick_name, by_seed in by_pick.items():
            cells = []
            for system in ("recipe", "setfit"):
                values = [100 * v[system]["accuracy"] for v in by_seed.values() if system in v]
                cells.append(f"{np.mean(values):.1f} ({' / '.join(f'{v:.1f}' for v in values)})" if values else "–")
            counts = " ; ".join("/".join(map(str, v["per_class"])) for v in by_seed.values())
            lines.append(f"| {name} | {pick_name} | {cells[0]} | {cells[1]} | {counts} |")
    return "\n".join(lines)


# ---- the table and the figure ----------------------------------------------------------------------


def summarize(results: dict[str, Any], start: str = "8") -> tuple[str, dict[str, Any]]:
    """The Markdown table (accuracy x 100, mean over seeds ± their std, per set and labels a class)
    and the issue's targets, judged on the mean over the sets."""
    sets = list(results)
    systems = list(results[sets[0]]["curves"][start]["accuracy"])
    lines = []
    verdict: dict[str, Any] = {}
    for k in TARGET_K:
        header = f"| {k} a class, from {start} | " + " | ".join(sets) + " | mean | mean seed std |"
        lines += [header, "|---" * (len(sets) + 3) + "|"]
        table = {}
        for system in systems:
            means, stds = [], []
            for name in sets:
                curve = results[name]["curves"][start]
                j = curve["labels_per_class"].index(k)
                values = [100 * v[j] for v in curve["accuracy"][system].values()]
                means.append(float(np.mean(values)))
                stds.append(float(np.std(values)))
            table[system] = (float(np.mean(means)), float(np.mean(stds)))
            lines.append(f"| {system} | " + " | ".join(f"{m:.1f} ± {s:.1f}" for m, s in zip(means, stds))
                         + f" | **{np.mean(means):.1f}** | {np.mean(stds):.1f} |")
        lines.append("")
        peers = [v[0] for s, v in table.items() if s.startswith("small-text")]
        if "tool" not in table:  # only variants were run: no verdict
            continue
        tool, random_ = table["tool"], table["random"]
        verdict[str(k)] = {
            "tool": tool[0], "random": random_[0], "best_small_text": max(peers) if peers else None,
            "random_plus_3": tool[0] >= random_[0] + 3.0,
            "at_least_small_text": (tool[0] >= max(peers)) if peers else None,
            "spread_at_most_half_random": tool[1] <= random_[1] / 2.0,
            "tool_seed_std": tool[1], "random_seed_std": random_[1]}
    return "\n".join(lines), verdict


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(results)
    fig, axes = plt.subplots(2, len(sets), figsize=(5 * len(sets), 8), squeeze=False)
    for row, start in enumerate(("0", "8")):
        for col, name in enumerate(sets):
            ax = axes[row][col]
            curve = results[name]["curves"][start]
            ks = curve["labels_per_class"]
            for system, by_seed in curve["accuracy"].items():
                values = 100 * np.asarray(list(by_seed.values()))
                style = {"lw": 2.5, "color": "C3"} if system == "tool" else (
                    {"lw": 2, "color": "k", "ls": "--"} if system == "random" else {"lw": 1, "alpha": 0.8})
                ax.plot(ks, values.mean(0), marker="o", ms=3, label=system, **style)
            zs = results[name]["zero_shot"]["descriptions"]
            ax.axhline(100 * zs, color="C2", ls=":", lw=1, label="zero-shot (descriptions)")
            ax.set_title(f"{name}: from {start} a class")
            ax.set_xlabel("labelled texts a class")
            ax.set_ylabel("test accuracy % (frozen MiniLM + LR)")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--variants", default="tool,tool-bare-names,tool-cover,tool-top,tool-candidates",
                        help="the tool's variants (tool = the default settings)")
    parser.add_argument("--no-peers", action="store_true", help="leave small-text out")
    parser.add_argument("--small-text-python", default=str(small_text_peer.DEFAULT_PYTHON))
    parser.add_argument("--cache-only", action="store_true", help="compute the vectors and stop")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="no simulation: the table and the plot of earlier results files together (a set's "
                             "curves from the last file that has it; small-text's from any file that ran it)")
    parser.add_argument("--peers-from", default=None, metavar="JSON",
                        help="small-text's curves from an earlier bench_results/suggest-*.json of the same settings "
                             "(the peer is not run again)")
    parser.add_argument("--final", default=None, metavar="SYSTEMS",
                        help="instead of the simulation: the final table at 8 a class, these systems (recipe,setfit) "
                             "trained on the tool's and on random picks")
    parser.add_argument("--round-gains", action="store_true",
                        help="instead of the simulation: along the spread path, one round of each strategy from the "
                             "same labelled texts (where auto switches from spread to top)")
    parser.add_argument("--minutes", type=float, default=15.0, help="--final: each training's budget")
    parser.add_argument("--setfit-python", default="/tmp/setfit-venv/bin/python")
    parser.add_argument("--work", default="/tmp/suggest-final", help="--final: sample folders and runs")
    parser.add_argument("--out", default=str(REPO / "bench_results"))
    parser.add_argument("--plot", default=str(REPO / "docs" / "img" / "suggest.png"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", force=True)
    encoder = Encoder()
    sets = args.sets.split(",")
    if args.cache_only:
        for name in sets:
            for split, (texts, _) in pool_and_test(name).items():
                encoder.cached(name, split, texts)
        return
    if args.merge:
        results = merged([json.loads(Path(f).read_text())["results"] for f in args.merge])
        report(results, args, {"merged_from": args.merge})
        return
    if args.round_gains:
        started = time.process_time()
        gains = {name: round_gains(name, list(range(args.seeds)), encoder) for name in sets}
        table = gains_table(gains)
        print(table)
        path = write_results(args.out, "suggest-rounds", {
            "round_gains": gains, "settings": {"arms": ARMS, "seeds": args.seeds, "pool": POOL, "C": C},
            "cpu_seconds": time.process_time() - started, "environment": environment()}, table)
        print(f"wrote {path}")
        return
    if args.final:
        started = time.process_time()
        systems = args.final.split(",")
        final = {name: final_rows(name, list(range(args.seeds)), systems, args.minutes, Path(args.work), encoder,
                                  args.setfit_python) for name in sets}
        table = final_table(final)
        print(table)
        path = write_results(args.out, "suggest-final", {
            "final": final, "settings": {"minutes": args.minutes, "systems": systems, "seeds": args.seeds},
            "cpu_seconds_here": time.process_time() - started, "environment": environment()}, table)
        print(f"wrote {path}")
        return
    peers = not args.no_peers
    if peers:
        small_text_peer.DEFAULT_PYTHON = Path(args.small_text_python)
        reason = small_text_peer.available(args.small_text_python)
        if reason:
            logging.warning("small-text left out: %s", reason)
            peers = False
    started = time.process_time()
    earlier = json.loads(Path(args.peers_from).read_text())["results"] if args.peers_from else {}
    results = {name: simulate(name, list(range(args.seeds)), args.variants.split(","), peers, encoder,
                              earlier.get(name)) for name in sets}
    report(results, args, {"small_text_curves_from": args.peers_from, "cpu_seconds": time.process_time() - started})


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Results of several runs as one: each set from the last part that has it, with small-text's
    curves (per start) from any part that has them for that set."""
    out: dict[str, Any] = {}
    for part in parts:
        out.update(json.loads(json.dumps(part)))
    for name, result in out.items():
        for start, curve in result["curves"].items():
            for part in parts:
                theirs = part.get(name, {}).get("curves", {}).get(start, {}).get("accuracy", {})
                for system, by_seed in theirs.items():
                    if system.startswith("small-text"):
                        curve["accuracy"].setdefault(system, by_seed)
    return out


def report(results: dict[str, Any], args: argparse.Namespace, extra: dict[str, Any]) -> None:
    """Print the tables, write the JSON (+ .md) and the plot."""
    table8, verdict8 = summarize(results, "8")
    table0, verdict0 = summarize(results, "0")
    zero = "\n".join(f"| {n} | {100 * r['zero_shot']['names']:.1f} | {100 * r['zero_shot']['descriptions']:.1f} |"
                     for n, r in results.items())
    prior = "\n".join(
        f"| {n} | {k} | {100 * np.mean(v['without']):.1f} | {100 * np.mean(v['with descriptions']):.1f} |"
        for n, r in results.items() for k, v in r["names_prior"].items())
    table = (f"{table8}\n{table0}\n| zero-shot | names | descriptions |\n|---|---|---|\n{zero}\n\n"
             f"| prior | labels a class | LR | LR + descriptions |\n|---|---|---|---|\n{prior}\n")
    print(table)
    print({"from 8": verdict8, "from 0": verdict0})
    path = write_results(args.out, "suggest", {
        "results": results, "targets": {"from_8": verdict8, "from_0": verdict0},
        "settings": {"pool": POOL, "per_round": PER_ROUND, "up_to": UP_TO, "C": C, "seeds": args.seeds, **extra},
        "environment": environment()}, table)
    plot(results, Path(args.plot))
    print(f"wrote {path} and {args.plot}")


if __name__ == "__main__":
    main()
