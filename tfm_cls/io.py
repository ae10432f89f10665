"""Atomic file writes and JSON reading: every artifact is written to a temporary file in the same
folder, flushed to disk and renamed over the target, so a process killed at any moment leaves
either the old file or the new one, never a torn one."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfm_cls.errors import DiskFullError, RunDirError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _device_full(folder: Path) -> bool:
    """True when the file system holding `folder` has (almost) no space left for us."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024


def disk_full_error(path: str | Path) -> DiskFullError:
    """The one message for a write that ran out of space."""
    path = Path(path)
    return DiskFullError(
        f"no space left on device writing {path} (in {path.parent.resolve()}); free some space there or "
        "write elsewhere; the previous file, if any, was kept"
    )


def is_disk_full(err: BaseException, folder: str | Path) -> bool:
    """Whether `err` (raised while writing into `folder`) means the device is full. Some writers
    (torch.save) report a short write as a RuntimeError, so a full device is also checked."""
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(err, (OSError, RuntimeError)) and _device_full(Path(folder))


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename. A
    failure leaves `path` as it was; a full device is a DiskFullError naming `path`."""
    path = Path(path)
    if path.parent.exists() and not path.parent.is_dir():
        raise RunDirError(f"cannot write {path}: {path.parent} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        if is_disk_full(err, path.parent):
            raise disk_full_error(path) from err
        raise
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp makes 0600, and some writers (safetensors) recreate the file: set the usual
        # mode of a published file just before publishing it.
        os.chmod(tmp_path, 0o666 & ~_umask())
        with open(tmp_path, "rb+") as f:  # make the bytes durable before the rename publishes them
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except Exception as err:
        if is_disk_full(err, path.parent):
            raise disk_full_error(path) from err
        raise
    finally:
        tmp_path.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path`, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def finite_or_none(obj: Any) -> Any:
    """`obj` with every NaN / infinite float replaced by None (JSON null), recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def write_json(path: str | Path, obj: Any) -> None:
    """Write `obj` as indented UTF-8 JSON, atomically. Strict JSON: a NaN or infinity is an
    error (ValueError), never the invalid `NaN` / `Infinity` tokens; pass values that may be
    undefined through `finite_or_none` first."""
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; a missing or invalid file is a RunDirError naming it."""
    path = Path(path)
    if not path.is_file():
        raise RunDirError(f"{path} does not exist")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RunDirError(f"{path}: invalid JSON ({err})") from err


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes (hex), read in 1 MiB blocks: the weights digest an export records."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _resolved(path: str | Path) -> Path:
    """`path` with every symlink and `..` resolved, also where it does not exist yet."""
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)  # hard links too
    except OSError:
        return a == b


def output_clash(output: str | Path, inputs: dict[str, tuple[str | Path, frozenset[str] | None]]) -> str | None:
    """Why writing `output` would overwrite an input, or None. `inputs`: {what it is, for the
    message: (a file, None), or (a folder, the names of the files in it that the job reads; None:
    anything inside it)}. Paths are compared resolved (symlinks, `..`, `~`) and as files (hard
    links), before anything is read or written."""
    target = _resolved(output)
    for what, (given, names) in inputs.items():
        source = _resolved(given)
        if not source.is_dir():
            if _same_file(target, source):
                return f"{output} is {what} ({given})"
            continue
        if target == source:
            return f"{output} is {what} ({given}), a folder"
        if names is None and source in target.parents:
            return f"{output} is inside {what} ({given})"
        for name in names or ():
            if target == source / name or _same_file(target, source / name):
                return f"{output} is {source / name}, a file of {what}"
    return None
