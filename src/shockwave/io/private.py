"""State folders and files that only their owner can read or change: a run's or a service's journal, queue,
checkpoints, copied inputs and job logs.

Job commands and tokens live in them, and what they hold decides which jobs run, so nobody but the operator may read
or write them: folders are created 0700 and files 0600, and a state folder someone else owns, or that others may
write to, is refused before anything is read from it (as ssh refuses a group-writable `authorized_keys`). Writes never
follow a symbolic link planted where a state file goes: a file is written beside it and renamed over it, and a file
opened to append or a database created is opened with `O_NOFOLLOW`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from shockwave.core.errors import InputError

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_folder(folder: Path, what: str = "state folder") -> Path:
    """`folder` (created 0700 with any missing parents when missing), refused unless it is a real folder that this
    user owns and nobody else may write to."""
    try:
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError as exc:
        raise InputError(f"cannot create the {what}: {exc.strerror or exc}", path=folder) from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise InputError(f"the {what} must be a folder, not a link or a file", path=folder)
    if info.st_uid != os.geteuid():
        raise InputError(
            f"the {what} belongs to another user (uid {info.st_uid}): its files could decide what runs", path=folder
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InputError(
            f"others may write to the {what} (mode {stat.filemode(info.st_mode)}), so they could change what it "
            f"holds: `chmod go-w {folder}`",
            path=folder,
        )
    return folder


def private_subfolder(folder: Path) -> Path:
    """A folder inside a private state folder (checkpoints, logs, inputs): created 0700, never a link."""
    try:
        folder.mkdir(mode=FOLDER_MODE, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the folder: {exc.strerror or exc}", path=folder) from None
    if folder.is_symlink() or not folder.is_dir():
        raise InputError("expected a folder of the state folder, found a link or a file", path=folder)
    return folder


def private_file(path: Path, what: str) -> Path:
    """`path` as a regular file only its owner may read and write: created empty (0600) when missing, made 0600
    when it exists; a link, a FIFO or a device in its place is refused (SQLite would open whatever is there)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        reason = "a link is never followed" if os.path.islink(path) else exc.strerror or str(exc)
        raise InputError(f"cannot open the {what}: {reason}", path=path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"the {what} must be a regular file", path=path)
        if stat.S_IMODE(info.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path


def append_private(path: Path, data: bytes) -> None:
    """Append `data` to `path` (created 0600), never through a link."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
