"""Gang members started warm: forked from a process that has already imported the training stack.

A member process that starts cold spends 3-4 s importing PyTorch (four at once on two cores: 8-12 s), most of a short
lease. Each GPU's worker therefore keeps a zygote: `python -P -m shockwave.runtime.warm`, started with the worker,
which imports `PRELOAD` once and then forks one child per member it is asked for. A member whose command runs this
interpreter on a module (`python -m pkg.train ...`), a script (`python train.py ...`) or code (`python -c ...`) is
such a child: it runs that module, script or code as `__main__`, with the arguments, `sys.path[0]`, environment,
working folder and output the command would have had, and exits as that interpreter would (atexit handlers, threads
joined). Any other command (another interpreter, interpreter options, a shell script, a binary) starts cold, as a
subprocess, and so does every command when the zygote is not there.

The zygote takes requests only on its standard input, a pipe only its worker holds, and answers each on its standard
output: a member's pid, or whether a kill reached one of its children (it signals only children it has not reaped,
so a pid the system gave to another process since is never signalled). It writes each child's exit code beside the
child's output once it has reaped it. It dies with its worker and its children with it (Linux parent-death
signal); a member whose zygote is gone reads as killed. Nothing here decides what runs: the command is the
operator's (or a token holder's submission), exactly as the cold path would run it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import logging
import os
import runpy
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shockwave.io.atomic import write_atomically
from shockwave.runtime.lifetime import die_with_parent

log = logging.getLogger(__name__)
PRELOAD = (
    "torch",
    "torch.nn",
    "torch.optim",
    "torch._dynamo",  # what a torch.optim optimizer imports when it is first built: 1.5 s
    "torch.distributed",
    "shockwave.training.lease",
    "shockwave.training.adaptive",
    "shockwave.workload_model.catalog",
)
"""Imported once per GPU worker, before any lease: what the built-in workload (and most PyTorch jobs) import first.
Only imports: nothing that starts a thread (a fork copies no threads, and a thread pool's state would be stale)."""
REAP_EVERY_S = 0.02
ANSWER_S = 30.0
"""How long a worker waits for its zygote's answer before it gives the zygote up and starts members cold."""
KILL_WAIT_S = 5.0
KILLED = -signal.SIGKILL
"""The exit code of a member whose zygote died (it died with it)."""


def warm_target(command: list[str]) -> dict[str, Any] | None:
    """What `command` runs with this interpreter (`{"module" | "script" | "code": ..., "argv": [...]}`), or None when
    it cannot run warm: another program, another interpreter, or interpreter options before the module."""
    if len(command) < 2:
        return None
    found = shutil.which(command[0])
    if found is None or os.path.realpath(found) != os.path.realpath(sys.executable):
        return None
    if command[1] == "-m" and len(command) >= 3:
        return {"module": command[2], "argv": [command[2], *command[3:]]}
    if command[1] == "-c" and len(command) >= 3:
        return {"code": command[2], "argv": ["-c", *command[3:]]}
    if command[1].endswith(".py") and not command[1].startswith("-"):
        return {"script": command[1], "argv": command[1:]}
    return None


class Member:
    """A member process, warm (a zygote's child) or cold (a subprocess): its pid, exit code and kill, alike."""

    def __init__(
        self,
        pid: int,
        *,
        exit_file: Path | None = None,
        launcher: Launcher | None = None,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.pid, self.exit_file, self.launcher, self.process = pid, exit_file, launcher, process

    @property
    def warm(self) -> bool:
        return self.process is None

    def poll(self) -> int | None:
        if self.process is not None:
            return self.process.poll()
        try:
            return int(self.exit_file.read_text()) if self.exit_file is not None else None
        except (OSError, ValueError):
            if self.launcher is None or not self.launcher.alive():
                return KILLED  # its zygote is gone, and it went with it
            return None

    def kill(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            return
        if self.poll() is None and self.launcher is not None and self.launcher.kill(self.pid):
            give_up = time.monotonic() + KILL_WAIT_S  # the zygote reaps it and writes its code within REAP_EVERY_S
            while self.poll() is None and time.monotonic() < give_up:
                time.sleep(REAP_EVERY_S)


class Launcher:
    """Starts a GPU worker's members: warm from its zygote where the command allows, cold otherwise."""

    def __init__(self) -> None:
        self.zygote = subprocess.Popen(
            [sys.executable, "-P", "-m", "shockwave.runtime.warm"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=die_with_parent,
        )
        self.ready = False
        self.started = 0
        """Members started warm so far: each one's exit file has its own name."""

    def alive(self) -> bool:
        return self.zygote.poll() is None

    def warm_up(self, timeout_s: float) -> bool:
        """Wait until the zygote has imported PRELOAD (seconds, once per worker); False if it could not."""
        if not self.ready:
            answer = self._answer(timeout_s)
            self.ready = answer is not None and answer.get("ready") is True
            if not self.ready:
                self._give_up()
        return self.ready

    def start(self, command: list[str], environment: Mapping[str, str], folder: Path, log_path: Path) -> Member:
        target = warm_target(command)
        if target is not None and self.ready and self.alive():
            self.started += 1
            exit_file = log_path.parent / f"exit_code.{self.started}"
            request = {**target, "env": dict(environment), "cwd": str(folder), "log": str(log_path)}
            answer = self._ask(request, exit_file)
            if answer is not None and "pid" in answer:
                return Member(int(answer["pid"]), exit_file=exit_file, launcher=self)
            log.warning("the warm zygote did not start a member (%s): it starts cold from now on", answer)
            self._give_up()
        with log_path.open("ab") as output:
            process = subprocess.Popen(
                command,
                env=dict(environment),
                cwd=folder,
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        return Member(process.pid, process=process)

    def kill(self, pid: int) -> bool:
        """SIGKILL the zygote's child `pid` if it has not been reaped; whether it was signalled."""
        answer = self._ask({"kill": pid}) if self.alive() else None
        return bool(answer and answer.get("killed"))

    def _ask(self, request: dict[str, Any], exit_file: Path | None = None) -> dict[str, Any] | None:
        if exit_file is not None:
            request = {**request, "exit": str(exit_file)}
        try:
            assert self.zygote.stdin is not None
            self.zygote.stdin.write(json.dumps(request).encode() + b"\n")
            self.zygote.stdin.flush()
        except OSError:
            return None
        return self._answer(ANSWER_S)

    def _answer(self, timeout_s: float) -> dict[str, Any] | None:
        """The zygote's next answer line, or None when it sends none in time (or is gone)."""
        assert self.zygote.stdout is not None
        ready, _, _ = select.select([self.zygote.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = self.zygote.stdout.readline()
        try:
            answer = json.loads(line) if line else None
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None

    def _give_up(self) -> None:
        """A zygote that does not answer is killed (its members with it); members start cold from now on."""
        self.ready = False
        if self.alive():
            self.zygote.kill()
            self.zygote.wait()


# -- the zygote's side -----------------------------------------------------------------------------------------------
def _serve() -> None:
    """Import PRELOAD, say so, then serve requests until the worker closes the pipe (a forked member never returns
    here: `_run_member` exits)."""
    die_with_parent()
    for name in PRELOAD:
        importlib.import_module(name)
    _say({"ready": True})
    children: dict[int, str] = {}
    pending = b""
    while True:
        readable, _, _ = select.select([0], [], [], REAP_EVERY_S)
        _reap(children)
        if not readable:
            continue
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return  # the worker is gone: so are we, and our children with us
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            if "kill" in request:
                _say({"killed": _kill(children, int(request["kill"]))})
                continue
            zygote = os.getpid()
            try:
                pid = os.fork()
            except OSError as exc:
                _say({"error": f"fork: {exc}"})
                continue
            if pid == 0:
                _run_member(request, zygote)  # exits: the member never returns here
            children[pid] = request["exit"]
            _say({"pid": pid})


def _say(answer: dict[str, Any]) -> None:
    os.write(1, json.dumps(answer).encode() + b"\n")


def _kill(children: dict[int, str], pid: int) -> bool:
    if pid not in children:  # reaped already (its pid may be someone else's now) or never ours
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _reap(children: dict[int, str]) -> None:
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            exit_file = children.pop(pid)
            try:
                write_atomically(Path(exit_file), str(os.waitstatus_to_exitcode(status)))
            except OSError:
                traceback.print_exc()  # its worker reads it as killed once the zygote is gone; nothing else to do


def _run_member(request: dict[str, Any], zygote: int) -> None:
    """In the forked child: the command's environment, folder, `sys.path[0]` and output, then its module, script or
    code as `__main__`; then `_exit`."""
    code: int | str | None = 1
    try:
        die_with_parent(zygote)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        output = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit():
            sys.modules["torch"].set_num_threads(int(threads))  # torch read it when imported: set it again here
        sys.argv = list(request["argv"])
        if "module" in request:
            sys.path.insert(0, os.getcwd())  # as `python -m` does
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        elif "script" in request:
            sys.path.insert(0, os.path.dirname(os.path.abspath(request["script"])))  # as `python script.py` does
            runpy.run_path(request["script"], run_name="__main__")
        else:
            sys.path.insert(0, "")  # as `python -c` does
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(request["code"], "<string>", "exec"), main.__dict__)  # the operator's `-c` code
        code = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    _exit(code)


def _exit(code: int | str | None) -> None:
    """Leave as the command's interpreter would, without finalising the zygote's modules (PyTorch's take about 2 s,
    which a preempted lease's successor would wait for): join non-daemon threads and run atexit handlers as the
    interpreter does first (multiprocessing's children do the same), flush, and exit with the command's status."""
    status = code if isinstance(code, int) else (0 if code is None else 1)
    try:
        if not isinstance(code, int | None):
            print(code, file=sys.stderr)
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)


if __name__ == "__main__":
    _serve()
