"""The service's side of the runtime's scheduler (`RuntimeScheduler`): its jobs come from the queue (`QueueSource`)
and what it does is told to the queue, the dashboard and the jobs' logs (`StoreObserver`). The runtime runs the same
loop for a trace and for a service; only its source and its observer differ.

At each round boundary, before the policy plans, the source takes in what the API wrote: a new submission joins the
run (its arrival is its submission, on the run's clock) and a cancellation ends its job (a running one is killed:
nothing of it is wanted any more). Cancellations are also taken in between the round's polls of the running jobs, so
a running job stops within a poll (`POLL_S`) of its cancellation. Whenever the runtime journals, the observer writes
back each job's state, GPUs, progress, batch size, expected finish and rho; at each launch, the round's plan and what
/metrics serves. A job's output goes to `DIR/logs/NAME.log`.

Ids: the run knows job i as the i-th submission it took in (the trace it writes at the end has them in that order);
the store's ids are journaled beside (`QueueLink.journaled`), so a resumed service rebuilds the same jobs from the
queue, and takes in whatever was submitted while it was down.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from shockwave.core.cluster import ClusterSpec
from shockwave.core.plan import RoundPlan
from shockwave.core.state import JobState
from shockwave.io.private import append_private
from shockwave.runtime.journal import MAX_SECONDS, SETTLED, JobRecord
from shockwave.runtime.run import measured
from shockwave.runtime.scheduler import RuntimeScheduler
from shockwave.service.api import SchedulerMetrics
from shockwave.service.spec import JobShape
from shockwave.service.store import Job, JobUpdate, Placement, Store
from shockwave.workload_model.entities import Entities
from shockwave.workload_model.job import Job as WorkloadJob

log = logging.getLogger(__name__)


class TakenIn(BaseModel):
    """A job the service took in, as its journal keeps it: its queue row, its arrival (run seconds) and its shape.
    Never its command, which only the queue (an authenticated submission) holds."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

    store_id: Annotated[int, Field(ge=1)]
    arrival: Annotated[float, Field(ge=0, le=MAX_SECONDS)]
    job: JobShape


@dataclass
class QueueLink:
    """The jobs the run took in from the queue, in the run's order (job i is `taken[i]`), and the command each runs
    (its spec's; None: the service's, for a built-in workload)."""

    store: Store
    entities: Entities | None = None
    """The entities the policy shares the cluster between (`--policy-param entities=FILE`): each job joins its
    spec's entity (else the file's default)."""
    taken: list[TakenIn] = field(default_factory=list)
    run_ids: dict[int, int] = field(default_factory=dict)
    """Each taken queue row's job id in the run."""
    commands: list[list[str] | None] = field(default_factory=list)
    invalid: dict[int, str] = field(default_factory=dict)
    """Jobs whose queue row cannot be used any more (a resumed service found it corrupt or gone): why. They never
    run again."""
    published: dict[int, JobUpdate] = field(default_factory=dict)
    """What the store was last told of each job (only news is written)."""
    metrics: SchedulerMetrics = field(default_factory=SchedulerMetrics)
    """The latest round's numbers, for /metrics (replaced whole, so the API's threads read a consistent one)."""

    def joined(self, job: Job, arrival: float) -> int:
        """Take the (valid) queued `job` in at `arrival`; returns its id in the run."""
        assert job.spec is not None
        return self._add(TakenIn(store_id=job.id, arrival=arrival, job=job.spec.shape), job.spec.command)

    def _add(self, taken: TakenIn, command: list[str] | None) -> int:
        self.taken.append(taken)
        self.commands.append(command)
        job_id = len(self.taken) - 1
        self.run_ids[taken.store_id] = job_id
        entity = self.shape(job_id).entity
        if self.entities is not None and entity is not None:
            self.entities.jobs[job_id] = entity
        return job_id

    def journaled(self) -> list[dict[str, Any]]:
        """What a resumed service rebuilds its jobs from (the journal's `service_jobs`)."""
        return [taken.model_dump(mode="json") for taken in self.taken]

    @classmethod
    def restored(cls, store: Store, journaled: list[TakenIn], entities: Entities | None) -> QueueLink:
        """The link a journal recorded, with each job's command from the queue, which never forgets a job. A job
        whose row is now invalid or gone keeps its place (the journal has its shape) but is marked `invalid`."""
        by_id = {job.id: job for job in store.new_since(0)}
        link = cls(store, entities)
        for job_id, taken in enumerate(journaled):
            row = by_id.get(taken.store_id)
            spec = row.spec if row is not None else None
            link._add(taken, spec.command if spec is not None else None)
            if spec is None:
                link.invalid[job_id] = row.reason if row is not None and row.reason else "its queue row is gone"
        return link

    @property
    def last_store_id(self) -> int:
        return self.taken[-1].store_id if self.taken else 0

    def shape(self, job_id: int) -> JobShape:
        return self.taken[job_id].job

    def name(self, job_id: int) -> str:
        return self.shape(job_id).name

    def jobs(self) -> list[WorkloadJob]:
        """Every job taken in, as the scheduling loop admits it."""
        return [self.shape(i).job(taken.arrival) for i, taken in enumerate(self.taken)]


@dataclass
class QueueSource:
    """The runtime's jobs, from the queue: it never runs out of them (the service stops only when asked)."""

    link: QueueLink
    endless: bool = True
    skipped: set[int] = field(default_factory=set)
    """Invalid queue rows already reported."""

    def take_in(self, runtime: RuntimeScheduler, boundary: bool) -> None:
        if boundary:
            self._take_submissions(runtime)
        self._take_cancellations(runtime)

    def allowed_types(self, job_id: int) -> Collection[str] | None:
        return self.link.shape(job_id).gpu_types

    def command(self, job_id: int) -> list[str] | None:
        return self.link.commands[job_id]

    def journaled(self) -> dict[str, Any]:
        return {"service_jobs": self.link.journaled()}

    def _take_submissions(self, runtime: RuntimeScheduler) -> None:
        for job in self.link.store.new_since(self.link.last_store_id):
            if job.spec is None:  # quarantined: never taken in
                if job.id not in self.skipped:
                    log.warning("queued job %d is not taken in: %s", job.id, job.reason)
                    self.skipped.add(job.id)
                continue
            arrival = min(runtime.view.now, max(0.0, job.submitted_s - runtime.start_wall))
            spec = job.spec.job(arrival)
            job_id, added = self.link.joined(job, arrival), runtime.add(spec, cancelled=job.state == "cancelled")
            if added != job_id:
                raise RuntimeError(f"the run took job {added} in as the queue's job {job_id}: their orders differ")
            log.info("job %d (%s) taken in: %d GPU(s), %d steps", job_id, job.name, spec.scale_factor, spec.total_steps)

    def _take_cancellations(self, runtime: RuntimeScheduler) -> None:
        for job in self.link.store.pending_cancellations():
            job_id = self.link.run_ids.get(job.id)
            if job_id is None:  # submitted and cancelled since the submissions were taken in: next round
                continue
            status = runtime.records[job_id].status
            ended = status in ("done", "failed")  # in the round the operator cancelled it
            if status not in SETTLED:
                runtime.end(job_id, "cancelled")
                log.info("job %d (%s) cancelled", job_id, job.name)
            runtime.save()  # durable before the store forgets the request: a crash now cancels it again on resume
            self.link.store.cancellation_done(job.id, status if ended else None)  # type: ignore[arg-type]
            if ended:
                self.link.published.pop(job_id, None)  # its news was refused while the store said cancelled


@dataclass
class StoreObserver:
    """Tells the queue (and so the API and the dashboard) what the runtime did, and keeps each job's output."""

    link: QueueLink
    logs: Path
    alone_s: dict[int, float] = field(default_factory=dict)
    """Each job's T_iso at its latest rates: a running job's rho is its projected time over this."""
    finished_rho: dict[int, float] = field(default_factory=dict)
    """Each finished job's rho as the run's result counts it (`shockwave.runtime.run.measured`), refreshed when a
    job finishes and when the service stops, so the API, the dashboard and results.json say the same."""
    rho_of: frozenset[int] = frozenset()
    """The finished jobs `finished_rho` was counted over."""
    last_round_start: float | None = None

    def output(self, job_id: int, chunk: bytes) -> None:
        append_private(self.logs / f"{self.link.name(job_id)}.log", chunk)

    def saved(self, runtime: RuntimeScheduler, final: bool) -> None:
        """Only news is written; at the end, rates measured since the last finish count in results.json, so the
        queue says the same."""
        self._refresh_rho(runtime, force=final)
        now = runtime.elapsed()
        updates: dict[int, JobUpdate] = {}
        rhos: dict[int, float | None] = {}
        for job_id, record in runtime.records.items():
            news, before = self._news(runtime, job_id, record, now), self.link.published.get(job_id)
            if news is None or news == before:
                continue
            store_id = self.link.taken[job_id].store_id
            if before is not None and before.get("state") == news.get("state") == "done":
                rhos[store_id] = news.get("rho")  # more jobs finished, or rates were measured: the metric moved
            else:
                updates[store_id] = news
            self.link.published[job_id] = news
        if updates:
            self.link.store.update_many(updates)
        if rhos:
            self.link.store.update_finished_rho(rhos)

    def _refresh_rho(self, runtime: RuntimeScheduler, force: bool) -> None:
        done = frozenset(i for i, r in runtime.records.items() if r.status == "done")
        if force or done != self.rho_of:
            run = measured(runtime.records, runtime.jobs, runtime.throughputs, runtime.cluster, quiet=True)
            self.finished_rho, self.rho_of = run.rhos(runtime.cluster.gpus), done

    def _news(self, runtime: RuntimeScheduler, job_id: int, record: JobRecord, now: float) -> JobUpdate | None:
        """What the store should say of the job now (None: nothing it does not know)."""
        if record.status == "done":
            return JobUpdate(
                state="done",
                gpu_type=None,
                gpus=None,
                progress_steps=record.total_steps,
                total_steps=record.total_steps,
                batch_size=record.batch_size,
                estimated_finish_s=runtime.start_wall + (record.finish_s or now),
                rho=self.finished_rho.get(job_id),
            )
        if record.status == "failed":
            return JobUpdate(state="failed", gpu_type=None, gpus=None, reason=record.reason)
        state = runtime.view.jobs.get(job_id)
        if record.status != "active" or state is None:
            return None
        lease = runtime.running.get(job_id)
        finish, rho = self._estimates(job_id, state, runtime.cluster, self.link.taken[job_id].arrival, now)
        return JobUpdate(
            state="running" if lease is not None else "queued",
            gpu_type=lease.granted if lease is not None else None,
            gpus=state.scale_factor if lease is not None else None,
            progress_steps=state.steps_done,
            total_steps=state.total_steps,
            batch_size=state.batch_size,
            estimated_finish_s=None if finish is None else runtime.start_wall + finish,
            rho=rho,
        )

    def _estimates(
        self, job_id: int, state: JobState, cluster: ClusterSpec, arrival: float, now: float
    ) -> tuple[float | None, float | None]:
        """(finish, rho) if the job goes on at its pace since it arrived (run seconds; None before any progress).

        The pace includes the rounds it waited, so the finish is what the cluster's sharing gives it, not what a
        lease alone would; T_iso is its time at its equal share at its current (measured) rates."""
        rate = cluster.equal_share_rate(state.scale_factor, state.rate)
        if rate > 0:
            self.alone_s[job_id] = state.total_steps / rate
        done = state.steps_done / state.total_steps if state.total_steps else 0.0
        if done <= 0 or now <= arrival:
            return None, None
        finish = arrival + (now - arrival) / done
        alone = self.alone_s.get(job_id)
        return finish, (finish - arrival) / alone if alone else None

    def idle(self, runtime: RuntimeScheduler) -> None:
        """An idle round, as the dashboard and /metrics show it: no GPU busy, nothing solved."""
        self.launched(runtime, RoundPlan(), None)

    def launched(self, runtime: RuntimeScheduler, plan: RoundPlan, solve_s: float | None) -> None:
        """The round's placements for the dashboard, and its numbers for /metrics."""
        busy = plan.gpus_by_type()
        placements = [
            Placement(job=self.link.name(job_id), gpu_type=a.gpu_type, gpus=a.gpus)
            for a in plan.assignments
            for job_id in a.jobs
        ]
        now = runtime.clock.now()
        cluster = runtime.cluster
        self.link.store.record_round(now, {t: busy.get(t, 0) for t in cluster.types}, placements)
        held: Counter[tuple[str, str]] = Counter()
        for a in plan.assignments:
            tenants = {self.link.shape(job_id).tenant for job_id in a.jobs} - {None}
            for tenant in tenants:
                held[(str(tenant), a.gpu_type)] += a.gpus
        self.link.metrics = SchedulerMetrics(
            gpu_utilisation={p.gpu_type: busy.get(p.gpu_type, 0) / p.gpus for p in cluster.pools},
            tenant_gpus=dict(held),
            solve_seconds=solve_s,
            round_seconds=now - self.last_round_start if self.last_round_start is not None else None,
        )
        self.last_round_start = now
