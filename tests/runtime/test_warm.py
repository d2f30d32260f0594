"""Members started warm (forked from a zygote with PyTorch imported) behave as the same command started cold: the same
argv, sys.path[0], folder, environment, exit code and exit-time behaviour; kills reach only live children; a member
whose zygote dies dies with it and reads as killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require_module
from processes import alive, wait_until

require_module("torch", "the warm zygote imports PyTorch: pip install torch==2.13.0")

from shockwave.runtime.warm import KILLED, Launcher, Member, warm_target  # noqa: E402

PROBE = """
import atexit, json, os, sys, threading, time
def at_exit():
    print("atexit ran", flush=True)
atexit.register(at_exit)
def late():
    time.sleep(0.2)
    print("thread joined", flush=True)
threading.Thread(target=late).start()  # not a daemon: the interpreter waits for it
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "name": __name__,
                  "env": os.environ.get("PROBE_ENV"), "main": sys.modules["__main__"].__name__}), flush=True)
code = os.environ.get("PROBE_EXIT")
if code == "raise":
    raise ValueError("probe failed")
if code is not None:
    sys.exit(int(code) if code.lstrip("-").isdigit() else code)
"""


@pytest.fixture(scope="module")
def launcher() -> Iterator[Launcher]:
    warm = Launcher()
    assert warm.warm_up(120)
    yield warm
    warm._give_up()


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "probe.py").write_text(PROBE)
    (tmp_path / "probe.py").write_text(PROBE)
    return tmp_path


def wait(member: Member, timeout: float = 60) -> int:
    assert wait_until(lambda: member.poll() is not None, timeout=timeout, poll=0.01)
    code = member.poll()
    assert code is not None
    return code


def both(launcher: Launcher, command: list[str], folder: Path, env: dict[str, str]) -> list[tuple[int, str]]:
    """(exit code, output) of `command` started warm and started cold, in `folder`."""
    outcomes = []
    for name, start in (("warm", launcher.start), ("cold", None)):
        log = folder / f"{name}.log"
        if start is None:
            with log.open("wb") as out:
                code = subprocess.run(command, env=env, cwd=folder, stdout=out, stderr=subprocess.STDOUT).returncode
        else:
            member = start(command, env, folder, log)
            assert member.warm
            code = wait(member)
        outcomes.append((code, log.read_text()))
    return outcomes


@pytest.mark.parametrize("form", ["module", "script", "code"])
@pytest.mark.parametrize("exit_as", [None, "3", "a message", "raise"])
def test_a_warm_member_runs_and_exits_as_the_cold_command(
    launcher: Launcher, probe: Path, form: str, exit_as: str | None
) -> None:
    command = {
        "module": [sys.executable, "-m", "pkg.probe", "a", "b"],
        "script": [sys.executable, str(probe / "probe.py"), "a", "b"],
        "code": [sys.executable, "-c", PROBE, "a", "b"],
    }[form]
    env = {**os.environ, "PROBE_ENV": "seen", **({"PROBE_EXIT": exit_as} if exit_as is not None else {})}
    (warm_code, warm_out), (cold_code, cold_out) = both(launcher, command, probe, env)
    assert warm_code == cold_code == {None: 0, "3": 3, "a message": 1, "raise": 1}[exit_as]
    first = lambda text: text.splitlines()[0]  # noqa: E731
    assert first(warm_out) == first(cold_out)  # argv, sys.path[0], folder, __name__, environment, __main__
    for line in ("thread joined", "atexit ran"):  # the interpreter's exit: threads joined, then atexit
        assert line in warm_out and line in cold_out, (warm_out, cold_out)
    if exit_as == "a message":
        assert "a message" in warm_out
    if exit_as == "raise":
        assert "ValueError: probe failed" in warm_out


def test_other_commands_start_cold(launcher: Launcher, tmp_path: Path) -> None:
    assert warm_target(["sh", "-c", "exit 4"]) is None
    assert warm_target([sys.executable, "-u", "-m", "pkg"]) is None  # interpreter options: cold, to be exact
    member = launcher.start(["sh", "-c", "echo cold; exit 4"], dict(os.environ), tmp_path, tmp_path / "out.log")
    assert not member.warm and wait(member) == 4 and "cold" in (tmp_path / "out.log").read_text()


def test_a_kill_reaches_a_live_member_only(launcher: Launcher, tmp_path: Path) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    member = launcher.start(sleeper, dict(os.environ), tmp_path, tmp_path / "out.log")
    assert member.warm and member.poll() is None
    member.kill()
    assert member.poll() == KILLED and not alive(member.pid)
    assert not launcher.kill(member.pid)  # reaped: its pid is nobody the zygote may signal any more
    assert not launcher.kill(os.getpid())  # never one that is not its child


def test_a_member_dies_with_its_zygote_and_reads_as_killed(tmp_path: Path) -> None:
    own = Launcher()
    assert own.warm_up(120)
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    member = own.start(sleeper, dict(os.environ), tmp_path, tmp_path / "out.log")
    os.kill(own.zygote.pid, signal.SIGKILL)
    own.zygote.wait()
    assert wait_until(lambda: not alive(member.pid), timeout=10, poll=0.05)
    assert member.poll() == KILLED
    later = own.start([*sleeper[:2], "pass"], dict(os.environ), tmp_path, tmp_path / "cold.log")
    assert not later.warm and wait(later) == 0  # cold from then on
