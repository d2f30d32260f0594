"""Writing results safely: check every output location before any work starts, and write a file so that readers
see the old or the new content, never half of it (a crash mid-write included)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from shockwave.errors import InputError


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path` all or nothing; a link at `path` is replaced, never written through."""
    with replacing(path) as f:
        f.write(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A new file (mode 0600) beside `path` to write, renamed over `path` when the block ends well and removed when
    it fails: renaming replaces whatever name is there (a link planted at an output's name included) instead of
    writing where it points, and readers see the old content or the new, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


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
