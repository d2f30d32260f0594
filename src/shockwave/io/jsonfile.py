"""Reading a user's JSON (or TOML) file (UTF-8, a byte-order mark allowed), with errors that name the file."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.io.text import DEFAULT_LIMIT, read_text


def read_json(path: str | Path, what: str, limit: int = DEFAULT_LIMIT) -> Any:
    """The JSON value in `path` (a `what` file of at most `limit` bytes), or an InputError saying why not (with the
    line of a syntax error).

    Numbers Python cannot hold (digits beyond its limit, nesting deeper than its stack) are bad input too.
    """
    text = read_text(path, f"{what} file", limit)
    if not text.strip():
        raise InputError(f"{what} file is empty: expected JSON", path=path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=path, line=exc.lineno) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"cannot read {what} JSON: {exc}", path=path) from None


def read_json_object(path: str | Path, what: str, expected: str, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """The JSON object in `path` (a `what` file of at most `limit` bytes), or an InputError saying why not;
    `expected` describes the object."""
    raw = read_json(path, what, limit)
    if not isinstance(raw, dict):
        raise InputError(f"expected {expected}", path=path)
    return raw


def read_json_or_toml(path: str | Path, what: str, limit: int = DEFAULT_LIMIT) -> Any:
    """The value in `path` (a `what` file of at most `limit` bytes): TOML when its name ends in .toml, JSON
    otherwise; an InputError naming the file when it cannot be read."""
    return read_toml(path, what, limit) if Path(path).suffix.lower() == ".toml" else read_json(path, what, limit)


def read_toml(path: str | Path, what: str, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """The TOML table in `path` (a `what` file of at most `limit` bytes), or an InputError naming the file."""
    text = read_text(path, f"{what} file", limit)
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, or a value Python cannot hold
        raise InputError(f"not valid TOML: {exc}", path=path) from None


def object_with_keys(
    raw: Any, known: tuple[str, ...], required: str, shape: str, missing: str, path: Path | None
) -> dict:
    """`raw` as a file's top-level object: a dict (else "expected `shape`"), of `known` keys only, holding `required`
    (else `missing`); every refusal an InputError naming `path` and the key."""
    if not isinstance(raw, dict):
        raise InputError(f"expected {shape}", path=path)
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise InputError(f"unknown key(s) {unknown}; known: {list(known)}", path=path, field=str(unknown[0]))
    if required not in raw:
        raise InputError(missing, path=path, field=required)
    return raw
