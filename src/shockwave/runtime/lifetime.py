"""Processes we start die with us, even when we are killed with SIGKILL (which no handler of ours can see).

Two tools, both Linux-only (elsewhere they do nothing):
- `die_with_parent()`, run in a child, asks the kernel to SIGKILL it when its parent dies (prctl PR_SET_PDEATHSIG):
  for the processes we start ourselves (pool workers, job members).
- `Reaper`, for process trees someone else starts for us (a local Ray instance): a small watchdog process, which holds
  a pipe only we write to, kills them once that pipe closes, that is once we have exited, however we exited. It finds
  them by a mark in their environment (inherited by everything started while the Reaper marks ours), by the pids we
  tell it, and as descendants of either (a process whose parent died is adopted by init: the tree alone is lost).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
"""Looked up once, here: `die_with_parent` also runs between fork and exec, where loading a library is unsafe."""
MARK = "SHOCKWAVE_OWNER"
"""Environment variable carrying a Reaper's mark."""
REAP_ROUNDS = 5
"""Scans for marked processes after the owner exits (a process forking meanwhile is caught by the next scan)."""


def die_with_parent(parent: int | None = None) -> None:
    """Have the kernel SIGKILL the calling process when its parent exits.

    `parent`: the pid the caller's parent had when it started the caller; if the parent is already gone (it died
    before this call, so no signal will come), the caller is killed at once.
    """
    if _prctl is None:
        return
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def environment_variable(name: str, value: str) -> Iterator[None]:
    """`name=value` in this process's environment (inherited by what it starts) for the time of the block."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


class Reaper:
    """Kills, once this process has exited, the processes started inside `marking()`, those it was told of
    (`adopt`), and their descendants."""

    def __init__(self) -> None:
        self.mark = f"{os.getpid()}-{secrets.token_hex(8)}"
        self.watchdog: subprocess.Popen[bytes] | None = None
        if sys.platform.startswith("linux"):
            # Its own session: a Ctrl-C at the terminal must not stop it before it has done its work.
            self.watchdog = subprocess.Popen(
                [sys.executable, "-m", "shockwave.runtime.lifetime", self.mark],
                stdin=subprocess.PIPE,
                start_new_session=True,
                env={k: v for k, v in os.environ.items() if k != MARK},
            )

    def marking(self) -> contextlib.AbstractContextManager[None]:
        """Processes started meanwhile (and everything they start, whenever) carry the mark."""
        return environment_variable(MARK, self.mark)

    def adopt(self, pids: Iterable[int]) -> None:
        """Reap these too, found by pid and start time (a reused pid is spared): a process that renames itself
        (setproctitle) may overwrite the part of its environment the mark is in."""
        if self.watchdog is None or self.watchdog.stdin is None:
            return
        table = processes()
        self.watchdog.stdin.write("".join(f"{pid} {table[pid][STARTED]}\n" for pid in pids if pid in table).encode())
        self.watchdog.stdin.flush()

    def close(self, timeout: float = 30.0) -> None:
        """Reap now (what a clean shutdown left behind) and wait for the watchdog to finish."""
        if self.watchdog is not None and self.watchdog.stdin is not None:
            self.watchdog.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.watchdog.wait(timeout)


PARENT, STARTED = 1, 19
"""Indices in a process's /proc/PID/stat fields after its name: parent pid, start time (clock ticks after boot)."""


def processes() -> dict[int, list[str]]:
    """Every process's /proc/PID/stat fields after its name (which may hold spaces and parentheses); none without
    /proc (not Linux)."""
    table: dict[int, list[str]] = {}
    if not Path("/proc/self/stat").exists():
        return table
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                table[int(entry.name)] = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    return table


def descendants(roots: Iterable[int], table: dict[int, list[str]] | None = None) -> set[int]:
    """The processes below `roots` (not the roots themselves)."""
    children: dict[int, list[int]] = {}
    for pid, fields in (processes() if table is None else table).items():
        children.setdefault(int(fields[PARENT]), []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _victims(mark: str, adopted: set[tuple[int, str]]) -> set[int]:
    table = processes()
    needle = f"{MARK}={mark}".encode()
    roots = {pid for pid, started in adopted if pid in table and table[pid][STARTED] == started}
    for pid in table:
        with contextlib.suppress(OSError):  # not ours to read, or gone
            if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                roots.add(pid)
    alive = {pid for pid in roots | descendants(roots, table) if table[pid][0] != "Z"}
    return alive - {os.getpid()}


def _watch(mark: str) -> None:
    """The watchdog: learn what to reap until the owner's pipe closes, then kill it all."""
    adopted = set()
    for line in sys.stdin.buffer:
        pid, started = line.decode().split()
        adopted.add((int(pid), started))
    for _ in range(REAP_ROUNDS):
        victims = _victims(mark, adopted)
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


if __name__ == "__main__":
    _watch(sys.argv[1])
