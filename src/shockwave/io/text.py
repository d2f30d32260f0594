"""Reading a user's text file (trace, TOML, JSON) the same way everywhere, with errors that name the file.

Files are UTF-8; a leading byte-order mark is dropped (Windows editors write one) rather than reported as a stray
character on line 1. Anything else (a missing file, a folder, unreadable or non-UTF-8 bytes) is an InputError, never
a traceback, and does not depend on the machine's locale.

Every read is bounded: only a regular file is read (a FIFO would block forever, /dev/zero never ends, and opening a
device can have effects of its own), and at most one byte more than the cap of its kind, so a wrong path costs an
error message, not the machine's memory. The caps below are far above real data (the largest reference trace is
143 KB, a reference throughput table 1.2 MB, a 900-job result 290 KB) and far below what would hurt.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from shockwave.core.errors import InputError

MiB = 1024 * 1024
TRACE_LIMIT = 64 * MiB
"""A trace line is about 160 bytes: room for some 400,000 jobs (the largest reference trace has 900)."""
THROUGHPUT_LIMIT = 64 * MiB
"""A Gavel/Shockwave table with its co-location pairs is 1.2 MB: fifty times that, for tables of more GPU types."""
CONFIG_LIMIT = 1 * MiB
"""Shockwave's hyperparameters are a dozen numbers (a few hundred bytes)."""
JOB_SPEC_LIMIT = 1 * MiB
"""A job spec is a dozen fields and a command line."""
PRICES_LIMIT = 1 * MiB
"""A price per GPU type."""
ENTITIES_LIMIT = 16 * MiB
"""Entities with their weights and, at most, one line per job of a large trace."""
SWEEP_LIMIT = 4 * MiB
"""A sweep's grid, with at most some thousands of [[case]] tables."""
BATCH_SIZES_LIMIT = 256 * MiB
"""A batch size per epoch of every job of a real run (`shockwave run`'s batch_sizes.json): a few MB for hundreds of
jobs of hundreds of epochs, with room for long runs."""
RESULTS_LIMIT = 256 * MiB
"""Saved results that `report` and a re-run sweep read back: a 900-job result is 290 KB and a comparison of every
policy on a scale study's 8,000 jobs tens of MB."""
LEASE_LIMIT = 1 * MiB
"""A lease or a progress report: a few numbers that the runtime and a job write for each other."""
DEFAULT_LIMIT = 16 * MiB
"""Any other input: a policy's source file, a service's endpoint file."""


def read_bytes(path: str | Path, what: str, limit: int = DEFAULT_LIMIT) -> bytes:
    """The bytes of `path` (a `what`, e.g. "trace file", of at most `limit` bytes), or an InputError saying why
    not. The file is looked at before it is opened and opened without blocking, so a FIFO or a device is refused,
    never read."""
    try:
        _require_regular(os.stat(path), path, what)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError(f"{what} not found", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", path=path) from None
    try:
        info = os.fstat(fd)
        _require_regular(info, path, what)  # swapped for something else since it was looked at
        if info.st_size > limit:
            raise _too_large(path, what, limit)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # the size stat gives is not trusted: a file may grow, and /proc's say 0
            chunk = os.read(fd, min(MiB, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", path=path) from None
    finally:
        os.close(fd)
    if size > limit:
        raise _too_large(path, what, limit)
    return b"".join(chunks)


def _require_regular(info: os.stat_result, path: str | Path, what: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"expected a {what}, found a folder", path=path)
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"expected a {what}, found {_kind(info.st_mode)}: only regular files are read", path=path)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    return "a socket" if stat.S_ISSOCK(mode) else "a device"


def _too_large(path: str | Path, what: str, limit: int) -> InputError:
    return InputError(f"{what} is larger than {limit / MiB:g} MiB: not read (is it the right file?)", path=path)


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


def read_text(path: str | Path, what: str, limit: int = DEFAULT_LIMIT) -> str:
    """The UTF-8 text of `path` (a `what`, e.g. "trace file", of at most `limit` bytes), or an InputError naming the
    file (and line)."""
    return decode(read_bytes(path, what, limit), path, what)
