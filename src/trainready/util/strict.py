"""Strict loading of nested dataclasses from TOML: unknown keys, wrong types and
missing files are `ConfigError`s naming the file, the dotted key and what was
expected.  Field docs live in ``field(metadata={"doc": ...})`` so that
`trainready spec init` can write them out as comments.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from trainready.errors import ConfigError

T = TypeVar("T")


def doc_field(default: Any = dataclasses.MISSING, doc: str = "", default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with a docstring (shown by `spec init` and `--help`)."""
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={"doc": doc})
    return dataclasses.field(default=default, metadata={"doc": doc})


def read_toml(path: str | Path, what: str = "TOML spec file") -> dict[str, Any]:
    """The parsed TOML table; `what` names the expected file in the one-line error."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(str(p), None, f"file not found (expected a {what})")
    if not p.is_file():
        raise ConfigError(str(p), None, f"not a regular file (expected a {what})")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(str(p), None, f"unreadable ({exc.strerror})") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(str(p), None, "not UTF-8 text (expected TOML)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), None, f"malformed TOML: {exc}") from None


def load_dataclass(cls: type[T], data: dict[str, Any], path: str, prefix: str = "") -> T:
    """Build `cls` from `data`, strictly."""
    if not isinstance(data, dict):
        raise ConfigError(path, prefix.rstrip(".") or None, f"expected a table, got {_tname(data)}")
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(path, dotted, f"unknown key (expected one of: {known})")
        kwargs[key] = _convert(hints[key], value, path, dotted)
    for name, f in fields.items():
        if name not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(path, f"{prefix}{name}", "missing required key")
    return cls(**kwargs)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A dataclass's field types, evaluated once per class (get_type_hints was most of a spec load's time)."""
    return get_type_hints(cls)


def _tname(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}.get(
        type(v), type(v).__name__
    ) + (f" {v!r}" if isinstance(v, (str, int, float, bool)) else "")


def _convert(tp: Any, value: Any, path: str, key: str) -> Any:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _convert(args[0], value, path, key)
        for a in args:
            try:
                return _convert(a, value, path, key)
            except ConfigError:
                continue
        raise ConfigError(path, key, f"expected {tp}, got {_tname(value)}")
    if dataclasses.is_dataclass(tp):
        return load_dataclass(tp, value, path, prefix=f"{key}.")  # type: ignore[arg-type]
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(path, key, f"expected an array, got {_tname(value)}")
        (inner, *_rest) = get_args(tp)
        return tuple(_convert(inner, v, path, f"{key}[{i}]") for i, v in enumerate(value))
    if origin in (dict, typing.Mapping) or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, key, f"expected a table, got {_tname(value)}")
        kt, vt = get_args(tp) or (str, Any)
        return {str(k): _convert(vt, v, path, f"{key}.{k}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, key, f"expected a boolean, got {_tname(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(path, key, f"expected an integer, got {_tname(value)}")
        return value
    if tp is float:
        return _finite(value, path, key)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, key, f"expected a string, got {_tname(value)}")
        return value
    raise ConfigError(path, key, f"unsupported type {tp}")  # pragma: no cover


def _finite(value: Any, path: str, key: str) -> float:
    """A finite number: no threshold, tolerance or time is meant as inf or nan (TOML's inf, nan, and a literal
    past the largest double such as 1e309, which reads as inf): a bound of inf is one no figure can cross."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(path, key, f"expected a number, got {_tname(value)}")
    try:
        x = float(value)
    except OverflowError:  # an integer past the largest double (JSON records can hold one)
        x = math.inf if value > 0 else -math.inf
    if not math.isfinite(x):
        why = "" if math.isnan(x) else " (a literal past ±1.8e308 reads as inf)"
        raise ConfigError(path, key, f"expected a finite number, got {x!r}{why}")
    return x


def dump_toml(obj: Any, with_docs: bool = True) -> str:
    """Write a dataclass tree as TOML; a None field (unset: a spec does not check it) is one comment line
    `# NAME: unset (not checked)`, never an empty `NAME = ` for a reader to wonder about."""
    lines: list[str] = []
    _dump(obj, [], lines, with_docs)
    return "\n".join(lines).strip() + "\n"


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return _fmt({f.name: getattr(v, f.name) for f in dataclasses.fields(v) if getattr(v, f.name) is not None})
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_fmt(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def _key(k: str) -> str:
    """A TOML bare key (A-Za-z0-9_-) as is; any other ('zope.interface': a dot would nest) quoted."""
    return k if k and all(c.isascii() and (c.isalnum() or c in "_-") for c in k) else _fmt(k)


def _dump(obj: Any, path: list[str], lines: list[str], with_docs: bool) -> None:
    subs = []
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            subs.append((f, v))
            continue
        doc = f.metadata.get("doc", "")
        if with_docs and doc:
            lines.append(f"# {doc}")
        if v is None:
            lines.append(f"# {f.name}: unset (not checked)")
        else:
            lines.append(f"{f.name} = {_fmt(v)}")
    for f, v in subs:
        lines.append("")
        doc = f.metadata.get("doc", "")
        if with_docs and doc:
            lines.append(f"# {doc}")
        lines.append(f"[{'.'.join(path + [f.name])}]")
        _dump(v, path + [f.name], lines, with_docs)
