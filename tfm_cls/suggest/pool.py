"""The pool: unlabelled texts read lazily (txt / jsonl / csv / tsv, the runtime's one line reader),
exact duplicates and empty lines dropped as they stream past, and — where the pool holds more than
`max_texts` distinct texts — a seeded uniform sample of `max_texts` of them kept (reservoir
sampling: one pass, bounded memory; the log says so). Texts already labelled are dropped too."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import random
import unicodedata
from collections.abc import Iterable

from tfm_cls.errors import InputError
from tfm_cls.runtime.readers import INPUT_FORMATS, Stats, detect_format, open_input, read_records

logger = logging.getLogger(__name__)

MAX_TEXTS = 100_000
"""Distinct pool texts kept at most (their vectors: 150 MB): beyond, a uniform sample of them."""


def text_key(text: str) -> bytes:
    """What makes two texts the same text: Unicode NFKC, case and whitespace aside (16 bytes)."""
    norm = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return hashlib.blake2b(norm.encode("utf-8"), digest_size=16).digest()


@dataclasses.dataclass
class Pool:
    texts: list[str]
    lines: list[int]
    """The input line of each text (1-based)."""
    read: int = 0
    """Lines read."""
    duplicates: int = 0
    empty: int = 0
    labelled: int = 0
    """Pool texts dropped because they are labelled already."""
    sampled: bool = False
    """True when more than max_texts distinct texts were read and a sample of them kept."""

    def summary(self) -> str:
        parts = [f"{len(self.texts)} distinct texts of {self.read} lines"]
        for count, what in ((self.duplicates, "exact duplicates"), (self.empty, "empty"),
                            (self.labelled, "labelled already")):
            if count:
                parts.append(f"{count} {what}")
        if self.sampled:
            parts.append("a uniform sample kept (--max-pool)")
        return ", ".join(parts)


def collect(records: Iterable[tuple[int, str]], labelled: set[bytes] = frozenset(), max_texts: int = MAX_TEXTS,
            seed: int = 0, where: str = "the pool") -> Pool:
    """(line, text) pairs -> a Pool (see the module's docstring); an empty pool, or one whose texts
    are all labelled or duplicates, is an InputError saying which."""
    rng = random.Random(seed)
    pool = Pool([], [])
    seen: set[bytes] = set()
    distinct = 0
    for line, text in records:
        pool.read += 1
        if not text.strip():
            pool.empty += 1
            continue
        key = text_key(text)
        if key in labelled:
            pool.labelled += 1
            continue
        if key in seen:
            pool.duplicates += 1
            continue
        seen.add(key)
        distinct += 1
        if len(pool.texts) < max_texts:
            pool.texts.append(text)
            pool.lines.append(line)
        else:  # reservoir: every distinct text kept with probability max_texts / distinct
            pool.sampled = True
            j = rng.randrange(distinct)
            if j < max_texts:
                pool.texts[j], pool.lines[j] = text, line
    if not pool.texts:
        if pool.read == 0 or pool.empty == pool.read:
            raise InputError(f"{where}: no texts (the pool is empty); give a file of unlabelled texts, one a line")
        raise InputError(f"{where}: no text left to suggest: {pool.summary()}")
    if pool.sampled:
        logger.warning("%s: %d distinct texts, more than --max-pool %d; suggesting from a uniform sample of %d",
                       where, distinct, max_texts, max_texts)
    return pool


def read_pool(path: str, text_field: str = "text", fmt: str | None = None, labelled: set[bytes] = frozenset(),
              max_texts: int = MAX_TEXTS, seed: int = 0, invalid_utf8: str = "error") -> Pool:
    """The pool file (txt: one text a line; jsonl / csv / tsv: `text_field`), streamed through the
    runtime's line reader: invalid UTF-8 is an InferenceError naming the line and byte offset, as
    training and `tfm-cls infer` say it, unless `invalid_utf8="replace"` (U+FFFD, counted and logged)."""
    fmt = detect_format(path, fmt, INPUT_FORMATS, "txt")
    stats = Stats()
    stream = open_input(path)
    try:
        records = read_records(stream, path, fmt, text_field, invalid_utf8, stats)
        pool = collect(((r.line, r.text) for r in records), labelled, max_texts, seed, path)
        if stats.invalid_utf8:
            logger.warning("%s: replaced invalid UTF-8 on %d lines with U+FFFD (--invalid-utf8 replace)", path,
                           stats.invalid_utf8)
        return pool
    finally:
        if path != "-":
            stream.close()
