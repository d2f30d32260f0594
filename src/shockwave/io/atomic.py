"""Writing results safely: check every output location before any work starts, and write a file so that readers
see the old or the new content, never half of it (a crash mid-write included)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from shockwave.core.errors import InputError


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


OUTPUT_MODE = 0o666 & ~_umask()
"""Results, traces and figures are created as any file of the user's (their umask, read once at import)."""
PRIVATE_MODE = 0o600
"""State files (checkpoints, copied inputs, the endpoint's token) are their owner's alone."""


def write_atomically(path: Path, data: str | bytes, *, private: bool = False) -> None:
    """Write `data` (text as UTF-8) to `path` all or nothing; a link at `path` is replaced, never written through.
    `private`: readable by its owner only (a state file), else as the user's umask says."""
    with replacing(path, private=private) as f:
        f.write(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def replacing(path: Path, *, private: bool = False) -> Iterator[BinaryIO]:
    """A new file beside `path` to write (mode 0600 while it is written), renamed over `path` when the block ends
    well and removed when it fails: renaming replaces whatever name is there (a link planted at an output's name
    included) instead of writing where it points, and readers see the old content or the new, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            os.fchmod(f.fileno(), PRIVATE_MODE if private else OUTPUT_MODE)
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
