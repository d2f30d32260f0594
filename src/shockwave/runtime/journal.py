"""The runtime's record across crashes: run settings and every job's state in SQLite, one transaction per round.

A scheduler killed at any point (kill -9 included) finds, on `--resume`, the state of the last completed round:
which jobs finished (and when), how far each other job got by its last checkpoint, where that checkpoint is, its
batch size, restarts and preemptions, and the scheduler's snapshot (`shockwave.runtime.snapshot`: what the policy has
learnt). Everything is JSON text: nothing read back is ever code. Checkpoints themselves are files next to the
journal.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shockwave.errors import InputError
from shockwave.workload_model.throughput import DEFAULT_GPU_TYPE

SETTLED = ("done", "failed", "cancelled")
"""A job's final statuses: it never runs again."""
SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory (id INTEGER PRIMARY KEY CHECK (id = 0), data TEXT NOT NULL);
"""


@dataclass
class JobRecord:
    id: int
    status: str = "pending"
    """pending (not arrived or not yet run), active (admitted), and the final ones (`SETTLED`): done, failed,
    cancelled (by the service's operator)."""
    steps: int = 0
    """Steps safely behind the job: those of its latest checkpoint (or the total once done)."""
    total_steps: int = 0
    batch_size: int = 0
    checkpoint: str | None = None
    finish_s: float | None = None
    restarts: int = 0
    preemptions: int = 0
    measured_throughput: float | None = None
    """Steps per second while training (start-up excluded), smoothed over leases (exponential average, 0.5)."""
    run_seconds_by_type: dict[str, float] = field(default_factory=dict)
    """Wall seconds the job held GPUs of each type (all its leases, start-up and checkpointing included, a finished
    job's last one until its last step), times the share of them it held: half for a lease on GPUs shared with a
    partner, so a pair's GPU time is counted once."""
    train_seconds: float = 0.0
    """Wall seconds from each lease's first step to its last reported step, summed: the time it really trained."""
    reason: str | None = None
    """Why a failed job was given up."""
    starts: list[float] = field(default_factory=list)
    """Elapsed seconds at which each lease of the job started."""
    gpu_types: list[str] = field(default_factory=list)
    """The GPU type of each lease (one per start), as the cluster granted it."""
    partners: list[int | None] = field(default_factory=list)
    """The job each lease shared its GPUs with (one per start; None: it ran alone)."""
    rates: dict[str, dict[str, float]] = field(default_factory=dict)
    """GPU type -> batch size -> smoothed steps per second measured there."""
    trained: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """GPU type -> batch size -> [steps, seconds] the job trained there alone (every lease, start-up excluded): the
    rate that reproduces its whole training time, which a replay needs (the smoothed rate leans to the last lease)."""
    startups: list[float] = field(default_factory=list)
    """Seconds from the decision to start each lease (its round's start, or a switch) to its first step: waiting for
    preempted jobs to leave, placement, process start, checkpoint load."""
    switches: list[list[int]] = field(default_factory=list)
    """[epoch, batch size] at each batch-size change: from that epoch on the job trained at that batch size."""
    switch_seconds: list[float] = field(default_factory=list)
    """Seconds each batch-size change cost the job: from its last report at the old size (checkpoint written) to its
    first step at the new one (exit, relaunch, start-up); a replay loses as much at a switch within a round."""

    @property
    def run_seconds(self) -> float:
        """Wall seconds the job held its GPUs, whatever their type (`run_seconds_by_type`)."""
        return sum(self.run_seconds_by_type.values())


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path)
            self.db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"cannot open the journal: {exc}", path=path) from None

    def settings(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM settings")}

    def jobs(self) -> dict[int, JobRecord]:
        one_type = self.settings().get("gpu_type", DEFAULT_GPU_TYPE)
        rows = self.db.execute("SELECT id, record FROM jobs")
        return {row_id: _record(json.loads(text), one_type) for row_id, text in rows}

    def snapshot(self) -> str | bytes | None:
        """The scheduler's snapshot as stored (in the `memory` table): JSON text, or bytes from a journal of before
        snapshot format 1 (never decoded here: `Snapshot.loads` refuses them)."""
        row = self.db.execute("SELECT data FROM memory WHERE id = 0").fetchone()
        return None if row is None else row[0]

    def save(self, settings: dict[str, Any], jobs: list[JobRecord], snapshot: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO memory VALUES (0, ?)", (snapshot,))
            self.db.executemany(
                "INSERT OR REPLACE INTO settings VALUES (?, ?)", [(k, json.dumps(v)) for k, v in settings.items()]
            )
            self.db.executemany(
                "INSERT OR REPLACE INTO jobs VALUES (?, ?)", [(job.id, json.dumps(asdict(job))) for job in jobs]
            )

    def close(self) -> None:
        self.db.close()


def _record(data: dict[str, Any], one_type: str) -> JobRecord:
    """A journaled record. Journals from before GPU types on Ray ran on one type (`one_type`, their run's) and kept
    rates by batch size alone: everything they measured and ran was on that type."""
    if "gpu_types" not in data:
        data = {
            **data,
            "gpu_types": [one_type] * len(data.get("starts", [])),
            "rates": {one_type: data.get("rates", {})},
            "run_seconds_by_type": {one_type: data.get("run_seconds", 0.0)},
        }
    if "partners" not in data:  # from before pairs: every lease ran alone
        data = {**data, "partners": [None] * len(data.get("starts", []))}
    return JobRecord(**{k: v for k, v in data.items() if k != "run_seconds"})  # derived (journals of before kept it)
