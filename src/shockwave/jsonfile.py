"""Reading a user's JSON file into an object, with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shockwave.errors import InputError


def read_json_object(path: str | Path, what: str, expected: str) -> dict[str, Any]:
    """The JSON object in `path` (a `what` file), or an InputError saying why not; `expected` describes the object."""
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{what} file not found", path=path) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {what} JSON: {exc}", path=path) from None
    if not isinstance(raw, dict):
        raise InputError(f"expected {expected}", path=path)
    return raw
