"""JSON Lines, read and appended one way everywhere in tfm_cls (torch-free, imports nothing of the project
above `errors`).

A line ends at "\\n" only (a "\\r" before it is dropped: Windows files). U+2028, U+2029, U+0085, the
separators \\x1c-\\x1e, form feeds and a lone "\\r" are characters of the line: `str.splitlines()` (and a
file iterated in text mode, for "\\r") would cut a JSON string there and make every later read of the
file fail. The rows we write escape U+2028, U+2029 and U+0085 (valid JSON either way) so that other
people's `splitlines` readers read our files whole too; a file that holds them raw reads the same.

    json_lines(lines, name)      (line number, value) of the non-blank lines given by runtime.readers.decoded_lines
    read_jsonl(path, ...)        the same from a file: invalid UTF-8 and bad JSON are one error naming the line
    dumps(row)                   one row as a line (no newline), separators escaped
    append_jsonl(path, rows)     rows added at the end of a file, atomically (the old file or the new one)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tfm_cls.errors import InferenceError

# Characters that json.dumps(ensure_ascii=False) leaves raw inside strings but that line splitters other
# than ours (str.splitlines, some editors and JavaScript tools) take for line ends.
_ESCAPED = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}
_TABLE = str.maketrans(_ESCAPED)


def json_lines(lines: Iterable[tuple[int, str]], name: str, error: type[Exception] = InferenceError,
               objects: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line, from `decoded_lines` (lines split at "\\n"
    only); a line that does not parse, or (objects=True) is not a JSON object, is `error` naming
    `name` and the line."""
    for lineno, line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise error(f"{name}, line {lineno}: not valid JSON ({err.msg})") from None
        if objects and not isinstance(value, dict):
            raise error(f"{name}, line {lineno}: expected a JSON object, got {type(value).__name__}")
        yield lineno, value


def read_jsonl(path: str | os.PathLike, name: str | None = None, *, invalid_utf8: str = "error",
               error: type[Exception] = InferenceError, objects: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of the JSON Lines file `path`, lazily. Invalid
    UTF-8 is `error` naming the line and byte offset (invalid_utf8="replace": U+FFFD); see json_lines."""
    from tfm_cls.runtime.readers import Stats, decoded_lines

    name = name or str(path)
    with open(path, "rb") as f:
        try:
            yield from json_lines(decoded_lines(f, name, invalid_utf8, Stats()), name, error, objects)
        except InferenceError as err:
            if error is InferenceError:
                raise
            raise error(str(err)) from None


def dumps(row: Any) -> str:
    """One JSON Lines row (no newline): UTF-8 text as is, U+2028 / U+2029 / U+0085 escaped."""
    return json.dumps(row, ensure_ascii=False).translate(_TABLE)


def append_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    """Add `rows` at the end of the JSON Lines file `path` (created if missing; a last line without
    its newline gets one first), by writing the whole new file beside it and renaming it over the
    old (io.atomic_path): a crash leaves the old file or the new one, never a torn line. The caller
    holds whatever lock keeps two writers apart. Returns the rows added."""
    from tfm_cls.io import atomic_path

    path = Path(path)
    body = "".join(dumps(r) + "\n" for r in rows).encode("utf-8")
    if not body:
        return 0
    old = path.read_bytes() if path.is_file() else b""
    tail = b"" if not old or old.endswith(b"\n") else b"\n"
    with atomic_path(path) as tmp:
        tmp.write_bytes(old + tail + body)
    return body.count(b"\n")
