"""Corrupt the state files, field by field, and resume (issue 31): every corruption of a run's journal or a service's
queue and journal ends in one refusal naming the file (and the row and field), or in a run where the corrupted job is
quarantined and every other job still completes; never a traceback, never a command the operator did not give.

Hypothesis draws the corruptions: which table, which row, which field (a column, a key of a row's JSON, or a value
deep inside the scheduler's snapshot), and what goes there (a value of another type, an absurd number, text that is
not JSON, bytes, nothing). Each resume runs on the fake cluster in virtual time, so a case takes tens of
milliseconds and never depends on the machine's load. 700 + 350 cases run in `make test`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from test_folder import RATE, request

from runtime_trace import DyingScheduler, write_runtime_trace
from service_world import World, spec
from service_world import request as service_request
from shockwave.core.clock import VirtualClock
from shockwave.core.errors import InputError
from shockwave.runtime.backend import Launch
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.runtime.folder import DEFAULT_COMMAND
from shockwave.runtime.journal import Journal
from shockwave.runtime.run import run
from shockwave.service.serve import serve
from shockwave.service.store import COLUMNS, Store

CAP_S = 60.0
"""Virtual seconds a resumed run may take (an uncorrupted one takes about 3; a service's first 300 s, 60 rounds, are
its own): a corruption that makes a job endless (a record's total_steps of 10^15) must not make the test endless;
the other jobs are done long before. A journal whose rounds were made longer (a valid round_seconds) gets as many
rounds as its own length allows (`cap_s`)."""
RUN_ROUND_S = 0.1
"""The killed run's round length."""
CAP_LEASES = 2000
"""An uncorrupted resume starts or extends about 100 leases; one with rounds of 0.01 s about 1,200."""
BUILTIN = DEFAULT_COMMAND.split()


class Capped(FakeBackend):
    """The fake cluster, noting every command it is asked to run, that stops the run at `CAP_S` virtual seconds or
    `CAP_LEASES` leases started or extended (a round a hundredth of a second long is valid, and slow to journal)."""

    def __init__(self, gpus: Any, clock: VirtualClock, cap_s: float = CAP_S) -> None:
        super().__init__(gpus, steps_per_s=RATE, clock=clock)
        self.commands: list[list[str]] = []
        self.cap = clock.now() + cap_s
        self.leases = 0

    def _count(self) -> None:
        self.leases += 1
        if self.clock.now() > self.cap or self.leases > CAP_LEASES:
            raise TimeoutError("capped")

    def start(self, launch: Launch) -> bool:
        self._count()
        self.commands.append(list(launch.command))
        return super().start(launch)

    def extend(self, job_id: int, deadline: float) -> None:
        self._count()
        super().extend(job_id, deadline)


def built_in(command: list[str]) -> bool:
    """Whether a launched command is the built-in workload's (the only one these runs name), its fields filled in."""
    return len(command) == len(BUILTIN) and command[:3] == BUILTIN[:3]


# -- what goes where ---------------------------------------------------------------------------------------------------
SQL_VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.text(max_size=12),
    st.binary(max_size=12),
    st.sampled_from(["", "{", "[]", "{}", "null", "1e999", "NaN", '"x"', "[1, 2]", "-1", "0"]),
)
"""What a column may be set to: SQLite takes any type in any column."""
JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**18), max_value=10**18),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from([0, -1, 1, 10**15, 1e300, -1e300, "../../x", "v100", "", [], {}, [1, 2], {"a": 1}]),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
"""What a JSON field may be set to (NaN and infinities included: Python's json writes them)."""


def corrupt_json(data: st.DataObject, value: Any) -> Any:
    """`value` with one thing changed somewhere inside: a leaf replaced, a key removed or added."""
    if isinstance(value, dict) and value and data.draw(st.integers(0, 4)) > 0:
        key = data.draw(st.sampled_from(sorted(value)))
        action = data.draw(st.sampled_from(["descend", "descend", "replace", "delete"]))
        if action == "delete":
            return {k: v for k, v in value.items() if k != key}
        inner = corrupt_json(data, value[key]) if action == "descend" else data.draw(JSON_VALUES)
        return {**value, key: inner}
    if isinstance(value, list) and value and data.draw(st.integers(0, 4)) > 0:
        index = data.draw(st.integers(0, len(value) - 1))
        return [*value[:index], corrupt_json(data, value[index]), *value[index + 1 :]]
    if isinstance(value, dict) and data.draw(st.booleans()):
        return {**value, data.draw(st.text(max_size=6)): data.draw(JSON_VALUES)}
    return data.draw(JSON_VALUES)


def corrupt_row(data: st.DataObject, db: sqlite3.Connection, table: str, key: str, columns: list[str]) -> str:
    """Corrupt one field of one row of `table` (a column's value, or inside a JSON column); returns what was done."""
    rows = db.execute(f"SELECT {key} FROM {table}").fetchall()
    assume(rows)
    row_key = data.draw(st.sampled_from(sorted(r[0] for r in rows)))
    if data.draw(st.integers(0, 9)) == 0:
        db.execute(f"DELETE FROM {table} WHERE {key} = ?", (row_key,))
        return f"{table} {row_key!r} deleted"
    column = data.draw(st.sampled_from(columns))
    current = db.execute(f"SELECT {column} FROM {table} WHERE {key} = ?", (row_key,)).fetchone()[0]
    try:
        parsed = json.loads(current) if isinstance(current, str) else None
    except ValueError:
        parsed = None
    if parsed is not None and data.draw(st.booleans()):
        value: Any = json.dumps(corrupt_json(data, parsed))
    else:
        value = data.draw(SQL_VALUES)
    try:
        db.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (value, row_key))
    except sqlite3.IntegrityError:  # NULL in a NOT NULL column: not something a file can hold
        assume(False)
    return f"{table} {row_key!r} {column} = {value!r:.80}"


def refused_well(error: InputError, folder: Path) -> None:
    """A refusal names a file of the folder, and where in it when it is a database."""
    assert error.path is not None and Path(error.path).resolve().is_relative_to(folder.resolve()), str(error)
    if error.path.endswith(".sqlite") and "holds no" not in error.reason:
        assert error.row is not None or error.field is not None or "cannot" in error.reason, str(error)


# -- a run's journal ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """A Shockwave run of 8 jobs killed after 3 finished: (its folder, the virtual time it died at)."""
    root = tmp_path_factory.mktemp("killed")
    trace = write_runtime_trace(root / "rt8.trace")
    clock = VirtualClock()
    with pytest.raises(KeyboardInterrupt):
        run(request(trace, root / "run", policy="shockwave"), lambda req: DyingScheduler(4, 3, clock))
    return root / "run", clock.now()


def fuzzed(variable: str, examples: int) -> Any:
    """Hypothesis's settings for a fuzz: `examples` cases (the environment's `variable` if set), the same ones on
    every run, no deadline (a case resumes a run)."""
    return settings(
        max_examples=int(os.environ.get(variable, examples)),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )


JOURNAL_TABLES = {"settings": ("key", ["value"]), "jobs": ("id", ["record"]), "memory": ("id", ["data"])}


@fuzzed("FUZZ_JOURNAL", 700)
@given(data=st.data())
def test_a_corrupt_journal_is_refused_in_one_line_or_resumed_without_losing_a_job(
    killed_run: tuple[Path, float], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    original, died_at = killed_run
    folder = tmp_path_factory.mktemp("case") / "run"
    shutil.copytree(original, folder)
    before = Journal(folder / "journal.sqlite").jobs()
    table = data.draw(st.sampled_from(sorted(JOURNAL_TABLES)))
    with sqlite3.connect(folder / "journal.sqlite") as db:
        done = corrupt_row(data, db, table, *JOURNAL_TABLES[table])
    backend = Capped(4, VirtualClock(died_at), cap_s(folder / "journal.sqlite"))
    try:
        run(request(Path(), folder, policy="shockwave", resume=True), lambda req: backend)
    except InputError as error:
        refused_well(error, folder)
        assert backend.commands == [], done
        event(f"{table}: refused")
        return
    except TimeoutError:
        event(f"{table}: capped")  # a corrupted job made endless: the others must be done by now
    else:
        event(f"{table}: resumed")
    assert all(built_in(command) for command in backend.commands), done
    after = Journal(folder / "journal.sqlite").jobs()
    touched = {int(done.split()[1])} if table == "jobs" else set()
    lost = [i for i, r in before.items() if i not in touched and after.get(i) and after[i].status != "done"]
    assert not lost, (done, lost)


def cap_s(journal: Path) -> float:
    """`CAP_S`, times as much longer as the journal's rounds now are than the killed run's (when it reads)."""
    try:
        rounds = Journal(journal).settings().get("round_seconds")
    except InputError:
        return CAP_S
    longer = rounds / RUN_ROUND_S if type(rounds) in (int, float) and math.isfinite(rounds) else 1.0
    return CAP_S * max(1.0, min(longer, 1e6))


# -- a service's queue and journal -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stopped_service(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """A service that took 3 jobs in and was stopped with them unfinished, 2 more queued while it was down."""
    folder = tmp_path_factory.mktemp("service") / "svc"
    folder.mkdir(mode=0o700)
    world, stop = World(), threading.Event()
    queue = Store(folder, clock=world.now)
    for i in range(3):
        world.at(0.0, lambda i=i: queue.submit(spec(f"job-{i}", steps=2000)))
    world.at(12.0, stop.set)
    serve(service_request(folder), stop, lambda cluster: FakeBackend({"v100": 2}, steps_per_s=100.0, clock=world))
    queue.submit(spec("late-0", steps=300))
    queue.submit(spec("late-1", steps=300))
    return folder, world.now()


STORE_TABLES = {
    "jobs": ("id", [c for c in COLUMNS if c != "id"]),
    "rounds": ("id", ["time_s", "busy", "plan"]),
    "version": ("id", ["counter"]),
}


@fuzzed("FUZZ_QUEUE", 350)
@given(data=st.data())
def test_a_corrupt_queue_row_is_quarantined_and_every_valid_job_completes(
    stopped_service: tuple[Path, float], tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    original, stopped_at = stopped_service
    folder = tmp_path_factory.mktemp("case") / "svc"
    shutil.copytree(original, folder)
    in_journal = data.draw(st.integers(0, 4)) == 0
    database, tables = ("journal.sqlite", JOURNAL_TABLES) if in_journal else ("service.sqlite", STORE_TABLES)
    table = data.draw(st.sampled_from(sorted(tables)))
    with sqlite3.connect(folder / database) as db:
        done = corrupt_row(data, db, table, *tables[table])
    queue = Store(folder)
    valid = {job.name for job in queue.jobs() if job.state != "invalid"}
    world, stop = World(), threading.Event()
    world.time = stopped_at
    world.at(stopped_at + 300.0, stop.set)
    backends: list[Capped] = []

    def backend(cluster: Any) -> Capped:
        backends.append(Capped({"v100": 2}, world))
        return backends[-1]

    try:
        result = serve(service_request(folder, resume=True), stop, backend)
    except InputError as error:
        refused_well(error, folder)
        assert all(not b.commands for b in backends), done
        event(f"{database} {table}: refused")
        return
    except TimeoutError:
        result = None
        event(f"{database} {table}: capped")
    else:
        event(f"{database} {table}: resumed, {len(result['failed_jobs'])} failed")
    assert all(built_in(command) for b in backends for command in b.commands), done
    states = {job.name: job.state for job in Store(folder).jobs()}
    names = ["job-0", "job-1", "job-2", "late-0", "late-1"]  # store row i + 1; the journal's job i is row i + 1 too
    touched = names[int(done.split()[1]) - (0 if in_journal else 1)] if table == "jobs" else None
    lost = [name for name in valid if name != touched and states.get(name) != "done"]
    assert not lost, (done, lost, states, result and result.get("failed_jobs"))
