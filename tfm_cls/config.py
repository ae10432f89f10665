"""One source of truth for configuration: nested dataclasses <-> YAML <-> dotted CLI overrides.

Loading is strict: an unknown key (in a YAML file or an override) is an error naming the key
and the file, and every value is type-checked against the dataclass field it lands in.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message says where and why."""


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
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as err:
                errors.append(str(err))
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
    """Build dataclass `cls` from a mapping; unknown keys and wrong types raise ConfigError."""
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


def apply_overrides(data: dict[str, Any], overrides: list[str], cls: type) -> dict[str, Any]:
    """Apply `a.b.c=value` overrides to a raw config mapping, checking each key path exists."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE, e.g. train.lr=3e-4")
        dotted, raw = item.split("=", 1)
        keys = dotted.strip().split(".")
        node, node_cls = data, cls
        for depth, key in enumerate(keys):
            fields = {f.name: f for f in dataclasses.fields(node_cls)}
            if key not in fields:
                prefix = ".".join(keys[:depth]) or "<top level>"
                raise ConfigError(
                    f"override {item!r}: unknown key {key!r} under {prefix}; valid keys: {sorted(fields)}"
                )
            field_type = typing.get_type_hints(node_cls)[key]
            if depth == len(keys) - 1:
                node[key] = _parse_scalar(raw)
            else:
                if not dataclasses.is_dataclass(field_type):
                    raise ConfigError(f"override {item!r}: {key!r} is not a section")
                node = node.setdefault(key, {})
                node_cls = field_type
    return data


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None) -> T:
    """Load `cls` from a YAML file (optional) plus dotted overrides; strict and type-checked."""
    data: dict[str, Any] = {}
    where = "config"
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        with open(path, encoding="utf-8") as f:
            loaded = yaml.safe_load(f) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level, got {type(loaded).__name__}")
        data, where = loaded, str(path)
    if overrides:
        data = apply_overrides(data, overrides, cls)
    return from_dict(cls, data, where)


def save_config(config: Any, path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(to_dict(config), f, sort_keys=False)
