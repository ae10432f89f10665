"""Suggest: a pool, what is labelled, and the current model -> the n texts most worth labelling.

    pool texts --vectors--> unit vectors [N, D] (texts the encoder cannot read set aside)
    labelled texts (never suggested, nor anything within NEAR_DUPLICATE of them)
    current model: a run, else logistic regression on the labelled vectors, else zero-shot names
    no labels and no run -> pick.cover (cluster representatives), each with the zero-shot guess
    otherwise, `auto`    -> below AUTO_TOP_FROM labelled texts a class pick.spread_uncertain (the most
                            uncertain text of each of n clusters), from it pick.top_uncertain

`Suggester` keeps the pool's vectors, so the label page suggests again after each round without
reading the pool twice."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from tfm_cls.errors import InputError
from tfm_cls.suggest import pick
from tfm_cls.suggest.guess import Guesses, fit_vectors, zero_shot
from tfm_cls.suggest.names import LabelNames
from tfm_cls.suggest.pool import Pool, text_key
from tfm_cls.suggest.store import Labelled

logger = logging.getLogger(__name__)

UNREADABLE = 0.5
"""A text whose tokens are more than this share [UNK] is in a script the encoder cannot read."""
CHUNK = 2048
"""Texts vectorised at a time (bounded token memory)."""
AUTO_TOP_FROM = 16
"""`auto`: `spread` while fewer labelled texts a class than this, `top` from it. Measured one round at a
time from the same labelled texts (benchmarks.suggest --round-gains; sst2, ag_news, trec, 3 seeds,
from 0 and from 8 a class): at 8 a class a spread round beat a top round on every set and start
(-0.4 to -4.1 points, mean -2.2 / -2.6); from 16 on the two were within noise (mean -0.6 to +1.0,
either sign), and top needs no k-means of the pool. docs/suggest.md."""
STRATEGIES = ("auto", "spread", "top")


@dataclasses.dataclass
class Suggestion:
    text: str
    line: int
    """The pool's input line."""
    reason: str
    guess: dict[str, Any] | None
    """The current model's guess (label and score), None with no model at all."""
    uncertainty: float | None = None

    def row(self, rank: int) -> dict[str, Any]:
        row = {"rank": rank, "line": self.line, "text": self.text, "guess": self.guess, "reason": self.reason}
        if self.uncertainty is not None:
            row["uncertainty"] = round(self.uncertainty, 4)
        return row


@dataclasses.dataclass(kw_only=True)
class Settings:
    strategy: str = "auto"
    """With labels or a run: `spread` (pick.spread_uncertain over the pool), `top` (pick.top_uncertain),
    or `auto` (`spread` below `top_from` labelled texts a class, `top` from it: choose_strategy)."""
    top_from: float = AUTO_TOP_FROM
    """`auto`: the labelled texts a class from which it picks `top` (benchmarks.suggest measures others)."""
    uncertainty: str = "margin"
    """`margin` or `entropy` (pick.uncertainty)."""
    names_prior: bool = True
    """Label descriptions (labels.json) join the labelled examples of the logistic regression."""
    candidates: int = 0
    """`spread` clusters the whole pool (0), or only the candidates x n most uncertain texts."""
    cold_start: str = "guided"
    """No labels: `guided` (cover within each label the names guess, where labels.json names them)
    or `cover` (cover the pool as one)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy: expected auto, spread or top, got {self.strategy!r}")
        if self.cold_start not in ("guided", "cover"):
            raise ValueError(f"cold_start: expected guided or cover, got {self.cold_start!r}")
        if self.uncertainty not in ("margin", "entropy"):
            raise ValueError(f"uncertainty: expected margin or entropy, got {self.uncertainty!r}")


class Suggester:
    """The pool's vectors, computed once; `suggest(n, labelled, run_guess)` as often as wanted."""

    def __init__(self, pool: Pool, vectorizer: Any, names: LabelNames | None = None,
                 settings: Settings | None = None, vectors: np.ndarray | None = None) -> None:
        self.settings = settings or Settings()
        self.vectorizer = vectorizer
        self.names = names
        self.texts, self.lines = pool.texts, pool.lines
        if vectors is None:
            readable = np.asarray(vectorizer.unknown_share(self.texts)) <= UNREADABLE
            if not readable.any():
                raise InputError(
                    f"the encoder ({vectorizer.name}) reads none of the {len(self.texts)} pool texts: more than "
                    f"{UNREADABLE:.0%} of each one's tokens are unknown to it (a script its vocabulary lacks, e.g. "
                    f"{self.texts[0][:40]!r}); suggest for such texts needs an encoder that reads their script")
            if not readable.all():
                logger.warning("%d of %d pool texts set aside: the encoder reads more than %.0f%% of their tokens "
                               "as unknown (another script)", int((~readable).sum()), len(readable), UNREADABLE * 100)
                keep = np.flatnonzero(readable)
                self.texts = [self.texts[i] for i in keep]
                self.lines = [self.lines[i] for i in keep]
            vectors = self.encode(self.texts, "pool vectors")
        self.vectors = vectors
        self.prototypes = None
        if names is not None and getattr(vectorizer, "unk_id", None) is not None:  # a model that knows meaning
            self.prototypes = self.encode(names.prompts())
        self._labelled_cache: dict[bytes, np.ndarray] = {}

    def encode(self, texts: list[str], what: str | None = None) -> np.ndarray:
        """Unit vectors of `texts`, CHUNK texts at a time; with `what`, the progress shown as it goes
        (progress.Progress: a bar on a terminal, else a log line at most every 20 s with the time left)."""
        from tfm_cls.suggest.progress import Progress
        from tfm_cls.suggest.vectors import dense

        bar = Progress(len(texts), what) if what else None
        reports = bar is not None and getattr(self.vectorizer, "accepts_progress", False)
        parts = []
        for s in range(0, len(texts), CHUNK):
            chunk = texts[s : s + CHUNK]
            if reports:
                parts.append(dense(self.vectorizer(chunk, progress=lambda share, s=s, n=len(chunk): bar.advance_to(s + share * n))))
            else:
                parts.append(dense(self.vectorizer(chunk)))
                if bar is not None:
                    bar.advance_to(s + len(chunk))
        if bar is not None:
            bar.close()
        return np.concatenate(parts) if parts else np.zeros((0, 1), np.float32)

    def labelled_vectors(self, texts: list[str]) -> np.ndarray:
        """Vectors of labelled texts (pool texts reuse theirs; the rest computed once)."""
        index = {text_key(t): i for i, t in enumerate(self.texts)}
        missing = [t for t in texts if text_key(t) not in self._labelled_cache and text_key(t) not in index]
        if missing:
            for t, v in zip(missing, self.encode(missing)):
                self._labelled_cache[text_key(t)] = v
        return np.stack([self.vectors[index[k]] if k in index else self._labelled_cache[k]
                         for k in map(text_key, texts)]) if texts else np.zeros((0, self.vectors.shape[1]), np.float32)

    def model(self, labelled: Labelled | None) -> Callable[[np.ndarray], Guesses] | None:
        """vectors -> Guesses: logistic regression on the labelled vectors, else zero-shot, else None."""
        if labelled is not None and len(labelled.texts):
            use_names = self.settings.names_prior and self.prototypes is not None and labelled.names.described
            return fit_vectors(self.labelled_vectors(labelled.texts), labelled.targets, labelled.names.names,
                               self.prototypes if use_names else None)
        if self.prototypes is not None and self.names is not None:
            names = self.names.names
            return lambda v: zero_shot(v, self.prototypes, names)
        return None

    def suggest(self, n: int, labelled: Labelled | None = None,
                run_guess: Callable[[list[str]], Guesses] | None = None) -> list[Suggestion]:
        """The n texts most worth labelling now (fewer when the pool holds fewer new ones)."""
        if n < 1:
            raise InputError(f"-n {n}: expected at least 1 text to suggest")
        s = self.settings
        rows = np.arange(len(self.texts))
        taken = None
        if labelled is not None and labelled.keys:
            rows = np.asarray([i for i in rows if text_key(self.texts[i]) not in labelled.keys], np.int64)
            taken = self.labelled_vectors(labelled.texts) if labelled.texts else None
        seen = pick.NearDuplicates(taken)
        if len(rows) and taken is not None:
            near = seen.near_mask(self.vectors[rows])
            if near.all():
                raise InputError(f"every text of the pool ({len(rows)}) is labelled already or a near-duplicate of a "
                                 "labelled text; add new texts to the pool")
            rows = rows[~near]
        if not len(rows):
            raise InputError("every text of the pool is labelled already; add new texts to the pool")
        vectors = self.vectors[rows]
        if run_guess is not None:
            guesses = run_guess([self.texts[i] for i in rows])
        else:
            model = self.model(labelled)
            guesses = model(vectors) if model is not None else None
        has_labels = run_guess is not None or (labelled is not None and len(labelled.texts) > 0)
        if not has_labels and guesses is not None and s.cold_start == "guided":
            picks = pick.cover_by_guess(vectors, guesses.proba.argmax(axis=1), n, seen, s.seed)
        elif not has_labels:
            picks = pick.cover(vectors, n, seen, s.seed)
        else:
            unsure = pick.uncertainty(guesses.proba, guesses.thresholds, s.uncertainty)
            strategy = s.strategy
            if strategy == "auto":
                count: int | None = len(labelled.texts) if labelled is not None else 0
                trained = getattr(run_guess, "train_examples", None) if run_guess is not None else None
                if run_guess is not None and trained is None and not count:
                    count = None  # a run that does not say what it was trained on
                elif trained is not None:
                    count = max(count or 0, int(trained))
                strategy = choose_strategy(count, len(guesses.labels), s.top_from)
                if strategy == "top" and np.ptp(unsure.score) == 0:
                    strategy = "spread"  # every text equally uncertain (one class labelled): nothing to rank
                logger.info("strategy auto: %s (%s labelled texts, %d labels)", strategy, count, len(guesses.labels))
            if strategy == "top":
                picks = pick.top_uncertain(vectors, unsure, n, seen)
            else:
                picks = pick.spread_uncertain(vectors, unsure, n, seen, s.seed, s.candidates * n or None)
                if len(picks) < n:  # clusters left empty by near-duplicates: the next most uncertain
                    picks += pick.top_uncertain(vectors, unsure, n - len(picks), seen)
            if unsure.label is not None:
                for p in picks:
                    p.reason += f" (label {guesses.labels[int(unsure.label[p.index])]!r} nearest its threshold)"
        out = []
        for p in picks[:n]:
            i = int(rows[p.index])
            guess = guesses.row(p.index) if guesses is not None else None
            if guess is not None and not has_labels:
                guess["from"] = "label names (zero-shot)"
            out.append(Suggestion(self.texts[i], self.lines[i], p.reason, guess, p.uncertainty))
        if len(out) < n:
            logger.warning("%d suggestions, not %d: the rest of the pool's %d new texts are near-copies of labelled or "
                           "picked ones", len(out), n, len(rows))
        return out


def choose_strategy(labelled: int | None, classes: int, top_from: float = AUTO_TOP_FROM) -> str:
    """`auto`'s choice: `spread` while the labelled texts number fewer than `top_from` a class
    (labelled / classes), `top` from there on; `spread` where the count is unknown (None)."""
    if labelled is None:
        return "spread"
    return "top" if labelled >= top_from * max(classes, 1) else "spread"


def check_labels(run_labels: list[str], folder_labels: list[str], run_dir: str, folder: str) -> None:
    """A run and a data folder must name the same labels in the same order."""
    if list(run_labels) != list(folder_labels):
        raise InputError(f"the run {run_dir} has the labels {run_labels} but {folder} has {folder_labels}; "
                         "retrain the run on this folder (tfm-cls train --data) or give the folder it was trained on")


def check_output(output: str, pool: str | None = None, data: str | None = None, run: str | None = None) -> None:
    """Refuse (InputError, before anything is read or written) an output file that is the pool, a file
    the labelled folder holds or training reads there, anything inside the run, a folder, or a file
    whose folder is a file: writing it would lose what the user has."""
    from pathlib import Path

    from tfm_cls.io import output_clash
    from tfm_cls.suggest.store import folder_files

    inputs: dict[str, tuple[str, frozenset[str] | None]] = {}
    if pool and pool != "-":
        inputs["the pool (--pool)"] = (pool, None)
    if data:
        inputs["the labelled folder (--data)"] = (data, folder_files(data))
    if run:
        inputs["the run (--run)"] = (run, None)
    clash = output_clash(output, inputs)
    if clash:
        raise InputError(f"-o {output}: {clash}; writing the suggestions there would overwrite it, so nothing was "
                         "read or written: give another output file")
    target = Path(output)
    if target.is_dir():
        raise InputError(f"-o {output} is a folder; give a file name (e.g. {target / 'to_label.jsonl'})")
    if target.parent.exists() and not target.parent.is_dir():
        raise InputError(f"-o {output}: {target.parent} is a file, not a folder")


def write_suggestions(path: str, suggestions: list[Suggestion]) -> None:
    """One JSON row a suggestion, best first, written atomically (io.atomic_path)."""
    from tfm_cls.io import atomic_path
    from tfm_cls.runtime.jsonl import dumps

    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for rank, s in enumerate(suggestions, 1):
            f.write(dumps(s.row(rank)) + "\n")


def prepare(pool_path: str, *, run: str | None = None, data: str | None = None, text_field: str = "text",
            max_pool: int | None = None, settings: Settings | None = None, vectorizer: Any = None,
            invalid_utf8: str = "error") -> tuple[Suggester, Labelled | None, Callable[[list[str]], Guesses] | None]:
    """Everything `suggest` needs from the command line's arguments: the pool read (labelled texts
    left out; invalid UTF-8 an error naming the line unless `invalid_utf8="replace"`, as training
    and infer treat it), its vectors, the folder's labels and the run's model, checked against each
    other."""
    from tfm_cls.suggest.pool import MAX_TEXTS, read_pool
    from tfm_cls.suggest.store import read_folder
    from tfm_cls.suggest.vectors import default_vectorizer

    labelled = read_folder(data, text_field) if data is not None else None
    run_guess = None
    names = labelled.names if labelled is not None else None
    if run is not None:
        from tfm_cls.suggest.guess import from_run

        run_guess, run_labels = from_run(run)
        if labelled is not None:
            check_labels(run_labels, labelled.names.names, run, data)
        else:
            names = LabelNames(run_labels, [None] * len(run_labels))
    pool = read_pool(pool_path, text_field, labelled=labelled.keys if labelled is not None else frozenset(),
                     max_texts=max_pool or MAX_TEXTS, seed=(settings or Settings()).seed, invalid_utf8=invalid_utf8)
    logger.info("pool %s: %s", pool_path, pool.summary())
    suggester = Suggester(pool, vectorizer or default_vectorizer(), names, settings)
    return suggester, labelled, run_guess


def suggest_texts(texts: list[str], n: int, *, run: Any = None, exclude: list[str] | tuple[str, ...] = (),
                  settings: Settings | None = None, vectorizer: Any = None) -> list[dict[str, Any]]:
    """The Python side (TextClassifier.suggest): texts in memory -> the output rows of the n best
    to label, guessed by `run` (a run directory or a loaded run; None: cover the pool); texts in
    `exclude` (labelled already) and near-copies of them are never suggested."""
    from tfm_cls.suggest.guess import from_run
    from tfm_cls.suggest.pool import collect
    from tfm_cls.suggest.vectors import default_vectorizer

    run_guess, names = None, None
    if run is not None:
        run_guess, labels = from_run(run)
        names = LabelNames(labels, [None] * len(labels))
    keys = {text_key(t) for t in exclude}
    pool = collect(enumerate(texts, 1), labelled=keys, seed=(settings or Settings()).seed, where="pool")
    suggester = Suggester(pool, vectorizer or default_vectorizer(), names, settings)
    labelled = None
    if exclude:
        labels = names or LabelNames(["?"], [None])
        labelled = Labelled(labels, list(exclude), np.zeros(len(exclude), np.int64), keys)
    return [s.row(i) for i, s in enumerate(suggester.suggest(n, labelled, run_guess), 1)]
