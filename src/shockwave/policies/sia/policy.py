"""Sia (SOSP'23): every round, each job's GPU type and count from one ILP over configurations, valued by the job's
goodput there (`configs.py`, `ilp.py`); goodput-adaptive jobs pick their batch themselves.

A job's goodput is known on the types it has run on; elsewhere it is projected from the first of those by the
types' one-GPU throughputs, and a job that has not run yet is offered one GPU of any type. A job may grow to twice
the most GPUs it has run on. Changing a running job's configuration costs it a restart, so every configuration but
its current one is discounted by how much of its life restarts have taken (`restart_factor`; a job that is
not running, or younger than one restart, is not discounted), and a job still restoring keeps its
configuration. Constants are the artifact's (`sia.py`, aaf7a0d).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.elastic import Allocations
from shockwave.policies.sia.configs import Config, Knowledge, configurations, goodput_row, rigid_options
from shockwave.policies.sia.ilp import LAMBDA_N, Option, P, choose
from shockwave.workload_model.sia.profiles import DEFAULT_RESTART_S

ASSUMED_RESTART_S = {"bert": 120.0, "cifar10": 30.0, "deepspeech2": 25.0, "imagenet": 250.0, "yolov3": 45.0}
"""Restart seconds Sia's policy assumes per application (not quite what its simulator charges); others 30 s."""


class SiaPolicy(Policy):
    name = "sia"
    plans_gpu_types = True
    places_gangs_whole = True
    adapts_jobs = True
    kept = ("allocations",)
    allocations: Allocations

    def __init__(self, p: float = P, lambda_n: float = LAMBDA_N, project_throughputs: bool = True) -> None:
        if not (math.isfinite(p) and p != 0):
            raise InputError(f"policy 'sia': p must be a non-zero number, got {p!r}")
        if not (math.isfinite(lambda_n) and (lambda_n > 1 if p < 0 else lambda_n >= 0)):
            bound = "> 1 with p < 0 (else no job is worth starting)" if p < 0 else ">= 0"
            raise InputError(f"policy 'sia': lambda_n must be a number {bound}, got {lambda_n!r}")
        self.p, self.lambda_n, self.project = p, lambda_n, project_throughputs
        self.allocations = Allocations()
        self._configs: tuple[ClusterSpec, list[Config]] | None = None

    def configs(self, cluster: ClusterSpec) -> list[Config]:
        if self._configs is None or self._configs[0] is not cluster:
            self._configs = (cluster, configurations(cluster))
        return self._configs[1]

    def plan(self, view: SchedulerView) -> RoundPlan:
        options: list[Option] = []
        for job in view.jobs.values():
            options += self._options(view, job)
        pinned = {j: Config(*config) for j, config in self.allocations.restoring(view.now).items()}
        capacities = {t: view.cluster.pool(t).gpus for t in sorted(view.cluster.types)}
        chosen = choose(options, capacities, p=self.p, lambda_n=self.lambda_n, pinned=pinned)
        self.allocations.record(view, {j: (c.gpu_type, c.gpus) for j, c in chosen.items()})
        return RoundPlan(tuple(Assignment((j,), c.gpu_type, c.gpus) for j, c in sorted(chosen.items())))

    def _options(self, view: SchedulerView, job: JobState) -> list[Option]:
        now = self.allocations.current.get(job.id)
        if now is None:  # a job that waits (or never ran) loses nothing by starting
            return job_options(job.id, job, view, self.configs(view.cluster), None, 1.0, project=self.project)
        penalty = ASSUMED_RESTART_S.get(job.family.name, DEFAULT_RESTART_S)
        factor = self.allocations.move_factor(job, view.now, penalty)
        return job_options(job.id, job, view, self.configs(view.cluster), Config(*now), factor, project=self.project)

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        self.allocations.added()

    def summary(self) -> dict[str, Any]:
        return {"sia": {"p": self.p, "lambda_n": self.lambda_n, **self.allocations.summary()}}

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        self.allocations.forget(job)


def job_options(
    key: Hashable,
    job: JobState,
    view: SchedulerView,
    configs: list[Config],
    current: Config | None,
    factor: float,
    *,
    project: bool = True,
    weight: float = 1.0,
) -> list[Option]:
    """The job's options for the ILP, under `key`: an elastic job's goodput row over `configs`, a rigid job's gang
    on each type; every configuration but `current` (the one it runs in, if any) at `factor`, its move factor."""
    if not job.spec.elastic:
        found = rigid_options(job, view.cluster.types)
    elif view.goodput is None:
        raise InputError("policy 'sia': elastic jobs need a goodput model (Sia's workloads with their profiles)")
    else:
        row = goodput_row(job, configs, view.goodput, Knowledge.of(job), view.cluster.types, project=project)
        found = list(zip(configs, row.tolist(), strict=True))
    return [Option(key, config, value if config == current else value * factor, weight) for config, value in found]
