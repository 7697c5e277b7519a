"""config.yml's values against the config's dataclasses: `build` makes a dataclass from a YAML mapping (an unknown
key refused, a required one missing named), `cast` checks one value against its type hint. Every error is a
ConfigError whose message starts with the value's YAML key (or, for a command-line value, its flag).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union

from benchprof import BenchprofError
from benchprof.core.layout import shown
from benchprof.core.options import did_you_mean


class ConfigError(BenchprofError):
    """A config value is missing or wrong; the message names the YAML key."""


def cast(value: Any, hint: Any, key: str) -> Any:
    """Check `value` against the type hint `hint` and cast where YAML is loose (1e-5 as a string)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return cast(value, inner[0], key)
    if origin is Literal:
        if value not in args:
            raise ConfigError(
                f"{key}: {shown(value)} is not one of {', '.join(map(str, args))}{did_you_mean(value, args)}"
            )
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {type(value).__name__} {shown(value)}")
        return [cast(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {type(value).__name__}")
        return {str(k): cast(v, args[1], f"{key}.{k}") for k, v in value.items()}
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {shown(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ConfigError(f"{key}: expected an integer, got {shown(value)}")
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{key}: expected an integer, got {shown(value)}") from None
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{key}: expected a number, got {shown(value)}")
        try:
            return float(value)  # YAML 1.1 reads 1e-5 as a string
        except ValueError:
            raise ConfigError(f"{key}: expected a number, got {shown(value)}") from None
    if hint is str:
        if isinstance(value, (list, dict)) or value is None:
            raise ConfigError(f"{key}: expected a string, got {shown(value)}")
        return str(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return build(hint, value, key)
    raise ConfigError(f"{key}: unsupported type {hint}")  # a bug in this module, not in the YAML


def build(cls: type, raw: Any, key: str) -> Any:
    """Build dataclass `cls` from the mapping `raw`, rejecting unknown keys."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{key}: expected a mapping, got {type(raw).__name__} {shown(raw)}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.metadata.get("yaml", True)}  # not Config.path
    kwargs = {}
    for name, value in raw.items():
        sub = f"{key}.{name}" if key else str(name)
        if name not in known:
            raise ConfigError(f"{sub}: unknown key (known: {', '.join(sorted(known))})")
        if name == "cuda_visible_devices" and isinstance(value, (int, list)):
            value = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        kwargs[name] = cast(value, hints[name], sub)
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in kwargs
    ]
    if missing:
        raise ConfigError(f"{key + '.' if key else ''}{missing[0]}: required key is missing")
    return cls(**kwargs)
