"""The unlabelled corpus of MLM pretraining, and the guard that keeps evaluation text out of it.

Sources: the texts of the labelled dataset's training split (the default), plus extra text from
local files (`.txt`: one text per line; `.jsonl`: one object per line with a text field) or a
Hugging Face dataset split. Extra text may only be used if none of the evaluated dataset's test
(or validation) texts is among it: `find_overlap` compares normalised-text hashes, and
`assemble_corpus` drops (or refuses) the extra texts that match.
"""

from __future__ import annotations

import hashlib
import json
import logging
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)


class CorpusError(ValueError):
    """An extra-text source is missing, malformed, or overlaps the evaluation texts."""


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


def find_overlap(texts: Sequence[str], reference: Iterable[str]) -> list[int]:
    """Indices of `texts` whose normalised form equals that of some `reference` text."""
    ref = {h for h in map(text_hash, reference) if h is not None}
    return [i for i, t in enumerate(texts) if (h := text_hash(t)) is not None and h in ref]


def read_text_file(path: str | Path, text_field: str = "text") -> list[str]:
    """Texts of a `.txt` (one per non-empty line) or `.jsonl` file (field `text_field` of each line)."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"extra text file {path} does not exist")
    suffix = path.suffix.lower()
    texts: list[str] = []
    with open(path, encoding="utf-8") as f:
        if suffix == ".txt":
            return [line.strip() for line in f if line.strip()]
        if suffix not in (".jsonl", ".json"):
            raise CorpusError(f"extra text file {path}: expected a .txt or .jsonl file, got {suffix or 'no suffix'!r}")
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise CorpusError(f"{path}:{lineno}: not a JSON object ({err.msg})") from err
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
) -> tuple[list[str], dict[str, int]]:
    """Training-split texts plus those extra texts that share no normalised text with evaluation.

    on_overlap: `drop` removes the overlapping extra texts (logged), `error` raises CorpusError.
    Returns the corpus and counts for the run's report.
    """
    if on_overlap not in ("drop", "error"):
        raise ValueError(f"on_overlap must be 'drop' or 'error', got {on_overlap!r}")
    report = {"train_texts": len(train_texts), "extra_texts": len(extra_texts), "extra_dropped_overlap": 0}
    # Informational only: the labelled train split is used by supervised training anyway, but
    # duplicates between a dataset's own splits are worth knowing about.
    report["train_matching_evaluation"] = len(find_overlap(train_texts, evaluation_texts))
    if extra_texts:
        overlap = find_overlap(extra_texts, evaluation_texts)
        report["extra_dropped_overlap"] = len(overlap)
        if overlap:
            examples = "; ".join(repr(extra_texts[i][:60]) for i in overlap[:3])
            if on_overlap == "error":
                raise CorpusError(
                    f"{len(overlap)} extra text(s) match evaluation (test/validation) texts after "
                    f"normalisation, e.g. {examples}; remove them or set extra_text.on_overlap=drop"
                )
            logger.warning(
                "dropped %d extra text(s) that match evaluation texts after normalisation, e.g. %s",
                len(overlap),
                examples,
            )
            dropped = set(overlap)
            extra_texts = [t for i, t in enumerate(extra_texts) if i not in dropped]
    corpus = list(train_texts) + list(extra_texts)
    report["corpus_texts"] = len(corpus)
    return corpus, report
