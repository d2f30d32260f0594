"""Reading a user's text file (trace, TOML, JSON) the same way everywhere, with errors that name the file.

Files are UTF-8; a leading byte-order mark is dropped (Windows editors write one) rather than reported as a stray
character on line 1. Anything else (a missing file, a folder, unreadable or non-UTF-8 bytes) is an InputError, never
a traceback, and does not depend on the machine's locale.
"""

from __future__ import annotations

from pathlib import Path

from shockwave.errors import InputError


def read_bytes(path: str | Path, what: str) -> bytes:
    """The bytes of `path` (a `what`, e.g. "trace file"), or an InputError saying why not."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} not found", path=path) from None
    except IsADirectoryError:
        raise InputError(f"expected a {what}, found a folder", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", path=path) from None


def decode(data: bytes, path: str | Path, what: str) -> str:
    """UTF-8 text without its byte-order mark; bytes that are not UTF-8 are reported with their line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{what} is not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded (save the file as UTF-8)",
            path=path,
            line=line,
        ) from None


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of `path` (a `what`, e.g. "trace file"), or an InputError naming the file (and line)."""
    return decode(read_bytes(path, what), path, what)
