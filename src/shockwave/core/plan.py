"""A round's plan: which jobs run, on which GPU type, on how many GPUs; checked the same way for every driver.

An assignment names one job, or a pair of jobs sharing the same GPUs (space sharing: both run at their co-located
rates). Assignments come most deserving first, so a driver that cannot start everything drops from the end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shockwave.core.cluster import ClusterSpec
from shockwave.core.state import JobState


class PlanError(RuntimeError):
    """A policy returned a plan the cluster cannot carry out: a bug in the policy, reported with its name."""


@dataclass(frozen=True)
class Assignment:
    jobs: tuple[int, ...]
    """One job id, or two sharing the GPUs."""
    gpu_type: str
    gpus: int


@dataclass(frozen=True)
class RoundPlan:
    assignments: tuple[Assignment, ...] = ()

    @classmethod
    def on_type(cls, job_ids: Iterable[int], jobs: Mapping[int, JobState], gpu_type: str) -> RoundPlan:
        """Each job alone on its whole gang of `gpu_type` GPUs: what a policy that knows one type returns."""
        return cls(tuple(Assignment((j,), gpu_type, jobs[j].scale_factor) for j in job_ids))

    @property
    def job_ids(self) -> list[int]:
        return [job for assignment in self.assignments for job in assignment.jobs]

    def gpus_by_type(self) -> Counter[str]:
        used: Counter[str] = Counter()
        for assignment in self.assignments:
            used[assignment.gpu_type] += assignment.gpus
        return used


def validate_plan(plan: RoundPlan, cluster: ClusterSpec, jobs: Mapping[int, JobState], policy: str) -> None:
    """Raise PlanError unless every job is active and planned once, on its whole gang (an elastic job: alone, on
    at least one GPU), on GPUs the cluster has and it can run on at its batch size."""

    def refuse(why: str) -> PlanError:
        return PlanError(f"policy {policy!r} planned an impossible round: {why}")

    seen: set[int] = set()
    for assignment in plan.assignments:
        if not 1 <= len(assignment.jobs) <= 2:
            raise refuse(f"{len(assignment.jobs)} jobs share GPUs {assignment.jobs} (one, or a pair)")
        if assignment.gpu_type not in cluster.types:
            raise refuse(f"jobs {assignment.jobs} on {assignment.gpu_type!r}, a GPU type the cluster does not have")
        for job in assignment.jobs:
            if job not in jobs:
                raise refuse(f"job {job} is not active")
            if job in seen:
                raise refuse(f"job {job} is planned twice")
            seen.add(job)
            if jobs[job].spec.elastic:
                if len(assignment.jobs) != 1 or assignment.gpus < 1:
                    raise refuse(f"elastic job {job} given {assignment.gpus} GPUs shared by {assignment.jobs}")
                continue
            if jobs[job].scale_factor != assignment.gpus:
                raise refuse(f"job {job} needs a gang of {jobs[job].scale_factor} GPUs, given {assignment.gpus}")
            if not jobs[job].rates.get(assignment.gpu_type, 0.0) > 0:
                raise refuse(f"job {job} cannot run on {assignment.gpu_type} at batch size {jobs[job].batch_size}")
    for gpu_type, used in plan.gpus_by_type().items():
        if used > cluster.pool(gpu_type).gpus:
            raise refuse(f"{used} {gpu_type} GPUs planned, the cluster has {cluster.pool(gpu_type).gpus}")
