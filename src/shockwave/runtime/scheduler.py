"""The scheduling core on the wall clock: the same policies as the simulator, deciding for real jobs on a backend.

Each round (every `round_seconds`):
1. observe every running gang: steps done, measured throughput (smoothed), newer checkpoints (collected, so a lost
   node or a killed scheduler costs at most the work since), exits: done, crashed (restarted from its checkpoint up
   to `max_restarts` times, then failed with its reason), or asking for another batch size;
2. admit jobs whose (time-scaled) arrival has come;
3. ask the policy for the next round's jobs;
4. stop running jobs it did not choose (they checkpoint and exit; their GPUs are freed and verified free), extend
   the leases of chosen running jobs (no restart), start the others from their checkpoints;
5. journal the state, then wait for the round's end.
A lease runs `hold_seconds` past its round so a job chosen again never stops between rounds.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shockwave.cluster import ClusterSpec
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState, rescale_to_batch_size
from shockwave.runtime.backend import Backend, GangStatus, Launch
from shockwave.runtime.journal import JobRecord, Journal
from shockwave.workload.profile import JobProfile
from shockwave.workload.throughput import ThroughputModel
from shockwave.workload.trace import TraceJob

log = logging.getLogger(__name__)
EMA_ALPHA = 0.5
"""Weight of the newest throughput measurement (the reference smooths with 0.5 too)."""


@dataclass(frozen=True)
class RuntimeSettings:
    round_seconds: float
    hold_seconds: float
    max_restarts: int
    command: list[str]
    """The job command; {family}, {batch_size} and {job_id} are filled in per job."""
    checkpoints: Path
    stop_timeout_s: float = 60.0


@dataclass
class _Running:
    started: float
    """Elapsed seconds at which this lease started."""
    last_step: int
    prior_rate: float | None
    """The job's smoothed rate before this lease: the lease's own rate is blended into it."""
    last_report: float | None = None


@dataclass
class RoundLog:
    time_s: float
    running_jobs: int
    busy_gpus: int


@dataclass
class RuntimeScheduler:
    jobs: list[TraceJob]
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
    rounds: list[RoundLog] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.start_wall: float = self.run_settings.setdefault("start_wall", time.time())
        self.view = SchedulerView(
            now=0.0,
            round_index=self.run_settings.get("rounds", 0),
            round_seconds=self.settings.round_seconds,
            cluster=self.cluster,
            jobs={},
        )
        self.running: dict[int, _Running] = {}
        self.superseded: list[Path] = []
        for index, spec in enumerate(self.jobs):
            self.records.setdefault(
                index, JobRecord(id=index, total_steps=spec.total_steps, batch_size=spec.batch_size)
            )
        self.settings.checkpoints.mkdir(parents=True, exist_ok=True)

    # -- the clock --------------------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.time() - self.start_wall

    def run(self) -> None:
        try:
            while not self._all_settled():
                round_start = time.time()
                self.view.now = self.elapsed()
                self._observe()
                self._admit()
                chosen = [j for j in self.policy.plan(self.view) if j in self.view.jobs]
                self._apply(chosen, round_start)
                self.view.round_index += 1
                self.rounds.append(
                    RoundLog(self.view.now, len(self.running), sum(self.jobs[j].scale_factor for j in self.running))
                )
                self._save()
                self._wait_until(round_start + self.settings.round_seconds)
        finally:
            for job_id in list(self.running):
                self._release(job_id)
            self._save()

    @staticmethod
    def _wait_until(end: float) -> None:
        while (remaining := end - time.time()) > 0:
            time.sleep(min(0.05, remaining))

    def _all_settled(self) -> bool:
        return all(r.status in ("done", "failed") for r in self.records.values())

    # -- observing -------------------------------------------------------------------------------------------------
    def _observe(self) -> None:
        for job_id in list(self.running):
            status = self.backend.status(job_id)
            self._account(job_id, status)
            self._collect_checkpoint(job_id)
            if status.exited:
                self._ended(job_id, status)

    def _account(self, job_id: int, status: GangStatus) -> None:
        """Progress since the last look: job state, measured throughput, the policy's bookkeeping."""
        lease, state, record = self.running[job_id], self.view.jobs[job_id], self.records[job_id]
        if status.step is None or status.reported_at is None:
            return
        rate = status.lease_rate()
        if rate is not None:
            record.measured_throughput = (
                rate if lease.prior_rate is None else (EMA_ALPHA * rate + (1 - EMA_ALPHA) * lease.prior_rate)
            )
            state.throughput = record.measured_throughput
        steps = status.step - lease.last_step
        since = lease.last_report or status.first_step_at
        if steps > 0 and since is not None and status.reported_at > since:
            self.policy.round_executed(self.view, state, status.reported_at - since, steps)
        state.steps_done = min(status.step, state.total_steps)
        lease.last_step, lease.last_report = status.step, status.reported_at

    def _collect_checkpoint(self, job_id: int) -> None:
        record = self.records[job_id]
        newer = self.backend.checkpoint(job_id, newer_than=record.steps)
        if newer is not None:
            step, data = newer
            path = self.settings.checkpoints / f"job-{job_id}-step{step}.ckpt"
            temporary = path.with_suffix(".tmp")
            temporary.write_bytes(data)
            temporary.replace(path)
            if record.checkpoint is not None:
                self.superseded.append(Path(record.checkpoint))
            record.steps, record.checkpoint = step, str(path)

    def _ended(self, job_id: int, status: GangStatus) -> None:
        record, state = self.records[job_id], self.view.jobs[job_id]
        self._release(job_id)
        if status.done:
            record.status, record.steps = "done", state.total_steps
            record.finish_s = (status.reported_at or time.time()) - self.start_wall
            state.steps_done = state.total_steps
            state.last_finish_s = record.finish_s
            self._remove(job_id)
            self._save()  # a completion is durable at once: a scheduler that dies now will not run it again
            log.info("job %d completed at %.1f s", job_id, record.finish_s)
            return
        state.steps_done = record.steps  # whatever came after the last checkpoint is lost
        if status.failure is not None:
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
                self._remove(job_id)
            return
        if status.requested_batch_size is not None and status.requested_batch_size != state.batch_size:
            rescale_to_batch_size(state, status.requested_batch_size, round_up_progress=False)
            self._throughput_after_switch(state)
            record.steps, record.total_steps, record.batch_size = (
                state.steps_done,
                state.total_steps,
                state.batch_size,
            )

    def _throughput_after_switch(self, state: JobState) -> None:
        # Without a rate for the new batch size, keep the old one until the job reports at the new one.
        with contextlib.suppress(LookupError):
            state.throughput = self.throughputs.throughput(state.family.name, state.batch_size, state.scale_factor)

    def _remove(self, job_id: int) -> None:
        state = self.view.jobs.pop(job_id)
        self.policy.job_removed(self.view, state)

    # -- admitting --------------------------------------------------------------------------------------------------
    def _admit(self) -> None:
        for job_id, spec in enumerate(self.jobs):
            record = self.records[job_id]
            settled = record.status in ("done", "failed")
            if settled or job_id in self.view.jobs or spec.arrival > self.view.now:
                continue  # a resumed run re-admits its active jobs here, at their last checkpoint
            throughput = record.measured_throughput or self.throughputs.throughput(
                spec.model, record.batch_size, spec.scale_factor
            )
            state = JobState.admit(job_id, spec, self.profiles[job_id], throughput)
            state.batch_size, state.total_steps, state.steps_done = (
                record.batch_size,
                record.total_steps,
                record.steps,
            )
            record.status = "active"
            self.view.jobs[job_id] = state
            self.policy.job_added(self.view, state)

    # -- acting ---------------------------------------------------------------------------------------------------
    def _apply(self, chosen: list[int], round_start: float) -> None:
        keep = set(chosen)
        stopping = [j for j in self.running if j not in keep]
        for job_id in stopping:
            self.backend.stop(job_id)
        self._drain(stopping)
        deadline = round_start + self.settings.round_seconds + self.settings.hold_seconds
        for job_id in chosen:
            if job_id in self.running:
                self.backend.extend(job_id, deadline)
            elif job_id in self.view.jobs:
                self._start(job_id, deadline)

    def _drain(self, stopping: list[int]) -> None:
        """Wait for preempted jobs to checkpoint and exit; one that does not in time is killed."""
        give_up = time.time() + self.settings.stop_timeout_s
        waiting = list(stopping)
        while waiting:
            for job_id in list(waiting):
                status = self.backend.status(job_id)
                if status.exited or time.time() > give_up:
                    self._account(job_id, status)
                    self._collect_checkpoint(job_id)
                    if status.exited and not status.done and status.failure is None:
                        self.records[job_id].preemptions += 1
                    self._ended(job_id, status)
                    waiting.remove(job_id)
            time.sleep(0.05)

    def _start(self, job_id: int, deadline: float) -> None:
        record, state = self.records[job_id], self.view.jobs[job_id]
        checkpoint = Path(record.checkpoint).read_bytes() if record.checkpoint else None
        values = {"family": state.family.name, "batch_size": state.batch_size, "job_id": job_id}
        command = [part.format(**values) for part in self.settings.command]
        launch = Launch(job_id, state.scale_factor, command, deadline, state.total_steps, state.batch_size, checkpoint)
        if self.backend.start(launch):
            self.running[job_id] = _Running(self.elapsed(), record.steps, record.measured_throughput)
            record.starts.append(self.elapsed())

    def _release(self, job_id: int) -> None:
        lease = self.running.pop(job_id, None)
        if lease is not None:
            self.backend.release(job_id)
            self.records[job_id].run_seconds += self.elapsed() - lease.started

    def _save(self) -> None:
        """Journal the state; only then delete the checkpoints it no longer names (the journal and the files on
        disk always agree, whenever the scheduler dies)."""
        self.run_settings["rounds"] = self.view.round_index
        self.journal.save(self.run_settings, list(self.records.values()))
        for path in self.superseded:
            path.unlink(missing_ok=True)
        self.superseded.clear()
