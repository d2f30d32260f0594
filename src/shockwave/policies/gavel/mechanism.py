"""Gavel's round mechanism (GAVEL_SPEC.md §4.2-4.3): turn a time-fraction allocation into each round's job set.

An allocator returns x[j][t] in [0, 1], the fraction of time job j should hold its gang on GPUs of type t. Each round
a job's priority on type t is x[j][t] divided by the share of type t's executed time it has received since the
allocation was last recomputed. Each type's queue is sorted by (priority, deficit, x) descending; the queues are
taken in the reference's type order (V100, P100, K80; shuffled every round for policies that ignore throughput
differences), and a job is placed on the first type whose queue reaches it while its gang fits. The allocation is
recomputed when the job set changed, but at most once per `min_realloc_interval_s` of simulated time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from shockwave.cluster import ClusterSpec
from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy, SchedulerView, int_ids, json_ids
from shockwave.core.state import JobState

Allocation = dict[int, dict[str, float]]
"""job -> GPU type -> fraction of time."""
TYPE_ORDER = ("v100", "p100", "k80")
"""The reference's order of per-type queues; other types follow, alphabetically."""
REFERENCE_TYPE = "v100"
"""Whose throughput the heterogeneity-agnostic FTF and OSSP variants use on every type (spec §3.3)."""


@dataclass(frozen=True)
class AllocationInputs:
    """What an allocator sees: rows in ascending job id, columns the cluster's GPU types in alphabetical order."""

    job_ids: list[int]
    gpu_types: tuple[str, ...]
    gpus_by_type: tuple[int, ...]
    throughputs: dict[int, dict[str, float]]
    """Steps/s of the whole gang per type (0 where the job cannot run)."""
    scale_factors: dict[int, int]
    remaining_steps: dict[int, int]
    times_since_start: dict[int, float]
    weights: dict[int, float]

    @classmethod
    def from_view(cls, view: SchedulerView) -> AllocationInputs:
        jobs = view.jobs.values()
        types = tuple(sorted(view.cluster.types))
        return cls(
            job_ids=sorted(view.jobs),
            gpu_types=types,
            gpus_by_type=tuple(view.cluster.pool(t).gpus for t in types),
            throughputs={j.id: {t: j.rate(t) for t in types} for j in jobs},
            scale_factors={j.id: j.scale_factor for j in jobs},
            remaining_steps={j.id: j.remaining_steps for j in jobs},
            times_since_start={j.id: view.now - j.arrival_s for j in jobs},
            weights={j.id: j.spec.priority_weight or 1.0 for j in jobs},
        )

    @property
    def gpus(self) -> int:
        return sum(self.gpus_by_type)

    def throughput_matrix(self) -> np.ndarray:
        return np.array([[self.throughputs[j][t] for t in self.gpu_types] for j in self.job_ids])

    def reference_throughput_matrix(self) -> np.ndarray:
        """Every type given the job's V100 throughput (the agnostic variants; the first type without V100s)."""
        ref = REFERENCE_TYPE if REFERENCE_TYPE in self.gpu_types else self.gpu_types[0]
        return np.array([[self.throughputs[j][ref]] * len(self.gpu_types) for j in self.job_ids])

    def scale_factor_matrix(self) -> np.ndarray:
        return np.array([[float(self.scale_factors[j])] * len(self.gpu_types) for j in self.job_ids])

    def column(self, values: dict[int, float] | dict[int, int]) -> np.ndarray:
        return np.array([float(values[j]) for j in self.job_ids])

    def unflatten(self, x: np.ndarray) -> Allocation:
        return {j: {t: float(x[i][k]) for k, t in enumerate(self.gpu_types)} for i, j in enumerate(self.job_ids)}


class Allocator(Protocol):
    name: str
    heterogeneity_aware: bool
    """False: the reference shuffles its type order every round for this policy (spec §4.3)."""

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        """Time fraction per job and type; jobs left out get no rounds until the next recompute."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What the allocator carries from one recompute to the next, as JSON-ready data (see Policy.state_dict)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take up what `state_dict` returned."""
        ...


class Stateless:
    """For allocators that derive each allocation from its inputs alone: there is nothing to keep."""

    heterogeneity_aware = True

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to take up."""


def type_order(cluster: ClusterSpec) -> list[str]:
    known = [t for t in TYPE_ORDER if t in cluster.types]
    return known + sorted(t for t in cluster.types if t not in TYPE_ORDER)


class GavelPolicy(Policy):
    plans_gpu_types = True

    def __init__(self, allocator: Allocator, *, min_realloc_interval_s: float = 1000.0, seed: int = 0) -> None:
        self.allocator = allocator
        self.name = allocator.name
        self.min_realloc_interval_s = min_realloc_interval_s
        self.allocation: Allocation = {}
        self.needs_realloc = False
        self.last_realloc_s = 0.0
        self.job_time: dict[str, dict[int, float]] = {}
        """GPU type -> job -> seconds run there since the last recompute (plus the reseed)."""
        self.worker_time: dict[str, float] = {}
        self.deficits: dict[str, dict[int, float]] = {}
        self.ran_on: dict[int, str] = {}
        """The type each job of the latest plan runs on, for `round_executed`."""
        self.shuffler = random.Random(seed + 5)  # the reference's worker-type shuffler is seeded seed + 5

    @staticmethod
    def _reseed(view: SchedulerView) -> float:
        """Every job's time counter restarts at half a round, so a job that never ran is not infinitely behind."""
        return view.round_seconds / 2

    def _types(self, view: SchedulerView) -> list[str]:
        for gpu_type in view.cluster.types:
            self.job_time.setdefault(gpu_type, {})
            self.worker_time.setdefault(gpu_type, 0.0)
            self.deficits.setdefault(gpu_type, {})
        return list(view.cluster.types)

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        reseed = self._reseed(view)
        for gpu_type in self._types(view):
            self.job_time[gpu_type][job.id] = reseed
            self.deficits[gpu_type][job.id] = 0.0
        self.needs_realloc = True

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        for gpu_type in self._types(view):
            del self.job_time[gpu_type][job.id], self.deficits[gpu_type][job.id]
        self.ran_on.pop(job.id, None)
        self.needs_realloc = True

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int | float) -> None:
        gpu_type = self.ran_on.get(job.id, view.cluster.default_type)
        self.job_time[gpu_type][job.id] += exec_s
        self.worker_time[gpu_type] += exec_s

    def round_failed(self, view: SchedulerView, job: JobState) -> None:
        self.needs_realloc = True

    def state_dict(self) -> dict[str, Any]:
        return {
            "allocation": json_ids(self.allocation),
            "needs_realloc": self.needs_realloc,
            "last_realloc_s": self.last_realloc_s,
            "job_time": {t: json_ids(times) for t, times in self.job_time.items()},
            "worker_time": self.worker_time,
            "deficits": {t: json_ids(d) for t, d in self.deficits.items()},
            "ran_on": json_ids(self.ran_on),
            "shuffler": list(self.shuffler.getstate()[1]),
            "allocator": self.allocator.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.allocation = int_ids(state["allocation"], lambda x: {str(t): float(v) for t, v in x.items()})
        self.needs_realloc = bool(state["needs_realloc"])
        self.last_realloc_s = float(state["last_realloc_s"])
        self.job_time = {str(t): int_ids(times, float) for t, times in state["job_time"].items()}
        self.worker_time = {str(t): float(v) for t, v in state["worker_time"].items()}
        self.deficits = {str(t): int_ids(d, float) for t, d in state["deficits"].items()}
        self.ran_on = int_ids(state["ran_on"], str)
        self.shuffler.setstate((3, tuple(int(v) for v in state["shuffler"]), None))
        self.allocator.load_state_dict(state["allocator"])

    def _reallocate(self, view: SchedulerView) -> None:
        """Settle what each job was owed under the old allocation, then ask the allocator again."""
        elapsed, reseed = view.now - self.last_realloc_s, self._reseed(view)
        for gpu_type in self._types(view):
            times, deficits = self.job_time[gpu_type], self.deficits[gpu_type]
            for job_id, time in times.items():
                should = self.allocation[job_id].get(gpu_type, 0.0) * elapsed if job_id in self.allocation else 0
                deficits[job_id] += should - (time - reseed)
            self.worker_time[gpu_type] = 0.0
            for job_id in times:
                times[job_id] = reseed
                self.worker_time[gpu_type] += reseed
        self.last_realloc_s = view.now
        self.allocation = self.allocator.allocate(AllocationInputs.from_view(view)) if view.jobs else {}
        self.needs_realloc = False

    def _priority(self, job: JobState, gpu_type: str) -> float:
        share = self.allocation.get(job.id, {}).get(gpu_type, 0.0)
        if not share or job.rate(gpu_type) <= 0:
            return 0.0
        worker_time = self.worker_time[gpu_type]
        fraction = self.job_time[gpu_type][job.id] / worker_time if worker_time else 0.0
        return share / fraction if fraction > 0 else share * 1e9

    def _queue(self, view: SchedulerView, gpu_type: str) -> list[tuple[JobState, float]]:
        """The type's jobs by (priority, deficit, x), highest first; ties keep arrival order (a stable sort)."""
        deficits = self.deficits[gpu_type]
        keyed = [
            (job, self._priority(job, gpu_type), self.allocation.get(job.id, {}).get(gpu_type, 0.0))
            for job in view.jobs.values()
        ]
        keyed.sort(key=lambda entry: (entry[1], deficits[entry[0].id], entry[2]), reverse=True)
        return [(job, priority) for job, priority, _ in keyed]

    def plan(self, view: SchedulerView) -> RoundPlan:
        self._types(view)
        # The first recompute happens at time 0 and leaves the clock at 0, so the reference recomputes again at
        # the next change: hence "or last == 0" (spec §4.2).
        if self.needs_realloc and (
            view.now - self.last_realloc_s >= self.min_realloc_interval_s or self.last_realloc_s == 0
        ):
            self._reallocate(view)
        order = type_order(view.cluster)
        if not self.allocator.heterogeneity_aware:
            self.shuffler.shuffle(order)
        free = {t: view.cluster.pool(t).gpus for t in order}
        chosen: dict[int, str] = {}
        for gpu_type in order:
            for job, priority in self._queue(view, gpu_type):
                if free[gpu_type] == 0:
                    break
                if job.id in chosen or job.rate(gpu_type) <= 0 or job.scale_factor > free[gpu_type]:
                    continue
                if not self.may_run(priority):
                    continue
                free[gpu_type] -= job.scale_factor
                chosen[job.id] = gpu_type
        # A job outside the allocation still used up GPUs above but is not run: the reference leaves them idle.
        self.ran_on = {j: t for j, t in chosen.items() if j in self.allocation}
        return RoundPlan(tuple(Assignment((j,), t, view.jobs[j].scale_factor) for j, t in self.ran_on.items()))

    def may_run(self, priority: float) -> bool:
        """Whether a job of this priority may take GPUs this round (any may: idle GPUs help nobody)."""
        return True
