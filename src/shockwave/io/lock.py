"""One writer per state folder: `run` and `serve` hold an exclusive lock on their folder while they work, so a second
scheduler on the same journal and queue (a `serve --resume` on a live service) is refused at once, naming the PID
that holds it.

The lock is `flock` on `DIR/lock`: the kernel drops it when its process ends, however it ends (kill -9 included),
so a crashed scheduler never leaves a stale lock behind. Nothing is decided by the PID written in the file; it is
only shown.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from shockwave.core.errors import InputError
from shockwave.io.private import FILE_MODE

LOCK_FILE = "lock"
PID_BYTES = 32
"""A PID is at most 7 digits on Linux: more is not read back."""


class FolderLock:
    """`with FolderLock(folder):` — the folder is this process's until the block ends."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / LOCK_FILE
        self.fd: int | None = None

    def __enter__(self) -> FolderLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        except OSError as exc:
            raise InputError(f"cannot lock the folder: {exc.strerror or exc}", path=self.path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, PID_BYTES, 0).decode("ascii", errors="replace").strip()
            os.close(fd)
            who = f"process {holder}" if holder.isdigit() else "another process"
            raise InputError(
                f"{who} is using this folder already (a scheduler writes its journal and queue alone): stop it "
                "first, or choose another folder",
                path=self.folder,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor releases the lock
            self.fd = None
