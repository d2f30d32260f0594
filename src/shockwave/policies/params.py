"""A policy's parameters, read from its constructor: the keyword parameters of its `__init__` (an allocator's, with
those of Gavel's mechanism beside them), typed by their annotations; and a user's `KEY=VALUE` texts read as those
types. Built-in policies and plug-ins declare parameters the same way, by writing their constructor."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError


@dataclass(frozen=True)
class Param:
    """One parameter a policy takes."""

    name: str
    types: tuple[type, ...] | None
    """Accepted types (an int is accepted for a float); None: any value."""
    default: Any
    required: bool = False

    def check(self, value: Any, where: str, path: Path | None = None) -> Any:
        """`value` (an int made a float where a float is declared), or an InputError naming the parameter."""
        kinds = self.types
        if kinds is None or object in kinds:
            return value
        if isinstance(value, bool):
            ok = bool in kinds
        elif isinstance(value, int) and float in kinds and int not in kinds:
            return float(value)
        else:
            ok = isinstance(value, kinds)
        if not ok:
            wanted = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
            raise InputError(
                f"{where}: parameter {self.name!r} must be {wanted}, not {type(value).__name__} {value!r}", path=path
            )
        return value


def params_of(cls: type, *, skip: tuple[str, ...] = ()) -> tuple[Param, ...]:
    """The keyword parameters of `cls`'s constructor (but `skip`), typed by their annotations when those are plain
    classes (or unions of them)."""
    try:
        signature = inspect.signature(cls, eval_str=True)
    except Exception:  # an annotation that names what the module does not define at run time
        try:
            signature = inspect.signature(cls)
        except (TypeError, ValueError):
            return ()
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(
        Param(p.name, _types_of(p.annotation), None if p.default is p.empty else p.default, p.default is p.empty)
        for p in signature.parameters.values()
        if p.kind in keyword and p.name not in skip
    )


def _types_of(annotation: Any) -> tuple[type, ...] | None:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return None
    if annotation is None:
        return (type(None),)
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return (annotation,)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        parts = [_types_of(arg) for arg in typing.get_args(annotation)]
        return None if any(p is None for p in parts) else tuple(t for p in parts if p for t in p)
    return None


def read_params(
    texts: Iterable[str], declared: dict[str, Param], origin: str, path: Path | None = None
) -> dict[str, Any]:
    """`KEY=VALUE` texts (`--policy-param`) as values of the `declared` parameters: each value read as its
    parameter's type (a number, true/false, none, or text such as a file name)."""
    values: dict[str, Any] = {}
    for text in texts:
        key, sep, value = (part.strip() for part in text.partition("="))
        if not sep or not key:
            raise InputError(f"--policy-param {text!r}: expected KEY=VALUE")
        if key not in declared:
            takes = f"its parameters: {', '.join(declared)}" if declared else "it takes none"
            raise InputError(f"--policy-param {key}: {origin} has no parameter {key!r} ({takes})", path=path)
        if key in values:
            raise InputError(f"--policy-param {key} is given twice")
        values[key] = _read_value(value, declared[key], f"--policy-param {key}")
    return values


_TRUE, _FALSE, _NONE = ("true", "yes", "1"), ("false", "no", "0"), ("none", "null")


def _read_value(text: str, param: Param, where: str) -> Any:
    """`text` as the first of the parameter's types it reads as (any type: a number, a boolean, else the text)."""
    kinds = param.types or (int, float, bool, str)
    lowered = text.lower()
    if type(None) in kinds and lowered in _NONE:
        return None
    for kind in kinds:
        if kind is bool and lowered in (*_TRUE, *_FALSE):
            return lowered in _TRUE
        if kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
        if kind in (str, Path, object):
            return text if kind is object else kind(text)
    wanted = " or ".join("none" if k is type(None) else k.__name__ for k in kinds)
    raise InputError(f"{where}: expected {wanted}, got {text!r}")
