"""Input texts for inference: txt / jsonl / csv / tsv / stdin read lazily, one Record a line or row.

The one line reader of tfm_cls (`decoded_lines`: predict, eval, quantize and pretraining text
files use it too; JSON Lines files go through it in runtime/jsonl.py): lines end at "\n" only, invalid UTF-8 is an error naming the line and byte
offset unless replaced, and every line gives a record (an empty one included), so outputs align
with inputs by position."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.jsonl import json_lines  # noqa: F401 (the one JSON Lines parser; pretrain and quantize import it from here)

INPUT_FORMATS = ("txt", "jsonl", "csv", "tsv")
EXTENSIONS = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}


@dataclass
class Record:
    """One input line (txt, jsonl) or row (csv). `id` is the user's id, or the line/row number;
    `line` the line number in the input (for csv the row's last line)."""

    id: str
    text: str
    line: int
    pair: str | None = None
    """Sentence pairs: the second text."""

    @property
    def empty(self) -> bool:
        """Nothing to classify (empty or whitespace only): the row says so instead of guessing."""
        return not self.text.strip()


@dataclass
class Stats:
    """Counts reported at the end of a run."""

    texts: int = 0
    empty: int = 0
    truncated: int = 0
    invalid_utf8: int = 0
    windows: int = 0
    empty_lines: list[int] = field(default_factory=list)  # the first few, for the report


def detect_format(path: str, given: str | None, allowed: tuple[str, ...], default: str) -> str:
    if given:
        return given
    if path == "-":
        return default
    ext = os.path.splitext(path)[1].lower()
    fmt = EXTENSIONS.get(ext)
    if fmt not in allowed:
        raise InferenceError(f"cannot tell the format of {path} from its extension {ext!r}; pass a format flag")
    return fmt


def decoded_lines(stream, name: str, invalid_utf8: str, stats: Stats) -> Iterator[tuple[int, str]]:
    """(line number, text) for each line of a binary stream: lines end at b"\n" only (a "\r"
    before it is dropped; U+2028, U+0085 and form feeds are part of the text), the last line
    needs no newline, a UTF-8 byte-order mark at the start is dropped. Invalid UTF-8 is an
    InferenceError naming the line and byte offset, or with invalid_utf8="replace" U+FFFD,
    counted in `stats.invalid_utf8`. The one line reader of tfm_cls (predict, eval, quantize,
    pretraining text files use it too)."""
    offset = 0
    for lineno, raw in enumerate(stream, start=1):
        size = len(raw)
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            if invalid_utf8 != "replace":
                raise InferenceError(
                    f"{name}, line {lineno}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at byte offset "
                    f"{offset + err.start} of the file, column {err.start + 1} of the line); "
                    "fix the file or pass --invalid-utf8 replace to substitute U+FFFD"
                ) from None
            stats.invalid_utf8 += 1
            line = raw.decode("utf-8", errors="replace")
        if lineno == 1:
            line = line.removeprefix("\ufeff")  # a byte-order mark is not part of the text
        offset += size
        yield lineno, line


def read_records(
    stream, name: str, fmt: str, text_field: str, invalid_utf8: str, stats: Stats, pair_field: str | None = None
) -> Iterator[Record]:
    """One Record per input line (txt, jsonl) or csv / tsv row, lazily and in order; an empty or
    blank one included (Record.empty), so outputs align with inputs by position. With
    `pair_field`, each non-empty record also holds a pair's second text (jsonl field, csv/tsv
    column); a row without it is an error naming the file and line."""
    lines = decoded_lines(stream, name, invalid_utf8, stats)
    if pair_field is not None and fmt == "txt":
        raise InferenceError(f"{name}: sentence pairs need jsonl, csv or tsv input (fields {text_field!r} and {pair_field!r})")

    def second(text, value, lineno: int):
        if pair_field is None or not (text or "").strip():
            return None
        if not isinstance(value, str) or not value.strip():
            raise InferenceError(f"{name}, line {lineno}: the pair's second text {pair_field!r} is missing or empty")
        return value

    if fmt == "txt":
        for lineno, text in lines:
            yield Record(str(lineno), text, lineno)
    elif fmt == "jsonl":
        for lineno, line in lines:
            if not line.strip():
                yield Record(str(lineno), "", lineno)
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InferenceError(f"{name}, line {lineno}: not valid JSON ({err.msg})") from None
            if not isinstance(obj, dict) or text_field not in obj:
                keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
                raise InferenceError(
                    f"{name}, line {lineno}: expected an object with key {text_field!r}, got {keys}; pass --text-field"
                )
            if not isinstance(obj[text_field], (str, type(None))):
                raise InferenceError(
                    f"{name}, line {lineno}: key {text_field!r} holds {type(obj[text_field]).__name__}, expected a string"
                )
            text = obj[text_field] or ""
            yield Record(str(obj.get("id", lineno)), text, lineno, second(text, obj.get(pair_field), lineno))
    elif fmt in ("csv", "tsv"):
        # csv pulls further lines itself for quoted fields that span lines; line_num tracks them.
        numbered = iter(lines)
        current = [0]

        def text_lines() -> Iterator[str]:
            for lineno, text in numbered:
                current[0] = lineno
                yield text

        reader = csv.DictReader(text_lines(), delimiter="\t" if fmt == "tsv" else ",")
        wanted = [text_field] + ([pair_field] if pair_field else [])
        if reader.fieldnames is None or any(f not in reader.fieldnames for f in wanted):
            raise InferenceError(
                f"{name}: expected a header row with column(s) {wanted}, got {reader.fieldnames}"
            )
        for row_number, row in enumerate(reader, start=1):
            text = row[text_field] or ""
            pair = second(text, row.get(pair_field) if pair_field else None, current[0])
            yield Record(str(row.get("id") or row_number), text, current[0], pair)
    else:
        raise InferenceError(f"unknown input format {fmt!r}; expected one of {INPUT_FORMATS}")


def open_input(path: str):
    """The binary stream of `path` (`-` = stdin); a missing path or a folder is an InferenceError.
    Special files (/dev/null, pipes, process substitution) are read like files."""
    if path == "-":
        buffer = getattr(sys.stdin, "buffer", None)  # a text-only stdin (an embedding program) is encoded
        return buffer if buffer is not None else io.BytesIO(sys.stdin.read().encode("utf-8"))
    if not os.path.exists(path):
        raise InferenceError(f"input file not found: {path}")
    if os.path.isdir(path):
        raise InferenceError(f"input {path} is a folder; pass a file (or - for stdin)")
    try:
        return open(path, "rb")  # noqa: SIM115
    except OSError as err:
        raise InferenceError(f"cannot read input {path}: {err.strerror}") from None


def chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
