"""The runtime's driver of the scheduling loop (`shockwave.core.loop`): the same policies and loop as the simulator,
deciding for real jobs on a backend's clock.

Each round (every `round_seconds`):
1. wait for the round's end (the one place time passes), granting batch-size requests on the way; observe every
   running gang: steps done, measured throughput (smoothed), newer checkpoints (collected, so a lost
   node or a killed scheduler costs at most the work since), exits: done, crashed (restarted from its checkpoint up
   to `max_restarts` times, then failed with its reason), or asking for another batch size;
2. admit jobs whose (time-scaled) arrival has come;
3. the loop asks the policy for the next round's plan and checks it;
4. stop running jobs it did not choose, or chose for another GPU type (they checkpoint and exit; their GPUs are
   freed and verified free), extend the leases of the others it chose (no restart), start the rest from their
   checkpoints on GPUs of the type the plan names;
5. journal the state. A job that stops mid-round to ask for another batch size (at an epoch boundary) is granted it
   at once: it restarts from its checkpoint on the rest of its lease.
A lease runs `hold_seconds` past its round so a job chosen again never stops between rounds.

Stopping (`stop`, an event another thread or a signal handler may set): the round in progress ends at once, every
running job is asked to checkpoint and exit (an empty round), the journal is written, and the loop ends; a resumed
run starts them again from those checkpoints.

Rates are measured per GPU type: a lease's rate is kept under the type the cluster granted it, and the job's rates on
types it has not been measured on (at its batch size) follow the measured ones by the throughput model's ratio
between the types (`_calibrated`), so a policy never weighs a real rate against a table's.

Space sharing: a plan may pair two jobs on one gang. Both are started with the other as partner (`Launch.partner`):
the backend runs both at once on the same GPUs, each holding half of each. A lease is kept only if the plan keeps
its type and its partner (anything else restarts it on what the plan says). Pair rates are the throughput table's
co-location entries, put on the run's measured scale (`colocation_on_jobs_scale`): a pair the table does not list
is never formed. A paired lease's rate is not the job's rate alone, so it is not measured as one.
"""

from __future__ import annotations

import bisect
import logging
import shlex
import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from shockwave.core.clock import Clock, Elapsed
from shockwave.core.cluster import ClusterSpec
from shockwave.core.loop import (
    RoundRecord,
    SchedulingLoop,
    admission_rates,
    colocation_on_jobs_scale,
    rates_after_switch,
)
from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy
from shockwave.core.state import JobState
from shockwave.io.atomic import write_atomically
from shockwave.runtime.backend import Backend, GangStatus, Launch, share_of
from shockwave.runtime.folder import DEFAULT_COMMAND
from shockwave.runtime.journal import SETTLED, JobRecord, Journal
from shockwave.runtime.snapshot import Snapshot
from shockwave.workload_model.job import Job
from shockwave.workload_model.profile import JobProfile, build_profile
from shockwave.workload_model.throughput import ThroughputModel, rate_or_zero

log = logging.getLogger(__name__)
EMA_ALPHA = 0.5
"""Weight of the newest throughput measurement (the reference smooths with 0.5 too)."""
POLL_S = 0.25
"""How often running jobs are checked for batch-size requests between round boundaries."""
LAST_EXIT_S = 5.0
"""How long a round's end waits for jobs that took their last step to exit (write their final checkpoint): a job
still exiting when the next round is decided would be planned again, and its GPUs idle through that round."""


@dataclass(frozen=True)
class RuntimeSettings:
    round_seconds: float
    hold_seconds: float
    max_restarts: int
    command: list[str]
    """The job command; {family}, {batch_size}, {mode} and {job_id} are filled in per job."""
    checkpoints: Path
    """The run's private checkpoints folder: a journal names each checkpoint by its file name there."""
    stop_timeout_s: float = 60.0

    @classmethod
    def of(cls, round_seconds: float, max_restarts: int, command: str | None, checkpoints: Path) -> RuntimeSettings:
        """A driver's settings: leases held half a round (at least a second) past their round, and the operator's
        job command (None: the built-in workload's)."""
        return cls(
            round_seconds=round_seconds,
            hold_seconds=max(1.0, round_seconds / 2),
            max_restarts=max_restarts,
            command=shlex.split(command or DEFAULT_COMMAND),
            checkpoints=checkpoints,
        )


@dataclass
class _Running:
    started: float
    """Elapsed seconds at which this lease started."""
    wanted: float
    """Elapsed seconds at which the scheduler decided to start it (the round's start, or a switch): the start-up
    it measures runs from here to the first step, so it includes waiting for GPUs and placing the gang."""
    deadline: float
    last_step: int
    batch_size: int
    gpu_type: str
    """The type the plan put the lease on (a plan that names another type moves the job)."""
    granted: str
    """The type the cluster granted the lease: its measured rate is that type's."""
    prior_rate: float | None
    """The job's smoothed rate at this batch size before this lease: the lease's own rate is blended into it."""
    partner: int | None = None
    """The job the lease shares its GPUs with (None: it runs alone)."""
    last_report: float | None = None
    startup_seen: bool = False
    switched_at: float | None = None
    """Wall time of the previous lease's last report, when this lease restarts the job at a new batch size."""


class JobSource(Protocol):
    """Where a runtime's jobs come from: a trace (every job known at the start) or the service's queue (jobs as they
    are submitted and cancelled)."""

    endless: bool
    """True: the run waits for more jobs until it is asked to stop (a service); False: it ends when every job has."""

    def take_in(self, runtime: RuntimeScheduler, boundary: bool) -> None:
        """Take in what came since (`runtime.add`, `runtime.end`): new jobs at a round `boundary`, cancellations
        also between a round's polls."""
        ...

    def allowed_types(self, job_id: int) -> Collection[str] | None:
        """The GPU types the job may run on (None: any)."""
        ...

    def command(self, job_id: int) -> list[str] | None:
        """The job's own command (None: the run's)."""
        ...

    def journaled(self) -> dict[str, Any]:
        """What the journal keeps of the source, beside the run's settings."""
        ...


class RunObserver(Protocol):
    """Who watches a runtime: the service's queue, dashboard and job logs."""

    def saved(self, runtime: RuntimeScheduler, final: bool) -> None:
        """The journal was just written (`final`: the run is over)."""
        ...

    def launched(self, runtime: RuntimeScheduler, plan: RoundPlan, solve_s: float | None) -> None:
        """A round started with `plan`, which the policy took `solve_s` seconds to make."""
        ...

    def output(self, job_id: int, chunk: bytes) -> None:
        """What the job printed since the last look."""
        ...

    def idle(self, runtime: RuntimeScheduler) -> None:
        """No job is active: the cluster waits a round for one."""
        ...


class TraceSource:
    """A trace's jobs: all of them known at the start, each admitted when its arrival comes."""

    endless = False

    def take_in(self, runtime: RuntimeScheduler, boundary: bool) -> None:
        """Nothing comes: the trace holds every job."""

    def allowed_types(self, job_id: int) -> Collection[str] | None:
        return None

    def command(self, job_id: int) -> list[str] | None:
        return None

    def journaled(self) -> dict[str, Any]:
        return {}


@dataclass
class RuntimeScheduler:
    jobs: list[Job]
    profiles: list[JobProfile]
    throughputs: ThroughputModel
    cluster: ClusterSpec
    policy: Policy
    backend: Backend
    journal: Journal
    settings: RuntimeSettings
    run_settings: dict[str, Any]
    """Everything needed to resume (journaled with every round)."""
    records: dict[int, JobRecord] = field(default_factory=dict)
    rounds: list[RoundRecord] = field(default_factory=list)
    admitted: InitVar[dict[int, JobState] | None] = None
    """Jobs the policy already knows (a resumed run's snapshot): taken back to their journaled checkpoints."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set it to end the run early: running jobs checkpoint and exit, and a resume continues from there."""
    source: JobSource = field(default_factory=TraceSource)
    observer: RunObserver | None = None

    def __post_init__(self, admitted: dict[int, JobState] | None) -> None:
        self.clock: Clock = self.backend.clock
        self.start_wall: float = self.run_settings.setdefault("start_wall", self.clock.now())
        latest = _latest_event(self.records.values(), self.rounds)
        if self.elapsed() < latest:  # a clock set back since the journal was written (or a start_wall edited)
            log.warning("the clock reads %.1f s before the journal's last event: the run goes on from there", latest)
            self.start_wall = self.run_settings["start_wall"] = self.clock.now() - latest
        recorded = max((r.round + 1 for r in self.rounds), default=0)
        if self.run_settings.get("rounds", 0) < recorded:  # an edited journal: rounds the policy remembers
            log.warning("the journal counts fewer rounds than it records (%d): the run goes on from there", recorded)
            self.run_settings["rounds"] = recorded
        self.loop = SchedulingLoop(
            self.policy,
            self.cluster,
            self.settings.round_seconds,
            Elapsed(self.clock, self.start_wall).now,
            round_index=self.run_settings.get("rounds", 0),
            rounds=self.rounds,
            colocation=colocation_on_jobs_scale(self.throughputs),
        )
        self.view = self.loop.view
        self.round_end: float | None = None
        """When the round in progress ends, on the backend's clock (None before the first)."""
        self.decided = self.clock.now()
        self.running: dict[int, _Running] = {}
        self.superseded: list[Path] = []
        for index, spec in enumerate(self.jobs):
            self.records.setdefault(
                index, JobRecord(id=index, total_steps=spec.total_steps, batch_size=spec.batch_size)
            )
        for job_id, state in (admitted or {}).items():
            if self.records[job_id].status == "active":
                self.view.jobs[job_id] = _at_checkpoint(state, self.records[job_id])
        self.waiting: list[tuple[float, int]] = sorted(
            (spec.arrival, i)
            for i, spec in enumerate(self.jobs)
            if self.records[i].status not in SETTLED and i not in self.view.jobs
        )
        """Jobs not admitted yet, by arrival: each round admits those whose arrival has come."""
        self.planned_from = time.perf_counter()
        self.idle_pending = 0.0
        """Seconds waited for jobs since the last decision (`run_settings["idle_s"]` once a round is decided)."""

    def add(self, spec: Job, *, cancelled: bool = False) -> int:
        """A job that came in (a submission): its id in the run; it waits for admission like a trace's job (none, if
        it was `cancelled` before it came in)."""
        job_id = len(self.jobs)
        self.jobs.append(spec)
        self.profiles.append(build_profile(spec, self.throughputs))
        record = JobRecord(id=job_id, total_steps=spec.total_steps, batch_size=spec.batch_size)
        self.records[job_id] = record
        if cancelled:
            record.status = "cancelled"
        else:
            bisect.insort(self.waiting, (spec.arrival, job_id))
        return job_id

    def end(self, job_id: int, status: Literal["cancelled", "failed"], reason: str | None = None) -> None:
        """End a job for good (cancelled by the operator, or failed because it cannot run): its processes killed,
        out of the loop and the waiting queue. A job that has already ended keeps its end."""
        record = self.records[job_id]
        if record.status in SETTLED:
            return
        if job_id in self.running:
            self._release(job_id)
        if job_id in self.view.jobs:
            self.loop.remove(self.view.jobs[job_id])
        self.waiting = [entry for entry in self.waiting if entry[1] != job_id]
        record.status, record.reason = status, reason

    # -- the clock --------------------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock.now() - self.start_wall

    def run(self) -> None:
        try:
            self.loop.run(self)
        finally:
            for job_id in list(self.running):
                self._release(job_id)
            self._save(final=True)

    # -- the loop's driver ------------------------------------------------------------------------------------------
    def advance(self, loop: SchedulingLoop) -> None:
        if self.round_end is not None:
            self._tend_until(self.round_end)
            self._await_last_exits()
        self.decided = self.clock.now()
        self._observe()

    def admit(self, loop: SchedulingLoop) -> None:
        self.source.take_in(self, boundary=True)
        self._admit()
        self.planned_from = time.perf_counter()

    def idle(self, loop: SchedulingLoop) -> bool:
        """Jobs are still to come (a trace's to arrive, a service's to be submitted): the next `advance` waits a
        round for them, the cluster idle (the observer is told)."""
        if self.all_settled():
            return False
        self.round_end = self.clock.now() + self.settings.round_seconds
        if self.view.round_index > 0:  # idle between two decisions: a replay's mean round leaves it out
            self.idle_pending += self.settings.round_seconds
        if self.observer is not None:
            self.observer.idle(self)
        return True

    def launch(self, loop: SchedulingLoop, plan: RoundPlan) -> RoundPlan:
        solve_s = time.perf_counter() - self.planned_from
        self.run_settings["idle_s"] = self.run_settings.get("idle_s", 0.0) + self.idle_pending
        self.idle_pending = 0.0
        if self.stop.is_set():
            plan = RoundPlan()  # every running job checkpoints and exits
        round_start = self._apply(plan, self.decided)
        self.round_end = round_start + self.settings.round_seconds
        launched = RoundPlan(tuple(a for a in plan.assignments if all(j in self.running for j in a.jobs)))
        if self.observer is not None:
            self.observer.launched(self, launched, solve_s)
        return launched

    def round_launched(self, loop: SchedulingLoop) -> None:
        self._save()

    def _tend_until(self, end: float) -> None:
        """Wait for the round's end, granting batch-size requests on the way (the job keeps its lease)."""
        while (remaining := end - self.clock.now()) > 0 and not self.stop.is_set():
            self.clock.sleep(min(POLL_S, remaining))
            self.source.take_in(self, boundary=False)
            for job_id in list(self.running):
                status = self.backend.status(job_id)
                if status.exited and status.requested_batch_size is not None and not status.done:
                    lease, wanted = self.running[job_id], self.elapsed()
                    self._look(job_id, status)
                    self._ended(job_id, status)
                    if job_id in self.view.jobs:
                        partner = lease.partner if lease.partner in self.running else None
                        self._start(job_id, lease.gpu_type, lease.deadline, wanted, partner)
                        if job_id in self.running and self.records[job_id].batch_size != lease.batch_size:
                            self.running[job_id].switched_at = lease.last_report
                    self._save()

    def _await_last_exits(self) -> None:
        """Wait for the jobs that took their last step to exit, so the round about to be decided sees them done: a
        fidelity run's job writing its final checkpoint 0.2 s past a round's end was planned another round, and
        two GPUs idled 40 s (a replay has no such race). At most LAST_EXIT_S, and half the leases' hold, so the
        leases of jobs kept on keep half their hold for the decision and the drain that follow."""
        deadline = self.clock.now() + min(LAST_EXIT_S, self.settings.hold_seconds / 2)
        while self.clock.now() < deadline and not self.stop.is_set():
            statuses = (self.backend.status(job_id) for job_id in self.running)
            if not any(status.done and not status.exited for status in statuses):
                return
            self.clock.sleep(max(0.0, min(POLL_S, deadline - self.clock.now())))  # asking can outlast the deadline

    def all_settled(self) -> bool:
        """The run was asked to stop (after this round's launch: see `launch`), or every job has left for good and
        none is to come."""
        if self.stop.is_set():
            return True
        return not self.source.endless and all(r.status in SETTLED for r in self.records.values())

    # -- observing -------------------------------------------------------------------------------------------------
    def _observe(self) -> None:
        for job_id in list(self.running):
            status = self.backend.status(job_id)
            self._look(job_id, status)
            if status.exited:
                self._ended(job_id, status)

    def _look(self, job_id: int, status: GangStatus) -> None:
        """Take in a running gang's latest report, any newer checkpoint and what it printed."""
        self._account(job_id, status)
        self._collect_checkpoint(job_id)
        self._keep_output(job_id)

    def _keep_output(self, job_id: int) -> None:
        if self.observer is not None:
            chunk = self.backend.output(job_id)
            if chunk:
                self.observer.output(job_id, chunk)

    def _account(self, job_id: int, status: GangStatus) -> None:
        """Progress since the last look: job state, measured throughput, the policy's bookkeeping."""
        lease, state, record = self.running[job_id], self.view.jobs[job_id], self.records[job_id]
        if status.step is None or status.reported_at is None:
            return
        if status.first_step_at is not None and not lease.startup_seen:
            lease.startup_seen = True
            record.startups.append(status.first_step_at - self.start_wall - lease.wanted)
            if status.process_started_at is not None:
                record.restores.append(max(0.0, status.first_step_at - status.process_started_at))
            if lease.switched_at is not None:
                record.switch_seconds.append(status.first_step_at - lease.switched_at)
        rate = status.lease_rate() if lease.partner is None else None  # a pair's rate is not the job's alone
        if rate is not None:
            smoothed = rate if lease.prior_rate is None else EMA_ALPHA * rate + (1 - EMA_ALPHA) * lease.prior_rate
            record.rates.setdefault(lease.granted, {})[str(lease.batch_size)] = smoothed
            record.measured_throughput = smoothed
            state.rates.update(
                self._calibrated(state.family.name, state.scale_factor, lease.batch_size, state.rates, record)
            )
        steps = status.step - lease.last_step
        since = lease.last_report if lease.last_report is not None else status.first_step_at
        state.steps_done = min(status.step, state.total_steps)
        if steps > 0 and since is not None and status.reported_at > since:
            seconds = status.reported_at - since
            record.train_seconds += seconds
            if lease.partner is None:
                alone = record.trained.setdefault(lease.granted, {}).setdefault(str(lease.batch_size), [0, 0.0])
                alone[0] += steps
                alone[1] += seconds
            self.loop.progressed(state, seconds, steps)
        lease.last_step, lease.last_report = status.step, status.reported_at

    def _collect_checkpoint(self, job_id: int) -> None:
        record = self.records[job_id]
        newer = self.backend.checkpoint(job_id, newer_than=record.steps)
        if newer is not None:
            step, data = newer
            # Steps count at the current batch size, so after a switch a step number comes round again: the
            # switch count keeps each checkpoint's file its own (one overwritten and then deleted as superseded
            # lost the job's checkpoint, found in a fidelity run).
            name = f"job-{job_id}-switch{len(record.switches)}-step{step}.ckpt"
            write_atomically(self.settings.checkpoints / name, data, private=True)
            if record.checkpoint is not None:
                self.superseded.append(self.settings.checkpoints / record.checkpoint)
            record.steps, record.checkpoint = step, name

    def _ended(self, job_id: int, status: GangStatus) -> None:
        record, state = self.records[job_id], self.view.jobs[job_id]
        finished: float | None = None
        if status.done:  # its last step: what it ran on its GPUs ends here, whenever the lease is released
            finished = (status.reported_at if status.reported_at is not None else self.clock.now()) - self.start_wall
        self._release(job_id, until=finished)
        if finished is not None:
            record.status, record.steps = "done", state.total_steps
            record.finish_s = finished
            state.steps_done = state.total_steps
            state.last_finish_s = record.finish_s
            self.loop.remove(state)
            self._save()  # a completion is durable at once: a scheduler that dies now will not run it again
            log.info("job %d completed at %.1f s", job_id, record.finish_s)
            return
        state.steps_done = record.steps  # whatever came after the last checkpoint is lost
        if status.failure is not None:
            self.loop.stalled(state)
            record.restarts += 1
            log.warning(
                "job %d failed (%d/%d restarts): %s",
                job_id,
                record.restarts,
                self.settings.max_restarts,
                status.failure.splitlines()[0],
            )
            if record.restarts > self.settings.max_restarts:
                record.status, record.reason = "failed", status.failure
                self.loop.remove(state)
            return
        if status.requested_batch_size is not None and status.requested_batch_size != state.batch_size:
            self._switch(record, state, status.requested_batch_size)

    def _switch(self, record: JobRecord, state: JobState, batch_size: int) -> None:
        """The job asked for `batch_size` (at a checkpoint): convert its progress, keeping the epochs it has done.

        Until the job reports at the new batch size its rate on each type is the one measured there before, else
        the current one scaled as the throughput model scales it (`rates_after_switch`, which leaves out a type the
        model does not know the new size on), else, where no type is left, the current one: the job has switched
        whatever the model knows.
        """
        known = _measured_at(record, batch_size)
        rates = rates_after_switch(state, batch_size, self.throughputs, known, self.cluster) or dict(state.rates)
        rates = self._calibrated(state.family.name, state.scale_factor, batch_size, rates, record)
        self.loop.switch_batch_size(state, batch_size, rates, round_up_progress=False)
        record.steps, record.total_steps, record.batch_size = state.steps_done, state.total_steps, batch_size
        record.switches.append([state.epochs_completed, batch_size])
        log.info("job %d trains at batch size %d from epoch %d", state.id, batch_size, state.epochs_completed)

    # -- admitting --------------------------------------------------------------------------------------------------
    def _admit(self) -> None:
        """The jobs whose arrival has come, in the order of their ids."""
        arrived = bisect.bisect_right(self.waiting, (self.view.now, len(self.jobs)))
        due, self.waiting = sorted(job_id for _, job_id in self.waiting[:arrived]), self.waiting[arrived:]
        for job_id in due:
            spec, record = self.jobs[job_id], self.records[job_id]
            rates = self._calibrated(
                spec.model, spec.scale_factor, record.batch_size, self._admission_rates(job_id, record), record
            )
            state = _at_checkpoint(JobState.admit(job_id, spec, self.profiles[job_id], rates), record)
            state.batch_size_changes = len(record.switches)
            record.status = "active"
            self.loop.admit(state)

    def _admission_rates(self, job_id: int, record: JobRecord) -> dict[str, float]:
        """The job's steps/s on each GPU type it may run on, as the throughput model knows them."""
        spec = self.jobs[job_id]
        rates = admission_rates(self.throughputs, spec.model, record.batch_size, spec.scale_factor, self.cluster)
        allowed = self.source.allowed_types(job_id)
        return rates if allowed is None else {t: rate for t, rate in rates.items() if t in allowed}

    def _calibrated(
        self, model: str, gang: int, batch_size: int, rates: Mapping[str, float], record: JobRecord
    ) -> dict[str, float]:
        """`rates` (steps/s by GPU type at `batch_size`) with the rates `record` measured there, and each other type
        scaled from them (`calibrated_rates`).

        Real rates are not the table's (jobs on logical GPUs all train on the same CPUs): a policy that weighed a
        rate measured on one type against the table's on another would see that type many times faster or slower
        than the model says it is.
        """
        measured = {t: rate for t, rate in _measured_at(record, batch_size).items() if t in self.cluster.types}
        return calibrated_rates(self.throughputs, (model, batch_size, gang), rates, measured, self.cluster.types)

    # -- acting ---------------------------------------------------------------------------------------------------
    def _apply(self, plan: RoundPlan, decided: float) -> float:
        """Carry out the round; returns when its leases begin (once the preempted jobs have left their GPUs).

        Kept jobs are extended first, so a slow drain never lets their leases lapse; the round's clock starts after
        the drain, so jobs started now get a whole round however long the preempted took to checkpoint. A running
        job the plan puts on another GPU type, or with another partner (or none, or one where it ran alone), is
        preempted and started again there: what it holds of its GPUs changes.
        """
        chosen = {job_id: (a.gpu_type, _partner(a, job_id)) for a in plan.assignments for job_id in a.jobs}
        kept = [
            j
            for j, (gpu_type, partner) in chosen.items()
            if j in self.running and (self.running[j].gpu_type, self.running[j].partner) == (gpu_type, partner)
        ]
        for job_id in kept:
            self._extend(job_id, self._lease_end(self.clock.now()))
        stopping = [j for j in self.running if j not in kept]
        for job_id in stopping:
            self.backend.stop(job_id)
        self._drain(stopping)
        round_start = self.clock.now()
        deadline = self._lease_end(round_start)
        for job_id, (gpu_type, partner) in chosen.items():
            if job_id in self.running:
                self._extend(job_id, deadline)
            elif job_id in self.view.jobs:
                self._start(job_id, gpu_type, deadline, decided - self.start_wall, partner)
        return round_start

    def _command(self, state: JobState) -> list[str]:
        """The job's own command (a submission's), else the run's with {family}, {batch_size}, {mode} and {job_id}
        filled in."""
        own = self.source.command(state.id)
        if own is not None:
            return list(own)
        values = {
            "family": state.family.name,
            "batch_size": state.batch_size,
            "mode": state.spec.mode,
            "job_id": state.id,
        }
        return [part.format(**values) for part in self.settings.command]

    def _lease_end(self, round_start: float) -> float:
        return round_start + self.settings.round_seconds + self.settings.hold_seconds

    def _extend(self, job_id: int, deadline: float) -> None:
        self.backend.extend(job_id, deadline)
        self.running[job_id].deadline = deadline

    def _drain(self, stopping: list[int]) -> None:
        """Wait for preempted jobs to checkpoint and exit; one that does not in time is killed, and one that has not
        taken its first step yet (still starting: nothing to save) is not waited for."""
        stopped = self.clock.now()
        give_up = stopped + self.settings.stop_timeout_s
        waiting = list(stopping)
        while waiting:
            for job_id in list(waiting):
                status = self.backend.status(job_id)
                starting = status.first_step_at is None and status.failure is None
                if status.exited or starting or self.clock.now() > give_up:
                    self._look(job_id, status)
                    if not status.done and status.failure is None:
                        self.records[job_id].preemptions += 1
                        if status.exited and not starting:  # not one killed for overrunning the stop timeout
                            self.records[job_id].checkpoints_s.append(self.clock.now() - stopped)
                    self._ended(job_id, status)
                    waiting.remove(job_id)
            self.clock.sleep(0.05)

    def _start(self, job_id: int, gpu_type: str, deadline: float, wanted: float, partner: int | None) -> None:
        record, state = self.records[job_id], self.view.jobs[job_id]
        checkpoint = (self.settings.checkpoints / record.checkpoint).read_bytes() if record.checkpoint else None
        command = self._command(state)
        launch = Launch(
            job_id,
            state.scale_factor,
            command,
            deadline,
            state.total_steps,
            state.batch_size,
            checkpoint,
            resume_step=state.steps_done,
            epoch_steps=state.iterations_per_epoch,
            gpu_type=gpu_type,
            partner=partner,
        )
        if self.backend.start(launch):
            granted = self.backend.granted_type(job_id)
            if granted != gpu_type:
                log.warning("job %d was planned on %s GPUs but the cluster granted it %s", job_id, gpu_type, granted)
            prior = record.rates.get(granted, {}).get(str(state.batch_size))
            self.running[job_id] = _Running(
                self.elapsed(), wanted, deadline, record.steps, state.batch_size, gpu_type, granted, prior, partner
            )
            record.starts.append(self.elapsed())
            record.gpu_types.append(granted)
            record.partners.append(partner)

    def _release(self, job_id: int, until: float | None = None) -> None:
        """Give the lease's GPUs back; the job held them until `until` (elapsed seconds: a finished job's last step,
        not the later round boundary its lease is released at), else until now."""
        lease = self.running.pop(job_id, None)
        if lease is not None:
            self._keep_output(job_id)  # what it printed last, before its processes go
            self.backend.release(job_id)
            end = max(lease.started, until) if until is not None else self.elapsed()
            by_type = self.records[job_id].run_seconds_by_type
            by_type[lease.granted] = by_type.get(lease.granted, 0.0) + (end - lease.started) * share_of(lease.partner)

    def save(self) -> None:
        """Journal the state now (a source makes a cancellation durable before it lets the queue forget it)."""
        self._save()

    def _save(self, final: bool = False) -> None:
        """Journal the state; only then delete the checkpoints it no longer names (the journal and the files on
        disk always agree, whenever the scheduler dies); then tell the observer."""
        self.run_settings.update(self.source.journaled())
        self.run_settings["rounds"] = self.view.round_index
        snapshot = Snapshot(self.policy, self.view.jobs, self.rounds)
        self.journal.save(self.run_settings, list(self.records.values()), snapshot.dumps())
        for path in self.superseded:
            path.unlink(missing_ok=True)
        self.superseded.clear()
        if self.observer is not None:
            self.observer.saved(self, final)


def _latest_event(records: Iterable[JobRecord], rounds: Sequence[RoundRecord]) -> float:
    """Elapsed seconds of the last thing the journal records: a lease's start, a finish, a round."""
    times = [t for r in records for t in (*r.starts, r.finish_s or 0.0)]
    return max([0.0, *times, *(r.time_s for r in rounds)])


def _partner(assignment: Assignment, job_id: int) -> int | None:
    """The job the assignment pairs `job_id` with, or None when it runs alone."""
    return next((j for j in assignment.jobs if j != job_id), None)


def calibrated_rates(
    tm: ThroughputModel,
    key: tuple[str, int, int],
    rates: Mapping[str, float],
    measured: Mapping[str, float],
    types: Sequence[str],
) -> dict[str, float]:
    """`rates` (steps/s by GPU type of the (model, batch size, gang) `key`) with the `measured` ones, and each other
    type's scaled from the first measured one (in `types`' order) by the throughput model's ratio between the two:
    the run's scale, not the table's. A type the model cannot compare keeps its rate."""
    calibrated = {**rates, **measured}
    reference = next((t for t in types if t in measured), None)
    here = rate_or_zero(tm, *key, reference) if reference is not None else 0.0
    if reference is None or here <= 0:
        return calibrated
    for gpu_type in rates:
        there = rate_or_zero(tm, *key, gpu_type) if gpu_type not in measured else 0.0
        if there > 0:
            calibrated[gpu_type] = measured[reference] * there / here
    return calibrated


def _measured_at(record: JobRecord, batch_size: int) -> dict[str, float]:
    """The job's smoothed rate at `batch_size` on each GPU type it was measured on there."""
    return {t: by_size[str(batch_size)] for t, by_size in record.rates.items() if str(batch_size) in by_size}


def _at_checkpoint(state: JobState, record: JobRecord) -> JobState:
    """The job as its journaled checkpoint left it: whatever it did after that is lost."""
    state.batch_size, state.total_steps, state.steps_done = record.batch_size, record.total_steps, record.steps
    return state
