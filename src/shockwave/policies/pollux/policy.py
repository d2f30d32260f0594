"""Pollux (Qiao et al., OSDI'21) as Sia's evaluation runs it: blind to GPU types (every GPU alike, nodes of the
smallest node size), each job's speedup from one goodput model fitted to everything it timed on any type, GPU
counts from the power-mean search (`search.py`), 60 s rounds.

A job's speedup on r GPUs is its estimated goodput there over its goodput at a fair share (the cluster's GPUs over
the jobs, on one node); before it has timed a step it is r over that share. A job may grow to twice the most GPUs
it has run on, at most the smallest GPU type's count and what its batch allows. Moving a job that has run costs
it Pollux's restart discount with 30 s per restart (Pollux's also discounts a first start by the job's age, which
here, where a job arriving on an idle cluster is planned at its arrival, would hold it back). The GPU counts are
then laid onto types: jobs that keep their count stay where they are, the others (largest first) go to the type
with most free GPUs, a job that fits nowhere whole gets what the freest type has. Constants: the artifact's
`pollux_unaware.py` and `cluster_unaware.py`, aaf7a0d.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.elastic import Allocations, restart_factor
from shockwave.policies.pollux.search import Candidate, search
from shockwave.workload_model.goodput import GoodputModel, Measurement

RESTART_PENALTY_S = 30.0


class PolluxPolicy(Policy):
    name = "pollux"
    plans_gpu_types = True
    places_gangs_whole = True
    adapts_jobs = True
    kept = ("allocations",)
    allocations: Allocations

    def __init__(self, p: float = -1.0) -> None:
        if not math.isfinite(p):
            raise InputError(f"policy 'pollux': p must be a number, got {p!r}")
        self.p = p
        self.allocations = Allocations()

    def plan(self, view: SchedulerView) -> RoundPlan:
        jobs = list(view.jobs.values())
        if not jobs:
            return RoundPlan()
        node, reference = _node_size(view.cluster)
        fair = math.ceil(view.cluster.gpus / len(jobs))
        current = self.allocations.current
        candidates = [
            self._candidate(view, job, reference, node, fair, current.get(job.id, ("", 0))[1]) for job in jobs
        ]
        gpus = search(candidates, view.cluster.gpus, self.p)
        wanted = {job.id: g for job, g in zip(jobs, gpus, strict=True) if g > 0}
        chosen = _lay_out(view.cluster, wanted, current, {j.id: j for j in jobs if not j.spec.elastic})
        self.allocations.record(view, chosen)
        return RoundPlan(tuple(Assignment((j,), t, g) for j, (t, g) in sorted(chosen.items())))

    def _candidate(
        self, view: SchedulerView, job: JobState, reference: str, node: int, fair: int, now: int
    ) -> Candidate:
        """The job's scaled speedups on 0..bound GPUs, discounted where its count changes."""
        factor = 1.0  # a job that has not run yet loses nothing by starting
        if job.run_time_s > 0:
            factor = restart_factor(view.now - job.arrival_s, self.allocations.restarts_of(job), RESTART_PENALTY_S)
        if not job.spec.elastic:  # a trace's job: its gang, where a type runs it, or nothing
            gang = job.scale_factor
            fits = any(job.rate(p.gpu_type) > 0 and gang <= p.gpus for p in view.cluster.pools)
            value = (gang / fair if gang == now else gang / fair * factor) / node if fits else 0.0
            return Candidate((0.0,) * gang + (value,), now, (0, gang))
        model = view.goodput
        if model is None:
            raise InputError("policy 'pollux': elastic jobs need a goodput model (Sia's workloads with their profiles)")
        name = job.family.name
        measured = _merged(job)
        cap = min(pool.gpus for pool in view.cluster.pools)
        most = max((m[1] for m in measured), default=0)
        bound = min(max(2 * most, 1), cap, model.largest_gang(name, reference))
        speedups = [r / fair for r in range(bound + 1)]
        if job.training is not None and measured:
            estimate = _estimator(model, job, reference, measured)
            base = estimate(fair, 1)
            if base > 0:
                speedups = [0.0] + [estimate(r, None) / base for r in range(1, bound + 1)]
        scaled = tuple((s if r == now else s * factor) / node for r, s in enumerate(speedups))
        return Candidate(scaled, min(now, bound))

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        self.allocations.added()

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        self.allocations.forget(job)

    def summary(self) -> dict[str, Any]:
        return {"pollux": {"p": self.p, **self.allocations.summary()}}


def _estimator(
    model: GoodputModel, job: JobState, reference: str, measured: list[Measurement]
) -> Callable[[int, int | None], float]:
    """The job's estimated goodput on (GPUs, nodes or None: as few as hold them) of the reference type."""

    def estimate(gpus: int, nodes: int | None) -> float:
        return model.goodput(
            job.family.name,
            reference,
            gpus,
            model.max_batch(job.family.name),
            training=job.training,
            measured=measured,
            nodes=nodes,
        )

    return estimate


def _merged(job: JobState) -> list[Measurement]:
    """Everything the job timed, on any type, the first time of each shape kept (Pollux fits one model)."""
    seen: dict[tuple[int, int, float], Measurement] = {}
    for steps in job.measured.values():
        for m in steps:
            seen.setdefault(m[:3], m)
    return list(seen.values())


def _node_size(cluster: ClusterSpec) -> tuple[int, str]:
    """Pollux's node: the smallest servers' GPUs, and the first type with servers that small (whose per-GPU
    batch range its jobs are modelled with)."""
    pool = min(cluster.pools, key=lambda p: p.gpus_per_server)
    return pool.gpus_per_server, pool.gpu_type


def _lay_out(
    cluster: ClusterSpec,
    gpus: dict[int, int],
    current: dict[int, tuple[str, int]],
    rigid: dict[int, JobState] | None = None,
) -> dict[int, tuple[str, int]]:
    """GPU counts onto types: kept counts stay on their type, the rest largest first on the freest type; a rigid
    job only whole, on a type that runs it."""
    rigid = rigid or {}
    free = {pool.gpu_type: pool.gpus for pool in cluster.pools}
    chosen: dict[int, tuple[str, int]] = {}
    for j, g in gpus.items():
        here = current.get(j)
        runs_there = here is not None and (j not in rigid or rigid[j].rate(here[0]) > 0)
        if here is not None and runs_there and here[1] == g and free[here[0]] >= g:
            chosen[j] = here
            free[here[0]] -= g
    for j, g in sorted(gpus.items(), key=lambda item: (-item[1], item[0])):
        if j in chosen:
            continue
        fits = [t for t in free if free[t] >= g and (j not in rigid or rigid[j].rate(t) > 0)]
        if j in rigid and not fits:
            continue
        gpu_type = max(fits or free, key=lambda t: free[t])
        given = min(g, free[gpu_type])
        if given > 0:
            chosen[j] = (gpu_type, given)
            free[gpu_type] -= given
    return chosen
