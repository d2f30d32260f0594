"""Small traces for runtime tests: more work than 4 GPUs hold at once, gangs of 1, 2 and 4."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from shockwave.core.clock import Clock
from shockwave.runtime.backend import Launch
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.workload_model.throughput import TableThroughputs, load_throughputs
from shockwave.workload_model.trace import catalog_job, write_trace

Row = tuple[str, int, int, int, float]
"""(model, batch size, gang, steps, arrival s)."""

JOBS: list[Row] = [
    ("ResNet-18", 32, 1, 800, 0.0),
    ("LM", 20, 2, 800, 0.0),
    ("Recommendation", 2048, 1, 1500, 1.0),
    ("ResNet-18", 64, 4, 300, 2.0),
    ("Transformer", 32, 1, 400, 2.0),
    ("LM", 10, 1, 1000, 3.0),
    ("ResNet-50", 32, 2, 250, 4.0),
    ("Recommendation", 1024, 1, 1500, 5.0),
]
"""About 5-10 s of training each on a shared 2-core machine, all arriving in the first seconds."""

PREEMPTING_JOBS: list[Row] = [
    ("ResNet-18", 32, 1, 18000, 0.0),
    ("LM", 20, 2, 12000, 0.0),
    ("Recommendation", 2048, 1, 30000, 1.0),
    ("ResNet-18", 64, 4, 300, 18.0),
    ("Transformer", 32, 1, 400, 18.0),
    ("ResNet-50", 32, 2, 250, 20.0),
]
"""Real jobs take 5-16 s (up to 30 s on a loaded machine) to start, so jobs as JOBS' can run to completion
in one lease. Here three long jobs fill the 4 GPUs and are training, with checkpoints, when three more arrive at
18-20 s (one a gang of all 4 GPUs): a fair policy must take GPUs from jobs with progress, which later resume from it.
The long jobs need 34-51 s of training on the fastest machine seen (2026-11-27: ResNet-18 at 528 steps/s, LM at 234,
Recommendation at 885, three sharing 2 cores), so they are still running at the first round boundary after the
arrivals (24 s) however fast the machine is: 7,500 / 5,000 / 12,500 steps finished at 14-22 s there, and no job was
preempted (3,000 steps once let one finish before the arrivals on a fast CI runner)."""
PREEMPTING_ROUND = "8"
"""Rounds twice the other runtime tests': fewer leases lost to start-up, the same preemptions and resumes."""


def write_runtime_trace(path: Path, jobs: list[Row] = JOBS) -> Path:
    write_trace([catalog_job(m, bs, gang, steps, "static", arrival) for m, bs, gang, steps, arrival in jobs], path)
    return path


TYPED_JOBS: list[Row] = [
    ("ResNet-18", 32, 1, 800, 0.0),
    ("LM", 20, 2, 800, 0.0),
    ("Transformer", 32, 1, 400, 1.0),
    ("Recommendation", 2048, 1, 1500, 1.0),
    ("LM", 10, 1, 1000, 2.0),
]
"""Gangs of 1 and 2 only, for clusters of 2 GPUs per type; 6 GPUs of gangs on 4 GPUs."""

K80_SPEED = {"ResNet-18": 0.3, "ResNet-50": 0.3, "Transformer": 0.4, "LM": 0.6, "Recommendation": 0.9}
"""A job's K80 rate as a fraction of its V100 rate: types differ, and by how much differs by model."""


def builtin_rates(jobs: list[Row]) -> dict[tuple[str, int, int], float]:
    """(model, batch size, gang) -> the built-in model's (V100) rate, for each job of `jobs`."""
    builtin = load_throughputs(None)
    return {(model, bs, gang): builtin.throughput(model, bs, gang) for model, bs, gang, _, _ in jobs}


def write_typed_throughputs(path: Path, jobs: list[Row]) -> Path:
    """A V100 and K80 throughput table for `jobs`: the built-in model's V100 rates, K80 ones `K80_SPEED` of them."""
    table = {}
    for (model, bs, gang), rate in builtin_rates(jobs).items():
        table[("v100", model, bs, gang)] = rate
        table[("k80", model, bs, gang)] = rate * K80_SPEED[model]
    path.write_text(json.dumps(TableThroughputs(table, "typed").to_json()))
    return path


PAIR_JOBS: list[Row] = [
    ("ResNet-18", 32, 1, 800, 0.0),
    ("Transformer", 32, 1, 400, 0.0),
    ("LM", 10, 1, 1000, 0.0),
    ("Recommendation", 2048, 1, 1500, 0.0),
]
"""Four 1-GPU jobs at once, for 2 GPUs: packing pays (two pairs run four jobs at 1.2 jobs' worth per GPU)."""

PAIR_SPEED = 0.6
"""Each job's rate sharing GPUs with any other, as a fraction of its rate alone (two of them: 1.2 jobs' worth)."""


def write_pair_throughputs(path: Path, jobs: list[Row]) -> Path:
    """A one-type (v100) table for `jobs`: the built-in model's rates alone, and every two jobs of the same gang
    (either one first, the same job twice included) sharing GPUs at `PAIR_SPEED` of their rates alone."""
    alone = builtin_rates(jobs)
    table = TableThroughputs({("v100", *key): rate for key, rate in alone.items()}, "pairs").to_json()
    for (model, bs, gang), rate in alone.items():
        entry = table["v100"][str((f"{model} (batch size {bs})", gang))]
        for (other, other_bs, other_gang), other_rate in alone.items():
            if other_gang == gang:
                key = str((f"{other} (batch size {other_bs})", gang))
                entry[key] = [rate * PAIR_SPEED, other_rate * PAIR_SPEED]
    path.write_text(json.dumps(table))
    return path


class DyingScheduler(FakeBackend):
    """The fake cluster at `steps_per_s`, where the scheduler "dies" (an exception out of the backend) at the first
    start after `jobs` jobs completed."""

    def __init__(self, gpus: int, jobs: int, clock: Clock, steps_per_s: float = 400.0) -> None:
        super().__init__(gpus, steps_per_s=steps_per_s, clock=clock)
        self.until, self.completed = jobs, 0

    def release(self, job_id: int) -> None:
        if self.gangs[job_id].launch.total_steps <= self._step(self.gangs[job_id], self.clock.now()):
            self.completed += 1
        super().release(job_id)

    def start(self, launch: Launch) -> bool:
        if self.completed >= self.until:
            raise KeyboardInterrupt
        return super().start(launch)


def journal_records(out: Path) -> dict[int, dict[str, Any]]:
    """The journal as the scheduler left it, read-only (never creating it)."""
    path = out / "journal.sqlite"
    if not path.exists():
        return {}
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return {i: json.loads(text) for i, text in db.execute("SELECT id, record FROM jobs")}
        finally:
            db.close()
    except sqlite3.Error:
        return {}
