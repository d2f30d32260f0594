"""Gang members started warm: forked from a process that has already imported the training stack.

A member process that starts cold spends 3-4 s importing PyTorch (four at once on two cores: 8-12 s), most of a short
lease. Each GPU's worker therefore keeps a zygote: `python -m shockwave.runtime.warm`, started with the worker, which
imports `PRELOAD` once and then forks one child per member it is asked for. A member whose command runs this
interpreter on a module (`python -m pkg.train ...`) or a script (`python train.py ...`) is such a child: it runs that
module or script as `__main__`, with the arguments, environment, working folder and output the command would have
had. Any other command (another interpreter, a shell script, a binary) starts cold, as a subprocess.

The zygote takes requests only on its standard input, a pipe only its worker holds, and writes each child's exit code
beside the child's output when it reaps it. It dies with its worker and its children with it (Linux parent-death
signal). Nothing here decides what runs: the command is the operator's (or a token holder's submission), exactly as
the cold path would run it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import select
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shockwave.io.atomic import write_atomically
from shockwave.runtime.lifetime import die_with_parent

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
EXIT_FILE = "exit_code"
KILL_WAIT_S = 5.0


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

    def __init__(self, pid: int, exit_file: Path | None = None, process: subprocess.Popen[bytes] | None = None) -> None:
        self.pid, self.exit_file, self.process = pid, exit_file, process
        self.warm = process is None

    def poll(self) -> int | None:
        if self.process is not None:
            return self.process.poll()
        try:
            return int(self.exit_file.read_text()) if self.exit_file is not None else None
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            return
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            give_up = time.monotonic() + KILL_WAIT_S  # the zygote reaps it and writes its code within REAP_EVERY_S
            while self.poll() is None and time.monotonic() < give_up:
                time.sleep(REAP_EVERY_S)


class Launcher:
    """Starts a GPU worker's members: warm from its zygote where the command allows, cold otherwise."""

    def __init__(self) -> None:
        self.zygote = subprocess.Popen(
            [sys.executable, "-m", "shockwave.runtime.warm"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=die_with_parent,
        )
        self.ready = False

    def warm_up(self) -> bool:
        """Wait until the zygote has imported PRELOAD (seconds, once per worker); False if it could not."""
        if not self.ready and self.zygote.stdout is not None:
            self.ready = self.zygote.stdout.readline().strip() == b"ready"
        return self.ready

    def start(self, command: list[str], environment: Mapping[str, str], folder: Path, log_path: Path) -> Member:
        target = warm_target(command)
        if target is None or not self.warm_up() or self.zygote.poll() is not None:
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
        exit_file = log_path.parent / EXIT_FILE
        exit_file.unlink(missing_ok=True)
        request = {**target, "env": dict(environment), "cwd": str(folder), "log": str(log_path), "exit": str(exit_file)}
        assert self.zygote.stdin is not None and self.zygote.stdout is not None
        self.zygote.stdin.write(json.dumps(request).encode() + b"\n")
        self.zygote.stdin.flush()
        return Member(int(json.loads(self.zygote.stdout.readline())["pid"]), exit_file)

    def close(self) -> None:
        if self.zygote.poll() is None:
            self.zygote.kill()
            self.zygote.wait()


# -- the zygote's side -----------------------------------------------------------------------------------------------
def _serve() -> None:
    """Import PRELOAD, say so, then fork a member per request line until the worker closes the pipe."""
    die_with_parent()
    for name in PRELOAD:
        importlib.import_module(name)
    os.write(1, b"ready\n")
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
            pid = os.fork()
            if pid == 0:
                _run_member(request)  # never returns
            children[pid] = request["exit"]
            os.write(1, json.dumps({"pid": pid}).encode() + b"\n")


def _reap(children: dict[int, str]) -> None:
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            write_atomically(Path(children.pop(pid)), str(os.waitstatus_to_exitcode(status)))


def _run_member(request: dict[str, Any]) -> None:
    """In the forked child: the command's environment, folder and output, then its module or script as `__main__`."""
    code = 1
    try:
        die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit():
            sys.modules["torch"].set_num_threads(int(threads))  # torch read it when imported: set it again here
        sys.argv = list(request["argv"])
        if "module" in request:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        elif "script" in request:
            runpy.run_path(request["script"], run_name="__main__")
        else:
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})  # the operator's `-c` code
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


if __name__ == "__main__":
    _serve()
