"""The job side of a shockwave lease: what a training script needs, without Ray or any scheduler import.

The runtime starts the script with `SHOCKWAVE_LEASE_DIR` set to a folder on the job's node. There the runtime keeps
`lease.json` (until when and up to which step the job may run, at which batch size, where its checkpoint lives) and
the job keeps `progress.json` (steps done, its process id, a batch-size request). A training loop looks like:

    lease = shockwave.training.lease.current()
    state = load(lease.checkpoint_path) if lease.checkpoint_path.exists() else fresh(lease.batch_size)
    start = state.step if state.batch_size == lease.batch_size else lease.resume_step
    for step in lease.steps(start=start):
        train_one_step(...)
        if (step + 1) % lease.epoch_steps == 0 and wants_other_batch_size():
            save(lease.checkpoint_path, step + 1)
            lease.request_batch_size(new_batch_size)   # the loop ends; the scheduler restarts the job with it
        elif lease.checkpoint_due():
            save(lease.checkpoint_path, step + 1)
    save(lease.checkpoint_path, lease.step)         # the lease ended: on time, on budget, or the job is done

`steps()` ends when the lease's deadline passes, its step budget is used, the job's total is reached, or the job
asked for another batch size (`request_batch_size`); the runtime extends a lease by rewriting lease.json, which the
loop notices at its next step. Gang members (`rank`, `world_size`) pass `agree` so they all stop at the same step.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically
from shockwave.io.text import LEASE_LIMIT, read_text

LEASE_DIR_ENV = "SHOCKWAVE_LEASE_DIR"
LEASE_FILE = "lease.json"
PROGRESS_FILE = "progress.json"
CHECKPOINT_EVERY_S = 2.0
"""How often `checkpoint_due` says yes: bounds the work a crash loses."""


class LeaseError(RuntimeError):
    """The process was not started by the shockwave runtime, or its lease folder is unreadable."""


@dataclass(frozen=True)
class Terms:
    """What the runtime granted; rewritten by the runtime to extend or end the lease."""

    job_id: int
    deadline: float
    """Wall-clock time (time.time()) at which the job must stop."""
    max_steps: int
    """Global step count at which the job must stop in this lease."""
    total_steps: int
    """The job's whole budget at its current batch size: reaching it completes the job."""
    batch_size: int
    checkpoint: str
    resume_step: int = 0
    """Where the job stands at `batch_size` as the scheduler counts it: a job whose checkpoint was taken at another
    batch size goes on from here (the scheduler converted its progress, keeping the epochs it has done)."""
    epoch_steps: int = 2**62
    """Steps per epoch at `batch_size`, as the scheduler counts epochs: adaptive jobs decide at epoch boundaries."""

    @classmethod
    def read(cls, folder: Path) -> Terms:
        try:
            raw = json.loads(read_text(folder / LEASE_FILE, "lease file", LEASE_LIMIT))
            return cls(**{key: raw[key] for key in cls.__dataclass_fields__ if key in raw})
        except (InputError, ValueError, KeyError, TypeError) as exc:
            raise LeaseError(f"cannot read the lease in {folder}: {exc}") from None

    def write(self, folder: Path) -> None:
        write_atomically(folder / LEASE_FILE, json.dumps(self.__dict__))


class Lease:
    def __init__(self, folder: Path, rank: int = 0, world_size: int = 1) -> None:
        self.folder = folder
        self.rank, self.world_size = rank, world_size
        self.terms = Terms.read(folder)
        self._seen = self._mtime()
        self.step = 0
        self.requested_batch_size: int | None = None
        self.checkpoint_step: int | None = None
        self._last_checkpoint = time.monotonic()
        self._last_report = 0.0
        self.started = time.time()
        self.start_step = 0
        self.first_step_at: float | None = None

    # -- what the job is told -------------------------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return self.terms.batch_size

    @property
    def total_steps(self) -> int:
        return self.terms.total_steps

    @property
    def resume_step(self) -> int:
        return self.terms.resume_step

    @property
    def epoch_steps(self) -> int:
        return self.terms.epoch_steps

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.terms.checkpoint)

    # -- the loop ---------------------------------------------------------------------------------------------------
    def steps(self, start: int = 0, agree: Callable[[bool], bool] | None = None) -> Iterator[int]:
        """Global step indices from `start` until the lease ends; progress is reported as the loop goes."""
        self.step = self.start_step = start
        self.report()
        while True:
            stop = self._should_stop()
            if agree is not None:
                stop = agree(stop)
            if stop:
                break
            if self.first_step_at is None:
                self.first_step_at = time.time()
            yield self.step
            self.step += 1
            if time.monotonic() - self._last_report > 0.2:
                self.report()
        self.report()

    def _should_stop(self) -> bool:
        mtime = self._mtime()
        if mtime != self._seen:
            self._seen = mtime
            self.terms = Terms.read(self.folder)
        return (
            self.step >= min(self.terms.max_steps, self.terms.total_steps)
            or time.time() >= self.terms.deadline
            or self.requested_batch_size is not None
        )

    def checkpoint_due(self) -> bool:
        if time.monotonic() - self._last_checkpoint >= CHECKPOINT_EVERY_S:
            self._last_checkpoint = time.monotonic()
            return True
        return False

    def checkpointed(self, step: int) -> None:
        """Tell the runtime a checkpoint at `step` is complete at checkpoint_path (it collects it from there)."""
        self.checkpoint_step = step
        self.report()

    def request_batch_size(self, batch_size: int) -> None:
        """Ask for another batch size: the lease ends at the next step; the runtime resumes the job with it."""
        self.requested_batch_size = batch_size
        self.report()

    @property
    def done(self) -> bool:
        return self.step >= self.terms.total_steps

    def report(self, **extra: Any) -> None:
        self._last_report = time.monotonic()
        if self.rank != 0:
            return
        progress = {
            "step": self.step,
            "pid": os.getpid(),
            "time": time.time(),
            "started": self.started,
            "requested_batch_size": self.requested_batch_size,
            "done": self.done,
            "checkpoint_step": self.checkpoint_step,
            "start_step": self.start_step,
            "first_step_at": self.first_step_at,
            **extra,
        }
        write_atomically(self.folder / PROGRESS_FILE, json.dumps(progress))

    def _mtime(self) -> int:
        try:
            return (self.folder / LEASE_FILE).stat().st_mtime_ns
        except OSError:
            return 0


def steps_per_second(
    step: int | None, start_step: int | None, first_step_at: float | None, reported_at: float | None
) -> float | None:
    """A lease's training rate as its progress reports show it: start-up and checkpoint loading excluded."""
    if step is None or start_step is None or first_step_at is None or reported_at is None:
        return None
    steps, seconds = step - start_step, reported_at - first_step_at
    return steps / seconds if steps > 0 and seconds > 0 else None


def free_port(host: str = "") -> int:
    """A TCP port free now on this node, for a gang's rendezvous."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def member_environment(
    folder: Path, job_id: int, rank: int, world_size: int, master: tuple[str, int]
) -> dict[str, str]:
    """What the runtime sets for one gang member (on top of its own environment)."""
    return {
        LEASE_DIR_ENV: str(folder),
        "SHOCKWAVE_JOB_ID": str(job_id),
        "SHOCKWAVE_RANK": str(rank),
        "SHOCKWAVE_WORLD_SIZE": str(world_size),
        "SHOCKWAVE_MASTER_ADDR": master[0],
        "SHOCKWAVE_MASTER_PORT": str(master[1]),
        "OMP_NUM_THREADS": "1",
    }


def current() -> Lease:
    """The lease of this process, from the environment the runtime set."""
    folder = os.environ.get(LEASE_DIR_ENV)
    if not folder:
        raise LeaseError(f"{LEASE_DIR_ENV} is not set: this script must be started by `shockwave run`")
    return Lease(
        Path(folder), int(os.environ.get("SHOCKWAVE_RANK", "0")), int(os.environ.get("SHOCKWAVE_WORLD_SIZE", "1"))
    )


def read_progress(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads(read_text(folder / PROGRESS_FILE, "progress file", LEASE_LIMIT))
    except (InputError, ValueError):
        return None
