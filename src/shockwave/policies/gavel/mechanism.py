"""Gavel's round mechanism (spec §5.0): turn a time-fraction allocation into each round's job set.

An allocator returns x_j in [0, 1], the fraction of rounds job j should hold its gang. Each round a job's priority
is x_j divided by the share of executed time it has received since the allocation was last recomputed; jobs are
taken by (priority, deficit, x) descending while their gangs fit. The allocation is recomputed when the job set
changed, but at most once per `min_realloc_interval_s` of simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from shockwave.core.plan import RoundPlan
from shockwave.core.policy import Policy, SchedulerView, int_ids, json_ids
from shockwave.core.state import JobState


@dataclass(frozen=True)
class AllocationInputs:
    """What an allocator sees, rows in ascending job id."""

    job_ids: list[int]
    throughputs: dict[int, float]
    scale_factors: dict[int, int]
    remaining_steps: dict[int, int]
    times_since_start: dict[int, float]
    gpus: int

    @classmethod
    def from_view(cls, view: SchedulerView) -> AllocationInputs:
        jobs = view.jobs.values()
        return cls(
            job_ids=sorted(view.jobs),
            throughputs={j.id: j.rate(view.cluster.default_type) for j in jobs},
            scale_factors={j.id: j.scale_factor for j in jobs},
            remaining_steps={j.id: j.remaining_steps for j in jobs},
            times_since_start={j.id: view.now - j.arrival_s for j in jobs},
            gpus=view.default_gpus,
        )


class Allocator(Protocol):
    name: str

    def allocate(self, inputs: AllocationInputs) -> dict[int, float]:
        """Time fraction per job; jobs left out get no rounds until the next recompute."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What the allocator carries from one recompute to the next, as JSON-ready data (see Policy.state_dict)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take up what `state_dict` returned."""
        ...


class Stateless:
    """For allocators that derive each allocation from its inputs alone: there is nothing to keep."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to take up."""


class GavelPolicy(Policy):
    def __init__(self, allocator: Allocator, *, min_realloc_interval_s: float = 1000.0) -> None:
        self.allocator = allocator
        self.name = allocator.name
        self.min_realloc_interval_s = min_realloc_interval_s
        self.allocation: dict[int, float] = {}
        self.needs_realloc = False
        self.last_realloc_s = 0.0
        self.job_time: dict[int, float] = {}
        self.worker_time = 0.0
        self.deficits: dict[int, float] = {}

    @staticmethod
    def _reseed(view: SchedulerView) -> float:
        """Every job's time counter restarts at half a round, so a job that never ran is not infinitely behind."""
        return view.round_seconds / 2

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        self.job_time[job.id] = self._reseed(view)
        self.deficits[job.id] = 0.0
        self.needs_realloc = True

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        del self.job_time[job.id], self.deficits[job.id]
        self.needs_realloc = True

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int) -> None:
        self.job_time[job.id] += exec_s
        self.worker_time += exec_s

    def round_failed(self, view: SchedulerView, job: JobState) -> None:
        self.needs_realloc = True

    def state_dict(self) -> dict[str, Any]:
        return {
            "allocation": json_ids(self.allocation),
            "needs_realloc": self.needs_realloc,
            "last_realloc_s": self.last_realloc_s,
            "job_time": json_ids(self.job_time),
            "worker_time": self.worker_time,
            "deficits": json_ids(self.deficits),
            "allocator": self.allocator.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.allocation = int_ids(state["allocation"], float)
        self.needs_realloc = bool(state["needs_realloc"])
        self.last_realloc_s = float(state["last_realloc_s"])
        self.job_time = int_ids(state["job_time"], float)
        self.worker_time = float(state["worker_time"])
        self.deficits = int_ids(state["deficits"], float)
        self.allocator.load_state_dict(state["allocator"])

    def _reallocate(self, view: SchedulerView) -> None:
        """Settle what each job was owed under the old allocation, then ask the allocator again."""
        elapsed, reseed = view.now - self.last_realloc_s, self._reseed(view)
        for job_id, time in self.job_time.items():
            should = self.allocation[job_id] * elapsed if job_id in self.allocation else 0
            self.deficits[job_id] += should - (time - reseed)
        self.worker_time = 0.0
        for job_id in self.job_time:
            self.job_time[job_id] = reseed
            self.worker_time += reseed
        self.last_realloc_s = view.now
        self.allocation = self.allocator.allocate(AllocationInputs.from_view(view)) if view.jobs else {}
        self.needs_realloc = False

    def _priority(self, job: JobState, gpu_type: str) -> float:
        share = self.allocation.get(job.id)
        if not share or job.rate(gpu_type) <= 0:
            return 0.0
        fraction = self.job_time[job.id] / self.worker_time if self.worker_time else 0.0
        return share / fraction if fraction > 0 else share * 1e9

    def plan(self, view: SchedulerView) -> RoundPlan:
        # The first recompute happens at time 0 and leaves the clock at 0, so the reference recomputes again at
        # the next change: hence "or last == 0" (spec notes §2.1).
        if self.needs_realloc and (
            view.now - self.last_realloc_s >= self.min_realloc_interval_s or self.last_realloc_s == 0
        ):
            self._reallocate(view)
        gpu_type = view.cluster.default_type
        priority = {j.id: self._priority(j, gpu_type) for j in view.jobs.values()}
        queue = sorted(
            view.jobs.values(),
            key=lambda j: (priority[j.id], self.deficits[j.id], self.allocation.get(j.id, 0.0)),
            reverse=True,
        )
        free = view.default_gpus
        chosen: list[int] = []
        for job in queue:
            if free == 0:
                break
            if job.rate(gpu_type) <= 0 or job.scale_factor > free or not self.may_run(priority[job.id]):
                continue
            free -= job.scale_factor
            chosen.append(job.id)
        # A job outside the allocation still used up GPUs above but is not run: the reference leaves them idle.
        return view.plan_on_default_type(j for j in chosen if j in self.allocation)

    def may_run(self, priority: float) -> bool:
        """Whether a job of this priority may take GPUs this round (any may: idle GPUs help nobody)."""
        return True
