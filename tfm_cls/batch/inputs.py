"""The input files of `tfm-cls batch`: a file, a folder or a glob of Parquet / JSONL / CSV, on any
filesystem pyarrow opens (local paths, s3://, gs://, hdfs://, ...), read as batches of records.

Every file is read the way `tfm-cls infer` reads it, so the rows are the same: JSONL and CSV
through `runtime.readers.read_records` (one record per line / row, blank lines included, the id
from an `id` key or column, else the line or row number; a non-string text is an error naming the
file and line); Parquet with pyarrow, one record per row (`line`: the row number from 1, `id` the
`id` column or the row number; a null text is an empty record, a text column that does not hold
strings is an error naming the file and column)."""

from __future__ import annotations

import dataclasses
import fnmatch
import io
import os
from collections.abc import Iterator

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.readers import Stats, read_records

FORMATS = ("parquet", "jsonl", "csv")
EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
READ_ROWS = 8192
"""Records per table a reader yields: Ray re-cuts them into batches of --batch-size."""


@dataclasses.dataclass(frozen=True)
class InputFile:
    """One input file: `uri` opens it (a local absolute path or a filesystem URI), `name` is how
    rows and errors name it (its path below the input root), `fmt` its format."""

    uri: str
    name: str
    fmt: str


def filesystem(uri: str):
    """(pyarrow filesystem, path inside it) of a local path or a filesystem URI."""
    from pyarrow import fs

    if "://" not in uri:
        return fs.LocalFileSystem(), os.path.abspath(uri)
    try:
        return fs.FileSystem.from_uri(uri)
    except Exception as err:  # pyarrow raises ArrowInvalid / OSError for unknown schemes and bad URIs
        raise InferenceError(f"cannot open {uri}: {err}") from None


def _join(uri: str, path: str) -> str:
    """The URI of `path` on the filesystem of `uri` (a local path stays a path)."""
    if "://" not in uri:
        return path
    return f"{uri.split('://', 1)[0]}://{path}"


def _glob_match(path: str, pattern: str) -> bool:
    """The shell's rule: `*` and `?` stay within one path component (`**` spans any number of
    them), and a name starting with "." or "_" matches only a pattern component that does too."""
    names, parts = path.split("/"), pattern.split("/")
    base, wanted = names[-1], parts[-1]
    if base.startswith((".", "_")) and not wanted.startswith(base[0]):
        return False
    if "**" in parts:
        return fnmatch.fnmatch(path, pattern.replace("**/", "*"))
    return len(names) == len(parts) and all(fnmatch.fnmatch(n, p) for n, p in zip(names, parts))


def list_inputs(spec: str, fmt: str | None = None) -> list[InputFile]:
    """The files of a file, a folder (every file below it with a known extension, or of `fmt`) or a
    glob (`data/*.parquet`, `s3://bucket/part-*.jsonl`), sorted by path; an InferenceError when
    nothing matches or a file's format cannot be told."""
    from pyarrow import fs

    magic = any(c in spec for c in "*?[")
    root_spec = spec
    if magic:  # list the folder above the first component that holds a wildcard
        parts = spec.split("/")
        first = next(i for i, p in enumerate(parts) if any(c in p for c in "*?["))
        root_spec = "/".join(parts[:first]) or ("/" if spec.startswith("/") else ".")
    filesys, root = filesystem(root_spec)
    try:
        info = filesys.get_file_info(root)
    except OSError as err:
        raise InferenceError(f"cannot read {spec}: {err}") from None
    if info.type == fs.FileType.NotFound:
        raise InferenceError(f"input not found: {spec}")
    if info.type == fs.FileType.File:
        paths, base = [root], os.path.dirname(root)
    else:
        listing = filesys.get_file_info(fs.FileSelector(root, recursive=True))
        paths = sorted(i.path for i in listing if i.type == fs.FileType.File)
        base = root
        if magic:
            pattern = os.path.join(root, "/".join(spec.split("/")[first:])) if "://" not in spec else \
                f"{root.rstrip('/')}/{'/'.join(spec.split('/')[first:])}"
            paths = [p for p in paths if _glob_match(p, pattern)]
        else:  # a folder: the files of a known format, hidden ones (._SUCCESS, .crc) left out
            paths = [p for p in paths if not os.path.basename(p).startswith((".", "_"))
                     and (fmt is not None or os.path.splitext(p)[1].lower() in EXTENSIONS)]
    if not paths:
        known = "" if fmt or magic or info.type == fs.FileType.File else f" with extension {sorted(EXTENSIONS)}"
        raise InferenceError(f"no input files{known} in {spec}")
    files = []
    for path in paths:
        kind = fmt or EXTENSIONS.get(os.path.splitext(path)[1].lower())
        if kind not in FORMATS:
            raise InferenceError(f"cannot tell the format of {path} from its extension; pass --input-format")
        files.append(InputFile(_join(spec, path), os.path.relpath(path, base), kind))
    return files


def read_file(file: InputFile, text_field: str, pair_field: str | None, rows: int = READ_ROWS) -> Iterator:
    """pyarrow Tables of at most `rows` records of `file`, in order, with the columns id, path,
    line, text (and pair for sentence pairs): the records `tfm-cls infer` reads from that file."""
    import pyarrow as pa

    filesys, path = filesystem(file.uri)
    if file.fmt == "parquet":
        yield from _read_parquet(filesys, path, file, text_field, pair_field, rows)
        return
    with filesys.open_input_stream(path) as raw, io.BufferedReader(raw) as stream:  # line iteration
        records = read_records(stream, file.name, file.fmt, text_field, "error", Stats(), pair_field)
        buffer: list = []
        while True:
            buffer.clear()
            for record in records:
                buffer.append(record)
                if len(buffer) == rows:
                    break
            if not buffer:
                return
            columns = {"id": [r.id for r in buffer], "path": [file.name] * len(buffer),
                       "line": pa.array([r.line for r in buffer], pa.int64()), "text": [r.text for r in buffer]}
            if pair_field is not None:
                columns["pair"] = [r.pair for r in buffer]
            yield pa.table(columns)
            if len(buffer) < rows:
                return


def _read_parquet(filesys, path: str, file: InputFile, text_field: str, pair_field: str | None, rows: int):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with filesys.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        schema = parquet.schema_arrow
        wanted = [text_field, *([pair_field] if pair_field else [])]
        missing = [c for c in wanted if c not in schema.names]
        if missing:
            raise InferenceError(f"{file.name}: no column {missing} (columns: {schema.names}); pass --text-field / --pair-field")
        for column in wanted:
            kind = schema.field(column).type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)):
                raise InferenceError(f"{file.name}: column {column!r} holds {kind}, expected strings")
        has_id = "id" in schema.names
        start = 1
        for batch in parquet.iter_batches(batch_size=rows, columns=wanted + (["id"] if has_id else [])):
            n = batch.num_rows
            lines = pa.array(range(start, start + n), pa.int64())
            ids = batch.column("id").cast(pa.string()) if has_id else lines.cast(pa.string())
            texts = batch.column(text_field).cast(pa.string())
            columns = {"id": ids, "path": pa.array([file.name] * n, pa.string()), "line": lines, "text": texts}
            if pair_field is not None:
                pairs = batch.column(pair_field).cast(pa.string()).to_pylist()
                for i, (text, pair) in enumerate(zip(texts.to_pylist(), pairs)):
                    if (text or "").strip() and not (pair or "").strip():
                        raise InferenceError(f"{file.name}, row {start + i}: the pair's second text "
                                             f"{pair_field!r} is missing or empty")
                columns["pair"] = pa.array(pairs, pa.string())
            yield pa.table(columns)
            start += n


def count_file(file: InputFile, text_field: str, pair_field: str | None) -> dict:
    """The check before the cluster spends work: every record of `file` read (so a bad one fails
    here, naming its line), and its count and sum of line numbers, which the written output must
    match (`outputs.check_complete`)."""
    rows = line_sum = 0
    for table in read_file(file, text_field, pair_field):
        rows += table.num_rows
        line_sum += sum(table.column("line").to_pylist())
    return {"path": file.name, "rows": rows, "line_sum": line_sum}
