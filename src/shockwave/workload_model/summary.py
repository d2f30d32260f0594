"""What a trace asks of a cluster: its mix, its total work and the physical lower bounds on makespan."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from shockwave.core.cluster import ClusterSpec
from shockwave.workload_model.job import Job
from shockwave.workload_model.profile import JobProfile, least_seconds_at
from shockwave.workload_model.throughput import ThroughputModel, rate_or_zero

ARRIVAL_CUTS = 21
"""Arrival quantiles at which the fluid bound checks that later jobs fit the cluster after them."""


def makespan_lower_bound(jobs: list[Job], profiles: list[JobProfile], gpus: int | None) -> float:
    """No schedule can end before the slowest job could finish alone, nor before all work fits on the GPUs (each
    job's work counted to its last step, not to the end of its last epoch)."""
    bound = max(job.arrival + p.least_seconds for job, p in zip(jobs, profiles, strict=True))
    if gpus:
        bound = max(bound, least_gpu_seconds(jobs, profiles) / gpus)
    return bound


def cluster_makespan_lower_bound(
    jobs: list[Job], profiles: list[JobProfile], cluster: ClusterSpec, throughputs: ThroughputModel
) -> float:
    """`makespan_lower_bound` on one type. On several, a fluid bound: the least T for which each job's work can
    be split over the types (f_jt of it on type t, taking f_jt x its time alone there) so that every job fits
    between its arrival and T, and the jobs arriving at or after each of ARRIVAL_CUTS arrival quantiles tau fit each
    type's GPU-time between tau and T. (Arrival plus the time alone on one type is no bound when another type is
    faster for some jobs, and total work over GPUs depends on where the work runs.)"""
    if len(cluster.pools) == 1:
        return makespan_lower_bound(jobs, profiles, cluster.gpus)
    alone = np.array(
        [
            [_time_alone(job, p, throughputs, pool.gpu_type, pool.gpus) for pool in cluster.pools]
            for job, p in zip(jobs, profiles, strict=True)
        ]
    )
    n, types = alone.shape
    runs = np.isfinite(alone)
    seconds = np.where(runs, alone, 0.0)
    arrivals = np.array([job.arrival for job in jobs])
    gangs = np.array([job.scale_factor for job in jobs], dtype=float)
    columns = n * types + 1
    rows, cols, values, bounds = [], [], [], []
    for i in range(n):  # sum_t f_it T_it - T <= -a_i
        rows += [len(bounds)] * (types + 1)
        cols += [*range(i * types, (i + 1) * types), columns - 1]
        values += [*seconds[i], -1.0]
        bounds.append(-arrivals[i])
    for tau in np.unique(np.quantile(arrivals, np.linspace(0, 1, ARRIVAL_CUTS))):
        later = np.flatnonzero(arrivals >= tau)
        for t, pool in enumerate(cluster.pools):  # sum_{a_i >= tau} sf_i f_it T_it - n_t T <= -n_t tau
            rows += [len(bounds)] * (len(later) + 1)
            cols += [*(later * types + t), columns - 1]
            values += [*(gangs[later] * seconds[later, t]), -float(pool.gpus)]
            bounds.append(-pool.gpus * tau)
    matrix = sp.csr_matrix((values, (rows, cols)), shape=(len(bounds), columns))
    shares = sp.csr_matrix((np.ones(n * types), (np.repeat(np.arange(n), types), np.arange(n * types))), (n, columns))
    cost = np.zeros(columns)
    cost[-1] = 1.0
    limits = [(0.0, 1.0 if ok else 0.0) for ok in runs.ravel()] + [(0.0, None)]
    fluid = linprog(cost, A_ub=matrix, b_ub=bounds, A_eq=shares, b_eq=np.ones(n), bounds=limits, method="highs")
    return float(fluid.x[-1]) if fluid.status == 0 else makespan_lower_bound(jobs, profiles, cluster.gpus)


def _time_alone(job: Job, profile: JobProfile, throughputs: ThroughputModel, gpu_type: str, gpus: int) -> float:
    """The job's epochs at their planned batch sizes, to its last step, alone on a gang of `gpu_type` (inf where it
    cannot run)."""
    if job.scale_factor > gpus:
        return np.inf
    return least_seconds_at(
        job, profile, lambda bs: rate_or_zero(throughputs, job.model, bs, job.scale_factor, gpu_type)
    )


def gpu_seconds(jobs: list[Job], profiles: list[JobProfile]) -> float:
    return sum(p.t_isolated * job.scale_factor for job, p in zip(jobs, profiles, strict=True))


def least_gpu_seconds(jobs: list[Job], profiles: list[JobProfile]) -> float:
    """GPU-seconds of work, each job counted to its last step (the work bound's numerator)."""
    return sum(p.least_seconds * job.scale_factor for job, p in zip(jobs, profiles, strict=True))


def job_records(jobs: list[Job], profiles: list[JobProfile]) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "model": job.model,
            "batch_size": job.batch_size,
            "scale_factor": job.scale_factor,
            "mode": job.mode,
            "arrival_s": job.arrival,
            "total_steps": job.total_steps,
            "epochs": p.epochs,
            "t_isolated_s": p.t_isolated,
            "batch_sizes": sorted(set(p.batch_sizes)),
        }
        for i, (job, p) in enumerate(zip(jobs, profiles, strict=True))
    ]


def summarize(
    jobs: list[Job], profiles: list[JobProfile], throughputs: ThroughputModel, cluster: ClusterSpec | None = None
) -> dict[str, Any]:
    """The trace's mix and work (GPU-hours on the profiles' type), and the makespan lower bounds: with a `cluster`
    the one `simulate` reports (`cluster_makespan_lower_bound`); on several types only that one, since a job's time
    alone on one type bounds nothing when another type runs it faster."""
    summary: dict[str, Any] = {
        "jobs": len(jobs),
        "models": dict(sorted(Counter(j.model for j in jobs).items())),
        "scale_factors": {str(k): v for k, v in sorted(Counter(j.scale_factor for j in jobs).items())},
        "modes": dict(sorted(Counter(j.mode for j in jobs).items())),
        "total_gpu_hours": gpu_seconds(jobs, profiles) / 3600,
        "arrival_span_s": [min(j.arrival for j in jobs), max(j.arrival for j in jobs)],
        "t_isolated_range_s": [min(p.t_isolated for p in profiles), max(p.t_isolated for p in profiles)],
    }
    one_type = cluster is None or len(cluster.pools) == 1
    if one_type:  # the key keeps its name: the bound counts each job to its last step, not T_iso's whole epochs
        summary["lower_bound_arrival_plus_t_iso_s"] = makespan_lower_bound(jobs, profiles, None)
    if cluster is not None:
        summary["gpus"] = cluster.gpus
        if one_type:
            summary["lower_bound_work_over_gpus_s"] = least_gpu_seconds(jobs, profiles) / cluster.gpus
        else:
            summary["cluster"] = cluster.describe()
        summary["makespan_lower_bound_s"] = cluster_makespan_lower_bound(jobs, profiles, cluster, throughputs)
    return summary
