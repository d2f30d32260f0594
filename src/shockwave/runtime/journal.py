"""The runtime's record across crashes: run settings and every job's state in SQLite, one transaction per round.

A scheduler killed at any point (kill -9 included) finds, on `--resume`, the state of the last completed round:
which jobs finished (and when), how far each other job got by its last checkpoint, where that checkpoint is, its
batch size, restarts and preemptions, and the scheduler's snapshot (`shockwave.runtime.snapshot`: what the policy has
learnt). Checkpoints themselves are files in `checkpoints/` beside the journal, named relative to it, so a copied run
folder resumes on its own files and never touches the original's.

The journal is data, never orders: everything is JSON text, and every row read back is validated by the model that
wrote it (`JobRecord`, strictly: a string is not a number), so a corrupt or hand-edited journal is refused with the
file, table, row and field to fix, never a traceback. What runs (the policy and the job command) is never taken from
it: a resumed run's come from its command line and are only compared with what the journal recorded.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from shockwave.core.errors import InputError
from shockwave.io.private import private_file

SETTLED = ("done", "failed", "cancelled")
"""A job's final statuses: it never runs again."""
SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory (id INTEGER PRIMARY KEY CHECK (id = 0), data TEXT NOT NULL, sha256 TEXT NOT NULL);
"""
LAYOUT = 2
"""What a journal holds, written with every run's settings: 2, a self-contained folder (copied inputs, checkpoints by
name, the operator's policy and command only compared). A journal of another layout (one written before, naming its
trace where it was) is resumed by the version that wrote it, or its run started anew: nothing is migrated."""
CHECKPOINT_NAME = r"^job-\d{1,9}-switch\d{1,9}-step\d{1,18}\.ckpt$"
"""A checkpoint is a file of the run's `checkpoints/` folder, by name alone: a journal cannot point anywhere else."""

MAX_SECONDS = 1e10
"""Three centuries: no run lasts longer, and a number beyond it in a journal is corrupt."""
Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS)]
Elapsed = Annotated[float, Field(ge=-MAX_SECONDS, le=MAX_SECONDS)]
GpuType = Annotated[str, Field(pattern=r"^[A-Za-z][\w-]{0,63}$")]
BatchSizeKey = Annotated[str, Field(pattern=r"^[1-9]\d{0,8}$")]
Status = Literal["pending", "active", "done", "failed", "cancelled"]
Settings = TypeVar("Settings", bound=BaseModel)


def row(table: str, key: object) -> str:
    """How an error names a row of the journal (or the queue)."""
    return f"table {table}, row {key!r}" if isinstance(key, str) else f"table {table}, row {key}"


def refusal(error: ValidationError, path: Path, where: str) -> InputError:
    """The first problem pydantic found in a row, as one InputError naming the file, the row and the field."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or None
    return InputError(problem(first), path=path, row=where, field=field)


def problem(error: Any) -> str:
    """One pydantic error as a sentence, with the value it refused (shortened)."""
    if error.get("type") == "missing":
        return "is missing"
    text = repr(error.get("input"))
    return f"{error.get('msg', 'invalid')} (got {text if len(text) <= 60 else text[:57] + '...'})"


class JobRecord(BaseModel):
    """One job's journaled state: what a resumed run needs to carry it on, and what the run's result reports."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)

    id: Annotated[int, Field(ge=0)]
    status: Status = "pending"
    """pending (not arrived or not yet run), active (admitted), and the final ones (`SETTLED`): done, failed,
    cancelled (by the service's operator)."""
    steps: Annotated[int, Field(ge=0)] = 0
    """Steps safely behind the job: those of its latest checkpoint (or the total once done)."""
    total_steps: Annotated[int, Field(ge=1)]
    batch_size: Annotated[int, Field(ge=1)]
    checkpoint: Annotated[str, Field(pattern=CHECKPOINT_NAME)] | None = None
    """The file name of its latest checkpoint in the run's `checkpoints/` folder."""
    finish_s: Seconds | None = None
    restarts: Annotated[int, Field(ge=0)] = 0
    preemptions: Annotated[int, Field(ge=0)] = 0
    measured_throughput: Annotated[float, Field(gt=0)] | None = None
    """Steps per second while training (start-up excluded), smoothed over leases (exponential average, 0.5)."""
    run_seconds_by_type: dict[GpuType, Seconds] = Field(default_factory=dict)
    """Wall seconds the job held GPUs of each type (all its leases, start-up and checkpointing included, a finished
    job's last one until its last step), times the share of them it held: half for a lease on GPUs shared with a
    partner, so a pair's GPU time is counted once."""
    train_seconds: Seconds = 0.0
    """Wall seconds from each lease's first step to its last reported step, summed: the time it really trained."""
    reason: str | None = None
    """Why a failed job was given up."""
    starts: list[Seconds] = Field(default_factory=list)
    """Elapsed seconds at which each lease of the job started."""
    gpu_types: list[GpuType] = Field(default_factory=list)
    """The GPU type of each lease (one per start), as the cluster granted it."""
    partners: list[Annotated[int, Field(ge=0)] | None] = Field(default_factory=list)
    """The job each lease shared its GPUs with (one per start; None: it ran alone)."""
    rates: dict[GpuType, dict[BatchSizeKey, Annotated[float, Field(gt=0)]]] = Field(default_factory=dict)
    """GPU type -> batch size -> smoothed steps per second measured there."""
    trained: dict[GpuType, dict[BatchSizeKey, Annotated[list[Seconds], Field(min_length=2, max_length=2)]]] = Field(
        default_factory=dict
    )
    """GPU type -> batch size -> [steps, seconds] the job trained there alone (every lease, start-up excluded): the
    rate that reproduces its whole training time, which a replay needs (the smoothed rate leans to the last lease)."""
    startups: list[Elapsed] = Field(default_factory=list)
    """Seconds from the decision to start each lease (its round's start, or a switch) to its first step: waiting for
    preempted jobs to leave, placement, process start, checkpoint load."""
    switches: list[Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=2, max_length=2)]] = Field(
        default_factory=list
    )
    """[epoch, batch size] at each batch-size change: from that epoch on the job trained at that batch size."""
    restores: list[Elapsed] = Field(default_factory=list)
    """Seconds each lease's process took from its start to its first step: loading its checkpoint, building its
    model, meeting its gang (the part of `startups` spent in the job)."""
    checkpoints_s: list[Elapsed] = Field(default_factory=list)
    """Seconds each preemption took: from the lease's end (the scheduler ends it) to the job's exit, its checkpoint
    written; the round's new leases wait for it."""
    switch_seconds: list[Elapsed] = Field(default_factory=list)
    """Seconds each batch-size change cost the job: from its last report at the old size (checkpoint written) to its
    first step at the new one (exit, relaunch, start-up); a replay loses as much at a switch within a round."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.steps > self.total_steps:
            raise ValueError(f"steps ({self.steps}) exceed total_steps ({self.total_steps})")
        if not len(self.starts) == len(self.gpu_types) == len(self.partners):
            raise ValueError("starts, gpu_types and partners must have one entry per lease")
        return self

    @property
    def run_seconds(self) -> float:
        """Wall seconds the job held its GPUs, whatever their type (`run_seconds_by_type`)."""
        return sum(self.run_seconds_by_type.values())


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            private_file(path, "journal")
            self.db = sqlite3.connect(path)
            self.db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open the journal: {exc}", path=path) from None

    def _rows(self, query: str) -> list[tuple[Any, ...]]:
        try:
            return self.db.execute(query).fetchall()
        except sqlite3.Error as exc:
            raise InputError(f"cannot read the journal: {exc}", path=self.path) from None

    def settings(self) -> dict[str, Any]:
        """Each setting's JSON value as written (the driver that reads them validates them with its own model)."""
        settings = {}
        for key, value in self._rows("SELECT key, value FROM settings"):
            settings[key] = self._json(value, row("settings", key), "value")
        return settings

    def settings_as(self, model: type[Settings]) -> Settings:
        """The settings as the driver's `model` (strict) reads them; a bad one is refused naming its row."""
        raw = self.settings()
        try:
            return model.model_validate(raw, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            key, *inner = first.get("loc", ("?",))
            field = ".".join(str(part) for part in inner) or "value"
            raise InputError(problem(first), path=self.path, row=row("settings", key), field=field) from None

    def require_layout(self, what: str) -> None:
        """Refuse a journal that holds no `what` to resume, or one of another layout (`LAYOUT`)."""
        layout = self.settings().get("layout")
        if layout is None and not self.settings():
            raise InputError(f"the journal holds no {what} to resume", path=self.path)
        if layout != LAYOUT:
            raise InputError(
                f"this journal was written by an earlier shockwave (layout {layout!r}; this one reads {LAYOUT}: run "
                "folders that keep their own inputs): resume it with the version that started it, or start anew",
                path=self.path,
                row=row("settings", "layout"),
            )

    def jobs(self) -> dict[int, JobRecord]:
        records = {}
        for row_id, text in self._rows("SELECT id, record FROM jobs ORDER BY id"):
            where = row("jobs", row_id)
            data = self._json(text, where, "record")
            if not isinstance(data, dict):
                raise InputError("expected a JSON object (a job's record)", path=self.path, row=where, field="record")
            try:
                record = JobRecord.model_validate(data, strict=True)
            except ValidationError as exc:
                raise refusal(exc, self.path, where) from None
            if record.id != row_id:
                raise InputError(f"the record says job {record.id}", path=self.path, row=where, field="id")
            records[row_id] = record
        return records

    def _json(self, text: object, where: str, field: str) -> Any:
        if not isinstance(text, str):
            raise InputError(f"expected JSON text, got {type(text).__name__}", path=self.path, row=where, field=field)
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"not valid JSON: {exc}", path=self.path, row=where, field=field) from None

    def snapshot(self) -> str | bytes | None:
        """The scheduler's snapshot as stored (in the `memory` table), once its SHA-256 says it is what was written.

        The snapshot is the policy's own state, which only its `load_state_dict` reads: a value changed inside it
        could pass as well-formed and mislead the policy later, so the whole is checked against its digest instead
        (rows the journal's models validate field by field need none)."""
        found = self._rows("SELECT data, sha256 FROM memory WHERE id = 0")
        if not found:
            return None
        data, digest = found[0]
        where = row("memory", 0)
        if isinstance(data, bytes):  # a pickle from before snapshot format 1: never decoded (`Snapshot.loads`)
            return data
        if not isinstance(data, str):
            raise InputError(f"expected JSON text, got {type(data).__name__}", path=self.path, row=where, field="data")
        if digest != hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest():
            raise InputError(
                "the scheduler's snapshot does not match its SHA-256: it was changed or damaged outside shockwave "
                "(resume from an intact copy of the folder, or start the run anew)",
                path=self.path,
                row=where,
                field="data",
            )
        return data

    def save(self, settings: dict[str, Any], jobs: list[JobRecord], snapshot: str) -> None:
        with self.db:
            digest = hashlib.sha256(snapshot.encode()).hexdigest()
            self.db.execute("INSERT OR REPLACE INTO memory VALUES (0, ?, ?)", (snapshot, digest))
            self.db.executemany(
                "INSERT OR REPLACE INTO settings VALUES (?, ?)", [(k, json.dumps(v)) for k, v in settings.items()]
            )
            self.db.executemany(
                "INSERT OR REPLACE INTO jobs VALUES (?, ?)", [(job.id, job.model_dump_json()) for job in jobs]
            )

    def close(self) -> None:
        self.db.close()
