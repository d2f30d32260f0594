"""The service's queue: every submitted job, its state and progress, in one SQLite file (`DIR/service.sqlite`).

The HTTP API writes submissions and cancellations here and returns at once; the scheduler loop polls for them
(`new_since`, `pending_cancellations`) and writes back what it decided and measured (`update`). Each call opens its
own connection, so the API's threads and the scheduler's (or another process) never share one, and WAL mode lets
readers go on while one of them writes. A restarted service finds the queue as it was. The file is its owner's
alone (0600).

Every row read back is validated by the model it is shown as (`Job`, `Round`), strictly: a row that does not pass
(a hand-edited or corrupt one) is quarantined, not fatal: it reads as a job in state `invalid` whose `reason` names
the row and the field, and the scheduler never takes it in, while every other job goes on. A corrupt round is left
out of what the dashboard shows.

States: `queued` (waiting, or admitted but not yet granted GPUs), `running`, the final ones `done`, `cancelled` and
`failed`, and `invalid` (a quarantined row). A final state never changes: a scheduler that reports progress on a job
the operator has just cancelled is told so (`update` returns False) instead of bringing it back.

The scheduler also records each round (`record_round`: GPUs busy per type and its plan) for the dashboard, which
polls `version()`, a counter that triggers raise on every change of a job or a new round, to send only news.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Literal, TypedDict, Unpack, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shockwave.core.errors import InputError
from shockwave.io.private import private_file
from shockwave.runtime.journal import problem
from shockwave.service.spec import JobSpec

log = logging.getLogger(__name__)
STORE_FILE = "service.sqlite"
State = Literal["queued", "running", "done", "cancelled", "failed", "invalid"]
STATES: tuple[str, ...] = get_args(State)
FINAL_STATES = ("done", "cancelled", "failed")

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    submitted_s REAL NOT NULL,
    total_steps INTEGER NOT NULL,
    batch_size INTEGER NOT NULL,
    progress_steps INTEGER NOT NULL DEFAULT 0,
    gpu_type TEXT,
    gpus INTEGER,
    estimated_finish_s REAL,
    rho REAL,
    reason TEXT,
    cancel_pending INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS rounds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time_s REAL NOT NULL,
    busy TEXT NOT NULL,
    plan TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    counter INTEGER NOT NULL
);
INSERT OR IGNORE INTO version (id, counter) VALUES (1, 0);
CREATE TRIGGER IF NOT EXISTS job_added AFTER INSERT ON jobs BEGIN UPDATE version SET counter = counter + 1; END;
CREATE TRIGGER IF NOT EXISTS job_changed AFTER UPDATE ON jobs BEGIN UPDATE version SET counter = counter + 1; END;
CREATE TRIGGER IF NOT EXISTS round_added AFTER INSERT ON rounds BEGIN UPDATE version SET counter = counter + 1; END;
"""
KEEP_ROUNDS = 10_000
"""Rounds kept for the dashboard (two weeks of two-minute rounds): older ones are dropped as new ones come."""
COLUMNS = (
    "id",
    "name",
    "spec",
    "state",
    "submitted_s",
    "total_steps",
    "batch_size",
    "progress_steps",
    "gpu_type",
    "gpus",
    "estimated_finish_s",
    "rho",
    "reason",
    "cancel_pending",
)


class Job(BaseModel):
    """A submitted job as the queue shows it."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)

    id: int
    """Submission order, from 1."""
    name: str
    state: State
    submitted_s: float
    """Unix time of the submission."""
    spec: JobSpec | None
    """What was submitted (None: the row is invalid, see `reason`)."""
    total_steps: Annotated[int, Field(ge=0)]
    """Its length in steps at `batch_size` (a batch-size switch converts the steps done and to do)."""
    batch_size: Annotated[int, Field(ge=0)]
    """The batch size it trains at now (the spec's initial one until the scheduler reports a switch)."""
    progress_steps: Annotated[int, Field(ge=0)]
    gpu_type: str | None
    """The GPU type it runs on (None while it holds no GPUs)."""
    gpus: Annotated[int, Field(ge=1)] | None
    estimated_finish_s: float | None
    """Unix time the scheduler expects it to finish."""
    rho: Annotated[float, Field(ge=0)] | None
    """Finish-time fairness as the scheduler last estimated it (<= 1: no later than on its fair share)."""
    reason: str | None
    """Why it failed, or another word from the scheduler; for an invalid row, what is wrong with it."""
    cancel_pending: bool
    """Cancelled, but the scheduler has not yet confirmed it stopped (or dropped) the job."""
    tenant: str | None = None
    """The tenant it runs for (its spec's), where the service is shared between tenants."""


class JobUpdate(TypedDict, total=False):
    """What the scheduler may change about a job."""

    state: State
    gpu_type: str | None
    gpus: int | None
    progress_steps: int
    total_steps: int
    batch_size: int
    estimated_finish_s: float | None
    rho: float | None
    reason: str | None


class Placement(BaseModel):
    """One job's part of a round's plan: `gpus` GPUs of `gpu_type` (each job of a packed pair has its own)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    job: str
    """The job's name."""
    gpu_type: str
    gpus: Annotated[int, Field(ge=1)]


class Round(BaseModel):
    """A round as the scheduler recorded it: when it started, the GPUs it kept busy and its plan."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: int
    """Order of recording, from 1."""
    time_s: float
    """Unix time the round started."""
    busy: dict[str, Annotated[int, Field(ge=0)]]
    """GPU type -> GPUs busy in the round."""
    plan: list[Placement]


class UnknownJob(InputError):
    """No job of that name."""


class JobConflict(InputError):
    """The request contradicts the queue: a name taken, or a job already over."""


class Store:
    def __init__(self, folder: Path, clock: Callable[[], float] = time.time) -> None:
        """The store in `folder` (created with its file when missing); `clock` stamps submissions."""
        self.folder = folder
        self.path = folder / STORE_FILE
        self.clock = clock
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            private_file(self.path, "service's store")
            with self._connect() as db:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"cannot open the service's store: {exc}", path=self.path) from None

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """One connection per call, committed (or rolled back) and closed on the way out."""
        db = sqlite3.connect(self.path, timeout=10.0)
        try:
            db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable across a crash of the process
            with db:
                yield db
        finally:
            db.close()

    def _select(self, db: sqlite3.Connection, where: str = "", args: tuple[object, ...] = ()) -> list[Job]:
        rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM jobs {where} ORDER BY id", args)
        return [_job(dict(zip(COLUMNS, row, strict=True))) for row in rows]

    def _one(self, db: sqlite3.Connection, name: str) -> Job:
        found = self._select(db, "WHERE name = ?", (name,))
        if not found:
            raise UnknownJob(f"no job named {name!r}", field="name")
        return found[0]

    def submit(self, spec: JobSpec) -> Job:
        """Queue `spec` (already validated and checked against the cluster); a name in use is refused."""
        try:
            with self._connect() as db:
                db.execute(
                    "INSERT INTO jobs (name, spec, state, submitted_s, total_steps, batch_size) "
                    "VALUES (?, ?, 'queued', ?, ?, ?)",
                    (spec.name, spec.model_dump_json(), self.clock(), spec.total_steps, spec.initial_batch_size),
                )
                return self._one(db, spec.name)
        except sqlite3.IntegrityError:
            raise JobConflict(f"a job named {spec.name!r} exists already: choose another name", field="name") from None

    def jobs(self) -> list[Job]:
        """Every job, in submission order."""
        with self._connect() as db:
            return self._select(db)

    def get(self, name: str) -> Job:
        with self._connect() as db:
            return self._one(db, name)

    def cancel(self, name: str) -> Job:
        """Cancel a queued or running job at once (the scheduler stops it when it next polls); cancelling a
        cancelled job again changes nothing, and a job that is over cannot be cancelled."""
        with self._connect() as db:
            db.execute(
                "UPDATE jobs SET state = 'cancelled', cancel_pending = 1 "
                "WHERE name = ? AND state IN ('queued', 'running')",
                (name,),
            )
            job = self._one(db, name)
        if job.state != "cancelled":
            raise JobConflict(f"job {name!r} is {job.state} already: nothing to cancel", field="name")
        return job

    def update(self, job_id: int, **changes: Unpack[JobUpdate]) -> bool:
        """The scheduler's news about a job; False when the job is over already (cancelled meanwhile) and nothing
        changed."""
        return self.update_many({job_id: changes})[job_id]

    def update_many(self, changes: Mapping[int, JobUpdate]) -> dict[int, bool]:
        """`update` for several jobs in one transaction (a round's news): job id -> whether it changed."""
        for update in changes.values():
            unknown = set(update) - set(JobUpdate.__annotations__)
            if unknown:
                raise ValueError(f"Store.update cannot change {sorted(unknown)}")
            if "state" in update and update["state"] not in STATES:
                raise ValueError(f"unknown state {update['state']!r}")
        final = ", ".join(f"'{state}'" for state in FINAL_STATES)
        changed = {job_id: True for job_id, update in changes.items() if not update}
        with self._connect() as db:
            for job_id, update in changes.items():
                if update:
                    assignments = ", ".join(f"{column} = ?" for column in update)  # column names checked above
                    cursor = db.execute(
                        f"UPDATE jobs SET {assignments} WHERE id = ? AND state NOT IN ({final})",
                        (*update.values(), job_id),
                    )
                    changed[job_id] = cursor.rowcount == 1
        return changed

    def update_finished_rho(self, rhos: Mapping[int, float | None]) -> None:
        """A finished job's rho as the run's result now counts it: its one field that moves after it ends (the
        metric's N/G and T_iso's measured rates take in every later finish)."""
        with self._connect() as db:
            db.executemany(
                "UPDATE jobs SET rho = ? WHERE id = ? AND state = 'done'",
                [(rho, job_id) for job_id, rho in rhos.items()],
            )

    def new_since(self, job_id: int) -> list[Job]:
        """Jobs submitted after job `job_id` (0: all), in submission order, whatever their state."""
        with self._connect() as db:
            return self._select(db, "WHERE id > ?", (job_id,))

    def pending_cancellations(self) -> list[Job]:
        """Cancelled jobs the scheduler has still to stop or drop; `cancellation_done` clears each."""
        with self._connect() as db:
            return self._select(db, "WHERE cancel_pending = 1")

    def cancellation_done(self, job_id: int, outcome: State | None = None) -> None:
        """The scheduler stopped (or never started) a cancelled job; or, with `outcome`, the job had ended that way
        before the cancellation reached it (it finished in the same round): it says what really happened."""
        with self._connect() as db:
            if outcome is not None:
                db.execute("UPDATE jobs SET state = ? WHERE id = ? AND cancel_pending = 1", (outcome, job_id))
            db.execute("UPDATE jobs SET cancel_pending = 0 WHERE id = ?", (job_id,))

    def counts(self) -> dict[str, int]:
        """Jobs in each state (every state, zeros included; a quarantined row counts as invalid)."""
        found: Counter[str] = Counter()
        for (state, _), count in self.counts_by_tenant().items():
            found[state] += count
        return {state: found[state] for state in STATES}

    def counts_by_tenant(self) -> dict[tuple[str, str], int]:
        """Jobs in each (state, tenant) ('' for a job of no tenant), every state of each tenant seen, zeros too."""
        jobs = self.jobs()
        found = Counter((job.state, job.tenant or "") for job in jobs)
        tenants = sorted({job.tenant or "" for job in jobs} or {""})
        return {(state, tenant): found.get((state, tenant), 0) for tenant in tenants for state in STATES}

    def version(self) -> int:
        """A counter that grows whenever a job is added or changed or a round recorded: one cheap read tells a
        watcher whether there is news. A counter that is not a number (a hand-edited file) is started again."""
        with self._connect() as db:
            found = db.execute("SELECT counter FROM version WHERE id = 1").fetchone()
            if found is None or type(found[0]) is not int:
                db.execute("INSERT OR REPLACE INTO version (id, counter) VALUES (1, 0)")
                return 0
            return found[0]

    def record_round(self, time_s: float, busy: Mapping[str, int], plan: Iterable[Placement]) -> Round:
        """The scheduler's account of a round it started: GPUs busy per type and which job runs where."""
        checked = Round(id=0, time_s=time_s, busy=dict(busy), plan=list(plan))
        with self._connect() as db:
            cursor = db.execute(
                "INSERT INTO rounds (time_s, busy, plan) VALUES (?, ?, ?)",
                (checked.time_s, json.dumps(checked.busy), json.dumps([p.model_dump() for p in checked.plan])),
            )
            round_id = int(cursor.lastrowid or 0)
            db.execute("DELETE FROM rounds WHERE id <= ?", (round_id - KEEP_ROUNDS,))
        return checked.model_copy(update={"id": round_id})

    def rounds(self, limit: int) -> list[Round]:
        """The last `limit` rounds recorded, oldest first."""
        with self._connect() as db:
            rows = db.execute("SELECT id, time_s, busy, plan FROM rounds ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        rounds = []
        for row_id, time_s, busy, plan in reversed(rows):
            try:
                rounds.append(Round(id=row_id, time_s=time_s, busy=_json(busy), plan=_json(plan)))
            except (ValueError, TypeError) as exc:  # ValidationError is a ValueError
                log.warning("%s: round %s is not valid and is not shown (%s)", self.path, row_id, _first(exc))
        return rounds


def _json(text: object) -> object:
    if not isinstance(text, str):
        raise TypeError(f"expected JSON text, got {type(text).__name__}")
    return json.loads(text)


def _first(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        return f"field '{'.'.join(str(p) for p in first.get('loc', ()))}': {first.get('msg')}"
    return str(error)


def _job(row: dict[str, object]) -> Job:
    """The row as a job, or (when it is not valid) quarantined: a job in state `invalid` saying what is wrong."""
    try:
        spec = JobSpec.model_validate_json(_text(row["spec"], "spec"), strict=True)
        if spec.name != row["name"]:
            raise ValueError(f"the row's name {row['name']!r} is not its spec's {spec.name!r}")
        if row["cancel_pending"] not in (0, 1):
            raise ValueError(f"cancel_pending must be 0 or 1, got {row['cancel_pending']!r}")
        return Job.model_validate(
            {**row, "spec": spec, "cancel_pending": bool(row["cancel_pending"]), "tenant": spec.tenant}
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(part) for part in first.get("loc", ()))
        field = loc if exc.title == Job.__name__ else ".".join(filter(None, ("spec", loc)))
        return _quarantined(row, f"field '{field}': {problem(first)}")
    except ValueError as exc:
        return _quarantined(row, str(exc))


def _text(value: object, column: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"field '{column}': expected JSON text, got {type(value).__name__}")
    return value


def _quarantined(row: dict[str, object], why: str) -> Job:
    """An invalid row as the queue shows it: its id, its name if it has one, what is wrong; never run."""
    row_id, name, submitted = row["id"], row["name"], row["submitted_s"]
    return Job(
        id=row_id if type(row_id) is int else 0,
        name=name if isinstance(name, str) and name.isprintable() and len(name) <= 256 else f"#{row_id}",
        state="invalid",
        submitted_s=submitted if type(submitted) is float and math.isfinite(submitted) else 0.0,
        spec=None,
        total_steps=0,
        batch_size=0,
        progress_steps=0,
        gpu_type=None,
        gpus=None,
        estimated_finish_s=None,
        rho=None,
        reason=f"row {row_id} of the queue is invalid: {why}",
        cancel_pending=False,
    )
