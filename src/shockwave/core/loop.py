"""The scheduling loop the simulator and the runtime both run, and the steps of it that change a job or a policy.

Every round: let the round in progress run to its end (the driver's one place where time moves) and account what
it did; admit the jobs that have arrived; ask the policy for a plan and check it against the cluster and the active
jobs; launch it; log the round. A driver supplies how rounds run (modelled execution, or real jobs on a backend) and
its clock; what a round does to the jobs and the policy goes through this module, so the two cannot drift.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.plan import RoundPlan, validate_plan
from shockwave.core.policy import Colocation, Policy, SchedulerView
from shockwave.core.state import JobState, rescale_to_batch_size
from shockwave.workload_model.goodput import GoodputModel
from shockwave.workload_model.throughput import ThroughputModel, UnknownThroughput, colocated_rates, rate_or_zero

log = logging.getLogger(__name__)
MAX_EMPTY_ROUNDS = 10_000
"""Gavel-style policies may plan nothing for a few rounds while their allocation is throttled, never this long: a
policy that never plans its jobs would otherwise keep a run going forever."""


@dataclass(frozen=True)
class RoundRecord:
    round: int
    time_s: float
    running_jobs: int
    busy_gpus: int


def timeline(rounds: Iterable[RoundRecord]) -> list[list[float | int]]:
    """A result's `timeline`: [time_s, running_jobs, busy_gpus] per round."""
    return [[r.time_s, r.running_jobs, r.busy_gpus] for r in rounds]


class Driver(Protocol):
    def all_settled(self) -> bool:
        """Every job has left for good (completed or given up)."""
        ...

    def advance(self, loop: SchedulingLoop) -> None:
        """Let the round in progress run to its end and account what it did (nothing runs before the first)."""
        ...

    def admit(self, loop: SchedulingLoop) -> None:
        """Admit the jobs that have arrived by now (`SchedulingLoop.admit`)."""
        ...

    def idle(self, loop: SchedulingLoop) -> bool:
        """No job is active: False ends the run; True waits for one (the next `advance` lets the time pass, to the
        next arrival or by a round), planning nothing meanwhile."""
        ...

    def launch(self, loop: SchedulingLoop, plan: RoundPlan) -> RoundPlan:
        """Start the round; returns the part of the plan that really runs."""
        ...

    def round_launched(self, loop: SchedulingLoop) -> None:
        """After each launch (progress reports, the runtime's journal)."""
        ...


def require_plannable(policy: Policy, cluster: ClusterSpec) -> None:
    """Refuse a policy of one GPU type on a cluster of several: it would leave the other types idle."""
    if len(cluster.pools) > 1 and not policy.plans_gpu_types:
        raise InputError(
            f"policy {policy.name!r} schedules one GPU type; the cluster {cluster.describe()} has "
            f"{len(cluster.pools)}: give one type (--gpus N or --cluster TYPE:N)"
        )


class SchedulingLoop:
    def __init__(
        self,
        policy: Policy,
        cluster: ClusterSpec,
        round_seconds: float,
        time: Callable[[], float],
        *,
        round_index: int = 0,
        rounds: list[RoundRecord] | None = None,
        colocation: Colocation | None = None,
        goodput: GoodputModel | None = None,
    ) -> None:
        require_plannable(policy, cluster)
        self.policy = policy
        self.view = SchedulerView(
            time, round_seconds, cluster, round_index=round_index, colocation=colocation, goodput=goodput
        )
        self.rounds: list[RoundRecord] = [] if rounds is None else rounds

    def run(self, driver: Driver) -> None:
        empty = 0  # rounds in a row in which nothing ran while jobs waited
        while not driver.all_settled():
            driver.advance(self)
            driver.admit(self)
            if not self.view.jobs:
                empty = 0  # nothing waited: an idle wait is not a round in which jobs got nothing
                if driver.idle(self):
                    continue
                break
            decided = self.view.now
            launched = driver.launch(self, self.next_plan())
            busy = sum(assignment.gpus for assignment in launched.assignments)
            self.rounds.append(RoundRecord(self.view.round_index, decided, len(launched.job_ids), busy))
            self.view.round_index += 1
            driver.round_launched(self)
            empty = empty + 1 if self.view.jobs and not launched.assignments else 0
            if empty >= MAX_EMPTY_ROUNDS:
                log.warning(
                    "nothing ran for %d rounds while %d jobs waited (policy %s); stopping with them unfinished",
                    empty,
                    len(self.view.jobs),
                    self.policy.name,
                )
                break

    def next_plan(self) -> RoundPlan:
        plan = self.policy.plan(self.view)
        validate_plan(plan, self.view.cluster, self.view.jobs, self.policy.name)
        return plan

    # -- what happens to jobs ----------------------------------------------------------------------------------------
    def admit(self, job: JobState) -> None:
        self.view.jobs[job.id] = job
        self.policy.job_added(self.view, job)

    def progressed(self, job: JobState, train_s: float, steps: int | float) -> None:
        """The job trained `steps` steps (already counted in its progress) in `train_s` seconds."""
        job.failures = 0
        self.policy.round_executed(self.view, job, train_s, steps)

    def stalled(self, job: JobState) -> int:
        """The job ran but made no progress; returns how many rounds in a row that has happened."""
        job.failures += 1
        self.policy.round_failed(self.view, job)
        return job.failures

    def switch_batch_size(
        self, job: JobState, batch_size: int, rates: dict[str, float], *, round_up_progress: bool
    ) -> None:
        job.rates = rates
        rescale_to_batch_size(job, batch_size, round_up_progress=round_up_progress)

    def remove(self, job: JobState) -> None:
        """The job completed or was given up."""
        del self.view.jobs[job.id]
        self.policy.job_removed(self.view, job)


def admission_rates(
    model: ThroughputModel, job_model: str, batch_size: int, gang: int, cluster: ClusterSpec
) -> dict[str, float]:
    """A job's steps per second on each GPU type of the cluster the throughput model knows it on; raises the first
    type's UnknownThroughput when it knows none."""
    rates: dict[str, float] = {}
    missing: UnknownThroughput | None = None
    for gpu_type in cluster.types:
        try:
            rates[gpu_type] = model.throughput(job_model, batch_size, gang, gpu_type)
        except UnknownThroughput as exc:
            missing = missing or exc
    if not rates and missing is not None:
        raise missing
    return rates


def colocation_from(model: ThroughputModel) -> Colocation:
    """Pair rates as the throughput model knows them, at each job's current batch size (asked once per pair)."""
    known: dict[tuple[str, int, str, int, int, str], tuple[float, float] | None] = {}

    def colocated(job: JobState, other: JobState, gpu_type: str) -> tuple[float, float] | None:
        key = (job.family.name, job.batch_size, other.family.name, other.batch_size, job.scale_factor, gpu_type)
        if key not in known:
            known[key] = colocated_rates(model, *key)
        return known[key]

    return colocated


def colocation_on_jobs_scale(model: ThroughputModel) -> Colocation:
    """The throughput model's pair rates (`colocation_from`), each job's scaled by its own rate alone over the
    model's: the pair keeps the model's slowdown from sharing and is weighed on the jobs' scale (measured rates, in
    a real run or its replay) against rates alone. None where the model lists no such pair, or cannot say how fast a
    job of it runs alone there."""
    pairs = colocation_from(model)

    def scale(job: JobState, gpu_type: str) -> float | None:
        table = rate_or_zero(model, job.family.name, job.batch_size, job.scale_factor, gpu_type)
        rate = job.rates.get(gpu_type)
        return rate / table if rate is not None and table > 0 else None

    def colocated(job: JobState, other: JobState, gpu_type: str) -> tuple[float, float] | None:
        pair = pairs(job, other, gpu_type)
        if pair is None:  # most pairs, asked of every two jobs every round: nothing more to look up
            return None
        scales = scale(job, gpu_type), scale(other, gpu_type)
        if scales[0] is None or scales[1] is None:
            return None
        return pair[0] * scales[0], pair[1] * scales[1]

    return colocated


def rates_after_switch(
    job: JobState,
    batch_size: int,
    model: ThroughputModel,
    measured: Mapping[str, float],
    cluster: ClusterSpec | None = None,
) -> dict[str, float] | None:
    """The job's rate per GPU type at `batch_size`: measured there before, else its current rate scaled by the
    throughput model's ratio between the two batch sizes. A type the model does not know both sizes on is left
    out (the job no longer runs there: ResNet-50 at batch size 128 cannot run on a K80); None where no type is left,
    or none of the `cluster`'s pools left holds the job's gang.

    Scaling (rather than the model's absolute rate) matters on a real cluster, whose rates are not the table's; in
    a simulation the current rate is the model's, so the result is exactly the model's rate (x / x == 1).
    """
    rates: dict[str, float] = {}
    for gpu_type, rate in job.rates.items():
        if gpu_type in measured:
            rates[gpu_type] = measured[gpu_type]
            continue
        try:
            before = model.throughput(job.family.name, job.batch_size, job.scale_factor, gpu_type)
            after = model.throughput(job.family.name, batch_size, job.scale_factor, gpu_type)
        except UnknownThroughput:
            continue
        rates[gpu_type] = rate / before * after
    if cluster is not None and not any(job.scale_factor <= cluster.pool(t).gpus for t in rates):
        return None
    return rates or None
