"""Writing results safely: check every output location before any work starts, and write a file so that readers
see the old or the new content, never half of it (a crash mid-write included)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from shockwave.errors import InputError


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as f:
        f.write(text)
    os.replace(f.name, path)


def ensure_writable(folder: Path) -> None:
    """Create `folder` and prove a file can be written in it, so a run fails before its work, not after."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise InputError(f"output folder is not writable: {exc.strerror or exc}", path=folder) from None


def ensure_writable_file(path: Path) -> None:
    """The same for an output file: its folder must be writable and the path must not be a folder."""
    if path.is_dir():
        raise InputError("output file is a folder", path=path)
    ensure_writable(path.parent if str(path.parent) else Path("."))
