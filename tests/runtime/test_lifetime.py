"""Nothing we start outlives us, even when we are killed with SIGKILL: pool workers, job processes, a local Ray."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from processes import alive, cmdline, descendants, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux's")


def python(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True)


def test_a_child_dies_with_its_parent_even_when_the_parent_is_killed() -> None:
    parent = python(
        """
        import os, subprocess, sys, time
        child = (
            "import os, sys, time; from shockwave.runtime.lifetime import die_with_parent; "
            "die_with_parent(int(sys.argv[1]));"
            "print('ready', os.getpid(), flush=True); time.sleep(600)"
        )
        subprocess.Popen([sys.executable, "-c", child, str(os.getpid())])
        time.sleep(600)
        """
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline().split()[1])  # the child has asked for the signal
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert wait_until(lambda: not alive(child), timeout=10), cmdline(child)


def test_a_child_whose_parent_is_already_gone_dies_at_once() -> None:
    orphan = subprocess.run(
        [
            sys.executable,
            "-c",
            "from shockwave.runtime.lifetime import die_with_parent; die_with_parent(-1); print('alive')",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert orphan.returncode == -signal.SIGKILL and orphan.stdout == ""


def test_a_reaper_kills_what_it_marked_or_adopted_once_its_owner_is_killed() -> None:
    """A process that left its parent's session (as Ray's do) is out of reach of any signal to the owner's group;
    the reaper still takes those started under its mark or adopted (and their children), and only those."""
    owner = python(
        """
        import subprocess, sys, time
        from shockwave.runtime.lifetime import Reaper
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        reaper = Reaper()
        with reaper.marking():
            marked = subprocess.Popen(sleeper, start_new_session=True)
        adopted = subprocess.Popen(sleeper, start_new_session=True)
        reaper.adopt([adopted.pid])
        unmarked = subprocess.Popen(sleeper, start_new_session=True)
        print(marked.pid, adopted.pid, unmarked.pid, reaper.watchdog.pid, flush=True)
        time.sleep(600)
        """
    )
    assert owner.stdout is not None
    marked, adopted, unmarked, watchdog = map(int, owner.stdout.readline().split())
    try:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert wait_until(lambda: not any(map(alive, (marked, adopted, watchdog))), timeout=10)
        assert alive(unmarked)
    finally:
        for pid in (marked, adopted, unmarked):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_a_sweep_killed_with_sigkill_leaves_no_process_behind(tmp_path: Path) -> None:
    """Its pool workers, and no manager or resource tracker lingering for minutes."""
    sweep = subprocess.Popen(
        [
            *(sys.executable, "-m", "shockwave", "-q", "sweep", "--generate", "jobs=300,lam=40", "--gpus", "8,16"),
            *("--policies", "gavel,themis", "--seeds", "0,1", "-j", "2", "--out", str(tmp_path / "sweep")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def workers() -> set[int]:
            return {pid for pid in descendants(sweep.pid) if "multiprocessing.spawn" in cmdline(pid)}

        assert wait_until(lambda: len(workers()) == 2, timeout=120), "the sweep never started its workers"
        left = descendants(sweep.pid)
    finally:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
    survivors = lambda: [pid for pid in left if alive(pid)]  # noqa: E731
    assert wait_until(lambda: not survivors(), timeout=30), [cmdline(pid) for pid in survivors()]
