"""Finish-time fairness as Themis's agents estimate it, and what a lease is worth to a job.

rho_j = T_shared_j / T_id_j: the job's estimated finish time (counted from its arrival) in the shared cluster, over
its finish time on an independent 1/N share of the cluster (N the jobs active now, G the cluster's GPUs).

Isolated rate. A 1/N share is G/N GPUs made of every type in proportion to its pool (G_t / N of type t). As in
the project's metric (`shockwave.results.metrics`: rho = JCT / (T_iso x max(1, N/G))) jobs are counted, not their gang
sizes: the share runs the job's gang a fraction s = min(1, G/N) of the time, on type t a fraction G_t / G of that, so

    r_iso_j = s * sum_t (G_t / G) * rate_j(t)             (steps/s; rate_j(t) = 0 where it cannot run)
    T_id_j  = total_steps_j / r_iso_j

On one GPU type T_id_j = T_iso_j x max(1, N/G), the metric's denominator with the contention of the moment.

Shared finish time. With e_j the time since arrival and R_j the steps left (both at the job's current batch size),
a job that gets its fair share from now on finishes at e_j + R_j / r_iso_j, so its current standing is

    rho_j = (e_j + R_j / r_iso_j) / T_id_j

1 for a job just arrived, above 1 for a job that got less than its share so far, below 1 for one that got more.

Valuation of a lease. A lease of L seconds of its gang on type t lets the job run at rate_j(t) for the lease and at
its fair share after it (the same assumption as above, so the estimate is the job's own, not the auction's):

    F_j(t) = e_j + R_j / rate_j(t)                                if it finishes within the lease,
           = e_j + L + (R_j - L rate_j(t)) / r_iso_j              otherwise,
    F_j(none) = e_j + L + R_j / r_iso_j                           (the lease passes without it)
    v_j(t) = rho_j(none) / rho_j(t) = F_j(none) / F_j(t)          (>= 1: how many times its rho improves)

Themis's bidders value a bundle by 1/rho_j(bundle). v_j differs from that by the factor rho_j(none), a constant per
bidder, which changes neither the allocation maximising the product of valuations nor any partial-allocation
fraction (the constants cancel in both ratios), so the auction is Themis's; v_j(none) = 1 keeps every product
finite and positive where 1/rho would be 0 or undefined for a job holding nothing, and T_id_j cancels from v_j.
"""

from __future__ import annotations

import math

from shockwave.core.cluster import ClusterSpec
from shockwave.core.state import JobState


def fair_share(cluster: ClusterSpec, active_jobs: int) -> float:
    """s = min(1, G/N): the fraction of time a 1/N share runs a job's gang."""
    return min(1.0, cluster.gpus / max(active_jobs, 1))


def isolated_rate(job: JobState, cluster: ClusterSpec, active_jobs: int) -> float:
    """r_iso: the job's steps/s on a 1/N share of every type."""
    share = fair_share(cluster, active_jobs)
    return share * sum(pool.gpus / cluster.gpus * job.rate(pool.gpu_type) for pool in cluster.pools)


def current_rho(job: JobState, now: float, r_iso: float) -> float:
    """rho_j if the job got its fair share from now on (inf for a job no share can run)."""
    if r_iso <= 0:
        return math.inf
    total = max(float(job.total_steps), 1e-12)
    elapsed = max(now - job.arrival_s, 0.0)
    remaining = max(float(job.remaining_steps), 0.0)
    return (elapsed + remaining / r_iso) / (total / r_iso)


def finish_after_lease(job: JobState, now: float, r_iso: float, lease_s: float, rate: float) -> float:
    """F_j: the estimated time from arrival to finish after a lease run at `rate` (0: without the lease)."""
    elapsed = max(now - job.arrival_s, 0.0)
    remaining = max(float(job.remaining_steps), 0.0)
    if rate > 0 and remaining <= rate * lease_s:
        return elapsed + remaining / rate
    if r_iso <= 0:
        return math.inf
    return elapsed + lease_s + (remaining - rate * lease_s) / r_iso


def lease_values(job: JobState, now: float, r_iso: float, lease_s: float, free: dict[str, int]) -> dict[str, float]:
    """log v_j(t) for each type t where the job can run and its gang fits in `free`; types worth nothing are left
    out (a job with nothing left, or one that cannot run there)."""
    without = finish_after_lease(job, now, r_iso, lease_s, 0.0)
    values: dict[str, float] = {}
    for gpu_type, gpus in free.items():
        rate = job.rate(gpu_type)
        if rate <= 0 or job.scale_factor > gpus:
            continue
        with_lease = finish_after_lease(job, now, r_iso, lease_s, rate)
        if with_lease > 0 and math.isfinite(without) and without > with_lease:
            values[gpu_type] = math.log(without / with_lease)
    return values
