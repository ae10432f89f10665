"""The unlabelled corpus of MLM pretraining, and the guard that keeps evaluation text out of it.

Sources: the texts of the labelled dataset's training split (the default), plus extra text from
local files (`.txt`: one text per line; `.jsonl`: one object per line with a text field) or a
Hugging Face dataset split. Extra text may only be used if none of the evaluated dataset's test
(or validation) texts is among it, whole or in pieces: `find_overlap` flags extra texts that equal
an evaluation text, share a run of words with one, or are a piece of one (a sub-phrase of a test
sentence, as SST-2's phrases are of Rotten Tomatoes sentences), and `assemble_corpus` drops (or
refuses) them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfm_cls.data.sources import load_data
from tfm_cls.errors import (
    ConfigError,
    CorpusError,
    InferenceError,  # the one line reader
)
from tfm_cls.pretrain.config import ExtraTextConfig, PretrainConfig
from tfm_cls.runtime.readers import Stats, decoded_lines, json_lines

logger = logging.getLogger(__name__)


def normalize_text(text: str) -> str:
    """Unicode NFKC, case-folded, letters and digits only (any script).

    Dropping spaces and punctuation makes tokenisation variants of one sentence match: SST-2's
    `it 's a film` and Rotten Tomatoes' `it's a film` normalise to the same string.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if ch.isalnum())


def text_hash(text: str) -> bytes | None:
    """8-byte BLAKE2b of the normalised text; None for a text with no letters or digits."""
    norm = normalize_text(text)
    if not norm:
        return None
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=8).digest()


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W_])+")
"""A CJK character on its own (those scripts write no spaces), else a run of letters and digits."""
_SPLIT_CONTRACTION = re.compile(r"\s+(?=n't\b|'(?:s|re|ve|ll|d|m)\b)")
"""Penn-Treebank tokenisation (SST-2: `does n't`, `it 's`) re-joined before apostrophes go."""
_PTB_BRACKET = re.compile(r"-[lr][rcs]b-")


def overlap_tokens(text: str) -> list[str]:
    """Words for overlap detection: NFKC, case-folded, contractions joined, punctuation dropped.

    `does n't` and `doesn't` both give `doesnt`; `smog-fighting` gives `smog`, `fighting`; each
    CJK character is a token.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = _PTB_BRACKET.sub(" ", _SPLIT_CONTRACTION.sub("", folded))
    return _TOKEN.findall(folded.replace("'", "").replace("\u2019", ""))


def _windows(tokens: Sequence[str], n: int) -> set[int]:
    """Hashes of every run of n consecutive tokens."""
    return {hash(tuple(tokens[i : i + n])) for i in range(len(tokens) - n + 1)}


class OverlapIndex:
    """Evaluation (reference) texts indexed once, to test any number of texts against them.

    A text holds a reference text if (1) its normalised form equals the reference's
    (`normalize_text`: any length), (2) it shares a run of `ngram` words with it, or (3) one of
    the two is shorter than `ngram` words but at least `min_piece`, and wholly a run of words of
    the other: a 5-word sub-phrase of a test sentence, or a short test text inside a longer one.
    Shorter common pieces (`the film`, `is n't funny`) are left: they carry no sentence of their own.
    """

    def __init__(self, reference: Iterable[str], *, ngram: int = 8, min_piece: int = 4) -> None:
        if not 1 <= min_piece <= ngram:
            raise ValueError(f"expected 1 <= min_piece <= ngram, got min_piece={min_piece}, ngram={ngram}")
        self.ngram, self.min_piece = ngram, min_piece
        self.exact: set[bytes] = set()
        self.shared_runs: set[int] = set()  # every ngram-word run of a reference text
        self.pieces: dict[int, set[int]] = {n: set() for n in range(min_piece, ngram)}  # shorter runs, by length
        self.short_refs: dict[int, set[int]] = {}  # whole reference texts of min_piece..ngram-1 words, by length
        for ref in reference:
            if (h := text_hash(ref)) is not None:
                self.exact.add(h)
            words = overlap_tokens(ref)
            self.shared_runs |= _windows(words, ngram)
            for n, runs in self.pieces.items():
                runs |= _windows(words, n)
            if min_piece <= len(words) < ngram:
                self.short_refs.setdefault(len(words), set()).add(hash(tuple(words)))

    def holds(self, text: str) -> bool:
        """Whether `text` holds some reference text, whole or in part (rules in the class docstring)."""
        words = overlap_tokens(text)
        return (
            ((h := text_hash(text)) is not None and h in self.exact)
            or not _windows(words, self.ngram).isdisjoint(self.shared_runs)
            or (self.min_piece <= len(words) < self.ngram and hash(tuple(words)) in self.pieces[len(words)])
            or any(not _windows(words, n).isdisjoint(refs) for n, refs in self.short_refs.items() if n <= len(words))
        )

    def find(self, texts: Sequence[str]) -> list[int]:
        """Indices of `texts` that hold some reference text."""
        return [i for i, text in enumerate(texts) if self.holds(text)]


def find_overlap(
    texts: Sequence[str], reference: Iterable[str], *, ngram: int = 8, min_piece: int = 4
) -> list[int]:
    """Indices of `texts` that hold some `reference` text, whole or in part (`OverlapIndex`)."""
    return OverlapIndex(reference, ngram=ngram, min_piece=min_piece).find(texts)


def read_text_file(path: str | Path, text_field: str = "text") -> list[str]:
    """Texts of a `.txt` (one per non-empty line) or `.jsonl` file (field `text_field` of each line)."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"extra text file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix not in (".txt", ".jsonl", ".json"):
        raise CorpusError(f"extra text file {path}: expected a .txt or .jsonl file, got {suffix or 'no suffix'!r}")
    with open(path, "rb") as f:
        try:
            lines = list(decoded_lines(f, str(path), "error", Stats()))  # "\n" only; invalid UTF-8 named
        except InferenceError as err:
            raise CorpusError(str(err)) from None
    if suffix == ".txt":
        return [line.strip() for _, line in lines if line.strip()]
    texts: list[str] = []
    try:
        objects = list(json_lines(lines, str(path)))
    except InferenceError as err:
        raise CorpusError(str(err)) from None
    for lineno, obj in objects:
        if not isinstance(obj, dict) or text_field not in obj:
            keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
            raise CorpusError(f"{path}:{lineno}: expected an object with field {text_field!r}, got {keys}")
        value = obj[text_field]
        if not isinstance(value, str):
            raise CorpusError(f"{path}:{lineno}: field {text_field!r} is {type(value).__name__}, expected a string")
        if value.strip():
            texts.append(value)
    return texts


def read_hub_texts(name: str, config_name: str | None, split: str, text_column: str) -> list[str]:
    """Texts of one split of a Hugging Face dataset (`datasets.load_dataset`, cache or hub)."""
    import datasets

    try:
        ds = datasets.load_dataset(name, config_name, split=split)
    except Exception as err:  # offline, unknown id, unknown split: datasets raises many types
        raise CorpusError(f"extra text: cannot load Hugging Face dataset {name!r} split {split!r}: {err}") from err
    if text_column not in ds.column_names:
        raise CorpusError(
            f"extra text: dataset {name!r} has no column {text_column!r}; columns: {ds.column_names}"
        )
    return [t for t in ds[text_column] if isinstance(t, str) and t.strip()]


def assemble_corpus(
    train_texts: Sequence[str],
    extra_texts: Sequence[str],
    evaluation_texts: Sequence[str],
    on_overlap: str = "drop",
    *,
    ngram: int = 8,
    min_piece: int = 4,
) -> tuple[list[str], dict[str, int]]:
    """Training-split texts plus those extra texts that hold no evaluation text (`OverlapIndex`).

    on_overlap: `drop` removes the overlapping extra texts (logged), `error` raises CorpusError.
    Returns the corpus and counts for the run's report.
    """
    if on_overlap not in ("drop", "error"):
        raise ValueError(f"on_overlap must be 'drop' or 'error', got {on_overlap!r}")
    evaluation = OverlapIndex(evaluation_texts, ngram=ngram, min_piece=min_piece)  # built once, used twice
    report = {"train_texts": len(train_texts), "extra_texts": len(extra_texts), "extra_dropped_overlap": 0}
    # Informational only: the labelled train split is used by supervised training anyway, but
    # text shared between a dataset's own splits is worth knowing about.
    report["train_matching_evaluation"] = len(evaluation.find(train_texts))
    if extra_texts:
        overlap = evaluation.find(extra_texts)
        report["extra_dropped_overlap"] = len(overlap)
        if overlap:
            examples = "; ".join(repr(extra_texts[i][:60]) for i in overlap[:3])
            what = (
                f"hold evaluation (test/validation) text: equal to one, sharing a run of {ngram} words, "
                f"or a piece of at least {min_piece} words"
            )
            if on_overlap == "error":
                raise CorpusError(
                    f"{len(overlap)} extra text(s) {what}, e.g. {examples}; "
                    "remove them or set extra_text.on_overlap=drop"
                )
            logger.warning("dropped %d extra text(s) that %s, e.g. %s", len(overlap), what, examples)
            dropped = set(overlap)
            extra_texts = [t for i, t in enumerate(extra_texts) if i not in dropped]
    corpus = list(train_texts) + list(extra_texts)
    report["corpus_texts"] = len(corpus)
    return corpus, report


# ---- the corpus of a pretraining run ------------------------------------------------------------


@dataclasses.dataclass
class Corpus:
    texts: list[str]
    """Pretraining texts (train split + admitted extra text)."""
    eval_texts: list[str]
    """Validation texts: MLM loss is measured on them (never trained on)."""
    report: dict[str, Any]


def load_extra_texts(cfg: ExtraTextConfig, seed: int) -> list[str]:
    texts: list[str] = []
    for path in cfg.paths:
        loaded = read_text_file(path, cfg.text_field)
        logger.info("extra text %s: %d texts", path, len(loaded))
        texts.extend(loaded)
    if cfg.hf_dataset:
        loaded = read_hub_texts(cfg.hf_dataset, cfg.hf_config, cfg.hf_split, cfg.hf_text_column)
        logger.info("extra text %s[%s]: %d texts", cfg.hf_dataset, cfg.hf_split, len(loaded))
        texts.extend(loaded)
    if cfg.max_texts is not None and len(texts) > cfg.max_texts:
        keep = np.random.default_rng(seed).choice(len(texts), cfg.max_texts, replace=False)
        texts = [texts[i] for i in sorted(keep)]
    return texts


def build_corpus(cfg: PretrainConfig) -> Corpus:
    """The training split's texts plus extra text that holds no test or validation text."""
    data = load_data(cfg.data)
    train_texts = list(data.splits["train"]["text"]) if cfg.use_train_split else []
    eval_texts = list(data.splits["validation"]["text"])
    held_out = list(data.splits["test"]["text"]) + eval_texts
    extra = load_extra_texts(cfg.extra_text, cfg.seed)
    texts, report = assemble_corpus(
        train_texts, extra, held_out, cfg.extra_text.on_overlap,
        ngram=cfg.extra_text.overlap_ngram, min_piece=cfg.extra_text.overlap_min_piece,
    )
    report["source"] = data.source
    report["validation_texts"] = len(eval_texts)
    if not texts:
        raise ConfigError("the pretraining corpus is empty (no training texts and no extra text)")
    logger.info("corpus: %s", report)
    return Corpus(texts=texts, eval_texts=eval_texts, report=report)
