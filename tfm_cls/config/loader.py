"""The generic half of configuration: nested dataclasses <-> YAML <-> dotted CLI overrides.

Loading is strict: an unknown key (in a YAML file or an override) is an error naming the key
and the file, and every value is type-checked against the dataclass field it lands in. A file
that is not YAML, or that YAML's safe loader refuses (a `!!python/...` tag), is a ConfigError
naming the file and the line.

Nothing here knows a particular config: the dataclasses are in tfm_cls/config/schema.py (and
pretrain/config.py, distill/config.py, tune.py). A config class may declare two class
attributes the loader reads: `preset_folder` (the configs/ folder of its presets) and
`renamed_keys` (deprecated dotted keys -> their new place, see `migrate_keys`).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.resources
import logging
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tfm_cls.errors import ConfigError
from tfm_cls.io import atomic_path

T = TypeVar("T")

logger = logging.getLogger(__name__)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check (and where lossless, convert) `value` to the annotated type `tp`."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: expected one of {list(args)}, got {value!r}")
        return value
    if origin in (list, tuple):
        if isinstance(value, str):  # a single string where a list is expected: one element
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        item_type = args[0] if args else Any
        return [_coerce(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping of {tp.__name__} fields, got {value!r}")
        return from_dict(tp, value, where)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[T], data: dict[str, Any], where: str = "config") -> T:
    """Build dataclass `cls` from a mapping; unknown keys and wrong types raise ConfigError.
    Deprecated keys of `cls.renamed_keys` are read at their new place (`migrate_keys`)."""
    data = migrate_keys(cls, data, where)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {unknown} for {cls.__name__}; valid keys: {sorted(fields)}"
        )
    kwargs = {name: _coerce(value, hints[name], f"{where}.{name}") for name, value in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{where}: {err}") from err


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def require(condition: bool, message: str) -> None:
    """A config's `__post_init__` check: a ValueError that `from_dict` turns into a ConfigError."""
    if not condition:
        raise ValueError(message)


# ---- deprecated keys --------------------------------------------------------------------------------
# A config class lists the keys it no longer has as `renamed_keys: ClassVar[dict[str, str | None]]`,
# dotted old key -> dotted new key (None: no longer read; dropped). Files, overrides and the
# config.yaml of old run directories keep loading; one warning per source names what to rename.


def _has(data: Mapping[str, Any], dotted: str) -> bool:
    node: Any = data
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def _warn_deprecated(where: str, moved: list[tuple[str, str | None]]) -> None:
    renamed = [f"{old} -> {new}" for old, new in moved if new]
    dropped = [old for old, new in moved if not new]
    parts = []
    if renamed:
        parts.append(f"{_keys(renamed)} (read at the new place for now: rename {_them(renamed)})")
    if dropped:
        parts.append(f"{_keys(dropped)} (no longer read here: remove {_them(dropped)})")
    logger.warning("%s: %s", where, "; ".join(parts))


def _keys(names: list[str]) -> str:
    return f"deprecated key{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _them(names: list[str]) -> str:
    return "them" if len(names) > 1 else "it"


def migrate_keys(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """`data` (a raw mapping for `cls`) with each deprecated key of `cls.renamed_keys` moved to its
    new place, and one warning naming them all and `where` (the file). A mapping that gives a key
    under both its old and its new name is a ConfigError. `data` itself is left as it is."""
    renames: Mapping[str, str | None] = getattr(cls, "renamed_keys", None) or {}
    moved = [(old, new) for old, new in renames.items() if _has(data, old)]
    if not moved:
        return data
    data = copy.deepcopy(data)
    for old, new in moved:
        *sections, leaf = old.split(".")
        node = data
        for key in sections:
            node = node[key]
        value = node.pop(leaf)
        if new is None:
            continue
        if _has(data, new):
            raise ConfigError(f"{where}: {old} is the deprecated name of {new}; give only {new}")
        *sections, leaf = new.split(".")
        node = data
        for depth, key in enumerate(sections):
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{where}: {'.'.join(sections[: depth + 1])}: expected a mapping, got {node!r}")
        node[leaf] = value
    _warn_deprecated(where, moved)
    return data


def _current_key(cls: type, override: str) -> str:
    """The dotted key an override sets: its own, or for a deprecated one (`renamed_keys`) the new."""
    key = override.split("=", 1)[0].strip()
    return (getattr(cls, "renamed_keys", None) or {}).get(key) or key


def _yaml_problem(err: yaml.YAMLError, located: bool = True) -> str:
    """One line out of a YAML error: where (line, column, when `located`) and what."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None and located else ""
    if isinstance(err, yaml.constructor.ConstructorError) and "python/" in problem:
        # yaml.safe_load builds plain data only: a `!!python/...` tag is refused, never run.
        problem += " (configs are plain YAML, read with the safe loader: no Python tags)"
    return at + " ".join(problem.split())


def _parse_scalar(text: str) -> Any:
    """Parse an override's right-hand side the way YAML would (`3e-4` -> float, `null` -> None)."""
    value = yaml.safe_load(text)
    # YAML 1.1 reads `3e-4` as a string; accept it as a number.
    if isinstance(value, str):
        try:
            return float(value) if any(c in value for c in ".eE") else value
        except ValueError:
            return value
    return value


def _place(data: dict[str, Any], dotted: str, cls: type, what: str) -> tuple[dict[str, Any], str]:
    """The mapping inside `data` where dotted key `dotted` of `cls` lands, and its last key (sections
    created on the way); an unknown key or a key that is not a section is a ConfigError naming `what`."""
    keys = dotted.split(".")
    node, node_cls = data, cls
    for depth, key in enumerate(keys[:-1]):
        fields = {f.name for f in dataclasses.fields(node_cls)}
        if key not in fields:
            prefix = ".".join(keys[:depth]) or "<top level>"
            raise ConfigError(f"{what}: unknown key {key!r} under {prefix}; valid keys: {sorted(fields)}")
        field_type = typing.get_type_hints(node_cls)[key]
        if not dataclasses.is_dataclass(field_type):
            raise ConfigError(f"{what}: {key!r} is not a section")
        node = node.setdefault(key, {})
        node_cls = field_type
    fields = {f.name for f in dataclasses.fields(node_cls)}
    if keys[-1] not in fields:
        prefix = ".".join(keys[:-1]) or "<top level>"
        raise ConfigError(f"{what}: unknown key {keys[-1]!r} under {prefix}; valid keys: {sorted(fields)}")
    return node, keys[-1]


def set_values(data: dict[str, Any], values: Mapping[str, Any], cls: type) -> dict[str, Any]:
    """Set typed values by dotted key (`{"train.lr": 5e-5}`) in a raw config mapping, checking each
    key path exists; nothing is parsed (from_dict type-checks them where they land)."""
    for dotted, value in values.items():
        node, key = _place(data, dotted, cls, f"{dotted}={value!r}")
        node[key] = copy.deepcopy(value)
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str], cls: type) -> dict[str, Any]:
    """Apply `a.b.c=value` overrides to a raw config mapping, checking each key path exists.
    A deprecated key of `cls.renamed_keys` sets its new key (one warning for the command line)."""
    renames: Mapping[str, str | None] = getattr(cls, "renamed_keys", None) or {}
    moved: list[tuple[str, str | None]] = []
    by_old: set[str] = set()
    by_new: set[str] = set()
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. train.lr=3e-4")
        dotted, raw = item.split("=", 1)
        dotted = dotted.strip()
        if dotted in renames:
            moved.append((dotted, renames[dotted]))
            if renames[dotted] is None:
                continue
            dotted = renames[dotted]
            by_old.add(dotted)
        else:
            by_new.add(dotted)
        node, key = _place(data, dotted, cls, f"override {item!r}")
        try:
            node[key] = _parse_scalar(raw)
        except yaml.YAMLError as err:
            raise ConfigError(f"override {item!r}: {_yaml_problem(err, located=False)}") from None
    both = sorted(by_old & by_new)
    if both:
        old = next(o for o, n in moved if n == both[0])
        raise ConfigError(f"command line: {old} is the deprecated name of {both[0]}; give only {both[0]}")
    if moved:
        _warn_deprecated("command line", moved)
    return data


def presets_root() -> Path:
    """The folder of the named presets: the repository's configs/, installed as tfm_cls.configs."""
    return Path(str(importlib.resources.files("tfm_cls.configs")))


def presets(folder: str) -> list[str]:
    """Preset names of one kind (`cls`, `pretrain`, ...): the YAML files of configs/<folder>/."""
    return sorted(p.stem for p in (presets_root() / folder).glob("*.yaml"))


def resolve_config_file(entry: str | Path, preset_folder: str | None = None) -> Path:
    """A config file given as a path, or as a preset: `trec` (configs/<preset_folder>/trec.yaml),
    `finetune/from-mlm`, or a repository path like `configs/cls/trec.yaml` from any folder."""
    path = Path(entry)
    if path.is_file():
        return path
    root, text = presets_root(), str(entry)
    candidates = []
    if text.startswith("configs/"):
        candidates.append(root / text[len("configs/") :])
    stem = text[: -len(path.suffix)] if path.suffix in (".yaml", ".yml") else text
    if preset_folder:
        candidates.append(root / preset_folder / f"{stem}.yaml")
    candidates.append(root / f"{stem}.yaml")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    known = f"; presets: {', '.join(presets(preset_folder))}" if preset_folder else ""
    raise ConfigError(f"config file {entry} does not exist, and no preset has that name{known}")


def _read_config_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    with open(path, encoding="utf-8") as f:
        try:
            loaded = yaml.safe_load(f) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: {_yaml_problem(err)}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(loaded).__name__}")
    return loaded


def merge_config(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """`overlay` on top of `base`, section by section: a key it sets replaces that key only."""
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_config(merged[key], value)
        else:
            merged[key] = value
    return merged


def config_paths(path: str | Path | Sequence[str | Path] | None) -> list[Path]:
    """`a.yaml,b.yaml` (a string, as `--config` takes it), a Path, a list of paths, or None -> paths."""
    if path is None:
        return []
    if isinstance(path, Path):
        return [path]
    if isinstance(path, str):
        return [Path(p.strip()) for p in path.split(",") if p.strip()]
    return [Path(p) for p in path]


def load_config(
    cls: type[T], path: str | Path | Sequence[str | Path] | None = None, overrides: list[str] | None = None,
    *, values: Mapping[str, Any] | None = None,
) -> T:
    """Load `cls` from YAML file(s) plus dotted overrides; strict and type-checked.

    Each file is a path or a preset name (`resolve_config_file`). Several files
    (`configs/cls/trec.yaml,configs/finetune/from-mlm.yaml`, or `trec,finetune/from-mlm`) are merged in order,
    each later one overriding the keys it sets: an experiment plus a shared overlay (configs/finetune/),
    with one copy of each. `values` (typed values by dotted key, e.g. a plan's: `{"train.lr": 5e-5}`)
    come next, never parsed; the overrides (the command line's strings, parsed once) come last.
    """
    data: dict[str, Any] = {}
    folder = getattr(cls, "preset_folder", None)
    paths = [resolve_config_file(p, folder) for p in config_paths(path)]
    for p in paths:  # each file's deprecated keys are moved (and named) before the merge
        data = merge_config(data, migrate_keys(cls, _read_config_file(p), str(p)))
    if values:
        data = set_values(data, values, cls)
    where = " + ".join(map(str, paths)) or "config"
    if not overrides:
        return from_dict(cls, data, where)
    file_data, data = copy.deepcopy(data), apply_overrides(data, overrides, cls)
    try:
        return from_dict(cls, data, where)
    except ConfigError as err:
        try:
            from_dict(cls, file_data, where)
        except ConfigError:
            raise err from None  # the files alone are already wrong: the message names them
        # The files are fine alone: the command line is to blame, not the file.
        message = str(err).removeprefix(where).lstrip(".: ")
        named = [o for o in overrides if _current_key(cls, o).rsplit(".", 1)[-1] in message] or overrides
        raise ConfigError(f"command line {' '.join(named)}: {message}") from None


def save_config(config: Any, path: str | Path) -> None:
    """Write the resolved config as YAML, atomically (as every file of a run directory)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        yaml.safe_dump(to_dict(config), f, sort_keys=False)

