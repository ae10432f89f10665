"""The output folder of `tfm-cls batch`: one Parquet or JSONL part per Ray batch (written by the
actor that classified it), each under a temporary name and renamed into place, then `_manifest.json`, written last, which marks the
folder complete. A folder without the manifest is not an output (a failed run removes its parts).

Exactly once: every part reports, per input file, how many rows it holds and the sum of their
line numbers; the run checks them against the counts read before inference (`inputs.count_file`)
and fails, removing its parts, when a row is missing or doubled. Parts that a retried task wrote
but never reported (its first attempt died after writing) are removed too."""

from __future__ import annotations

import json
import os
import uuid
from collections import defaultdict
from typing import Any

from tfm_cls.batch.inputs import filesystem
from tfm_cls.errors import InferenceError
from tfm_cls.io import atomic_path, write_json

OUTPUT_FORMATS = ("parquet", "jsonl")
MANIFEST = "_manifest.json"
PART_PREFIX = "part-"


def prepare_folder(uri: str, overwrite: bool) -> bool:
    """Create the output folder (True: it was not there); one that holds files is refused (or,
    with `overwrite`, emptied of an earlier run's parts and manifest; other files are never
    touched)."""
    from pyarrow import fs

    filesys, root = filesystem(uri)
    info = filesys.get_file_info(root)
    if info.type == fs.FileType.File:
        raise InferenceError(f"output {uri} is a file; --output names a folder")
    if info.type == fs.FileType.Directory:
        present = [i for i in filesys.get_file_info(fs.FileSelector(root)) if i.type != fs.FileType.NotFound]
        ours = [i.path for i in present if os.path.basename(i.path).startswith((PART_PREFIX, MANIFEST, f".{PART_PREFIX}"))]
        if present and not overwrite:
            raise InferenceError(f"output folder {uri} is not empty; pass --overwrite or another --output")
        if len(ours) < len(present):
            raise InferenceError(f"output folder {uri} holds files that are not a tfm-cls batch output; "
                                 "write elsewhere")
        for path in ours:
            filesys.delete_file(path)
    filesys.create_dir(root, recursive=True)
    return info.type == fs.FileType.NotFound


def remove_if_empty(uri: str) -> None:
    """Remove the folder `uri` if it holds nothing (a failed run leaves no empty output behind)."""
    from pyarrow import fs

    filesys, root = filesystem(uri)
    if not filesys.get_file_info(fs.FileSelector(root, allow_not_found=True)):
        filesys.delete_dir(root)


def write_block(table, uri: str, fmt: str, drop: tuple[str, ...] = ()):
    """One batch of predictions written as one part file (its columns less
    `drop`) and returns one row describing it: file, rows, and per input file its rows and the sum
    of their line numbers (JSON), which `check_complete` adds up."""
    import pyarrow as pa

    table = table.drop_columns([c for c in drop if c in table.column_names])
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path, line in zip(table.column("path").to_pylist(), table.column("line").to_pylist()):
        counts[path][0] += 1
        counts[path][1] += line
    name = f"{PART_PREFIX}{uuid.uuid4().hex}.{fmt}" if table.num_rows else ""
    if table.num_rows:
        write_part(uri, name, table, fmt)
    return pa.table({"file": [name], "rows": [table.num_rows], "counts": [json.dumps(counts)]})


def write_part(uri: str, name: str, table, fmt: str) -> None:
    """`table` as the part `name` in the folder `uri`, under a temporary name first."""
    from pyarrow import fs

    filesys, root = filesystem(uri)
    if isinstance(filesys, fs.LocalFileSystem):
        with atomic_path(os.path.join(root, name)) as tmp:
            _write(table, fmt, str(tmp), None)
        return
    tmp = f"{root}/.{name}.tmp"  # object stores: the rename is a copy, but readers never see a partial part
    _write(table, fmt, tmp, filesys)
    filesys.move(tmp, f"{root}/{name}")


def _write(table, fmt: str, path: str, filesys) -> None:
    import pyarrow.parquet as pq

    if fmt == "parquet":
        pq.write_table(table, path, filesystem=filesys)
        return
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in table.to_pylist())
    if filesys is None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        with filesys.open_output_stream(path) as f:
            f.write(text.encode("utf-8"))


def check_complete(expected: list[dict], reports: list[dict]) -> list[str]:
    """Problems (none: every input row is in the output exactly once) comparing the counts read
    before inference with those the parts report."""
    got: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for report in reports:
        for path, (rows, line_sum) in json.loads(report["counts"]).items():
            got[path][0] += rows
            got[path][1] += line_sum
    problems = []
    for entry in expected:
        rows, line_sum = got.pop(entry["path"], (0, 0))
        if rows != entry["rows"] or line_sum != entry["line_sum"]:
            problems.append(f"{entry['path']}: {entry['rows']} rows read, {rows} written"
                            + (" (some rows twice, others missing)" if rows == entry["rows"] else ""))
    problems += [f"{path}: {rows} rows written from no input file" for path, (rows, _) in got.items()]
    return problems


def part_files(uri: str) -> list[str]:
    """The paths of every part (or temporary part) in the folder `uri`."""
    from pyarrow import fs

    filesys, root = filesystem(uri)
    listing = filesys.get_file_info(fs.FileSelector(root, allow_not_found=True))
    return [i.path for i in listing if os.path.basename(i.path).startswith((PART_PREFIX, f".{PART_PREFIX}"))]


def remove_parts(uri: str, keep: set[str] = frozenset()) -> int:
    """Remove the parts of the folder `uri` whose names are not in `keep`; how many went."""
    filesys, _ = filesystem(uri)
    gone = 0
    for path in part_files(uri):
        if os.path.basename(path) not in keep:
            filesys.delete_file(path)
            gone += 1
    return gone


def write_manifest(uri: str, manifest: dict[str, Any]) -> None:
    """`_manifest.json`, last: its presence says the folder is complete."""
    from pyarrow import fs

    filesys, root = filesystem(uri)
    if isinstance(filesys, fs.LocalFileSystem):
        write_json(os.path.join(root, MANIFEST), manifest)
        return
    with filesys.open_output_stream(f"{root}/{MANIFEST}") as f:
        f.write((json.dumps(manifest, indent=2) + "\n").encode("utf-8"))
