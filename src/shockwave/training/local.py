"""Run one lease of a job on this machine, without Ray: for profiling workloads and for testing the job side.

Each gang member gets its own lease folder (as on a cluster, where members sit on different nodes) and the same
environment the runtime sets; rank 0's folder holds the progress report and the checkpoint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shockwave.training import lease as client

TRAIN = [sys.executable, "-m", "shockwave.training.train"]


@dataclass(frozen=True)
class LeaseRun:
    codes: list[int]
    """Exit code of each member."""
    progress: dict[str, Any]
    """Rank 0's last progress report."""
    output: str
    """The end of rank 0's output and of every member's that failed (for error messages)."""

    def rate(self) -> float | None:
        """Steps per second once training started (start-up excluded)."""
        p = self.progress
        return client.steps_per_second(p.get("step"), p.get("start_step"), p.get("first_step_at"), p.get("time"))


def run_lease(
    command: list[str],
    terms: client.Terms,
    world: int,
    folder: Path,
    checkpoint: Path | None = None,
    timeout: float = 300,
    window: float | None = None,
) -> LeaseRun:
    """Start `world` members of `command` under `terms`, wait for all to exit; rank 0's checkpoint ends up in
    `folder/rank-0/checkpoint.pt` (seeded from `checkpoint` when given). With `window`, the lease is cut short to
    end `window` seconds after the first step, however long the start-up took."""
    master = ("127.0.0.1", client.free_port("127.0.0.1"))
    processes = []
    for rank in range(world):
        member = folder / f"rank-{rank}"
        member.mkdir(parents=True, exist_ok=True)
        (member / client.PROGRESS_FILE).unlink(missing_ok=True)
        target = member / "checkpoint.pt"
        if checkpoint is not None and checkpoint.resolve() != target.resolve():
            shutil.copyfile(checkpoint, target)
        replace(terms, checkpoint=str(target)).write(member)
        env = {**os.environ, **client.member_environment(member, terms.job_id, rank, world, master)}
        log = (member / "output.log").open("wb")
        processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT))
        log.close()
    give_up = time.monotonic() + timeout
    try:
        if window is not None:
            _cut_short(folder, world, processes, window, give_up)
        codes = [p.wait(timeout=max(0.1, give_up - time.monotonic())) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    rank0 = folder / "rank-0"
    shown = [rank for rank, code in enumerate(codes) if rank == 0 or code != 0]
    output = "\n".join(_tail(folder, rank, len(shown) > 1) for rank in shown)
    return LeaseRun(codes, client.read_progress(rank0) or {}, output)


def _tail(folder: Path, rank: int, titled: bool) -> str:
    text = (folder / f"rank-{rank}" / "output.log").read_text(errors="replace")[-2000:]
    return f"-- rank {rank} --\n{text}" if titled else text


def _cut_short(folder: Path, world: int, processes: list[subprocess.Popen], window: float, give_up: float) -> None:
    """Once rank 0 reports its first step, move every member's deadline to `window` seconds after it."""
    while time.monotonic() < give_up and any(p.poll() is None for p in processes):
        first = (client.read_progress(folder / "rank-0") or {}).get("first_step_at")
        if first is not None:
            for rank in range(world):
                member = folder / f"rank-{rank}"
                replace(client.Terms.read(member), deadline=first + window).write(member)
            return
        time.sleep(0.05)
