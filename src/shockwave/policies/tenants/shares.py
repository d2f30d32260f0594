"""Each tenant's GPUs of each type for the next round: guarantees first, then the rest by weight, in equal-share
progress, so that an A100 is not counted as a T4.

A job's equal-share progress per GPU-second on type k is its rate there over its rate on an even split of every
type (`prop_j = sum_k n_k / G x rate_jk`, Gavel's normalisation): 1 on a one-type cluster, above 1 on the types it
gains most on. A tenant's value of a type is that, averaged over its active jobs, times what its jobs have really made
of their GPUs against that average so far (the policy runs a tenant's most deserving jobs, not its average ones: on
a 3-type cluster shared 1:2:3 under `max_min_fairness_perf` the smallest tenant's jobs made 9% more than the average
promised, and got 9% more than its share). With its guarantees reserved (up to
what its jobs can use), the GPUs left are shared by Gavel's water-filling one level up (`water_fill`): every tenant's
progress rises by the same multiple of its weight until it holds what its jobs can use or its cap, and what one
cannot use goes on to the others (a tenant idle today lends its share; it takes it back the round it has jobs
again). Each tenant is placed where it gains most against the others, as the `_perf` policies place jobs.

The shares are fractions of GPUs; a round runs whole ones. `rounded` gives each tenant the whole GPUs of its share
plus what rounding owed it before (largest remainders first), so over rounds each tenant holds its fractional share
on average (two V100s shared 2:1 give 1.33 and 0.67: alternately 2 and 1, 1 and 0, not 1 and 1 forever).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from shockwave.core.cluster import ClusterSpec
from shockwave.core.state import JobState
from shockwave.policies.gavel.water_filling import WaterFillingProblem, water_fill
from shockwave.workload_model.tenants import Tenant

Shares = dict[str, dict[str, float]]
"""Tenant -> GPU type -> GPUs (a fraction where not rounded)."""


def progress_per_gpu_second(job: JobState, cluster: ClusterSpec) -> dict[str, float]:
    """The job's equal-share progress per GPU-second on each type it can run on (see the module)."""
    prop = sum(pool.gpus / cluster.gpus * job.rates.get(pool.gpu_type, 0.0) for pool in cluster.pools)
    if prop <= 0:
        return {}
    return {t: rate / prop for t, rate in job.rates.items() if rate > 0 and t in cluster.types}


@dataclass(frozen=True)
class Demand:
    """What a tenant's active jobs can use in a round."""

    gpus: int
    """Their gangs together: the most GPUs it could hold at once."""
    by_type: dict[str, int]
    """Per type, the gangs of its jobs that can run there."""
    value: dict[str, float]
    """Per type, its jobs' mean progress per GPU-second there."""

    @classmethod
    def of(cls, jobs: Sequence[JobState], cluster: ClusterSpec) -> Demand:
        by_type: dict[str, int] = dict.fromkeys(cluster.types, 0)
        sums: dict[str, float] = dict.fromkeys(cluster.types, 0.0)
        for job in jobs:
            for gpu_type, value in progress_per_gpu_second(job, cluster).items():
                by_type[gpu_type] += job.scale_factor
                sums[gpu_type] += value
        count = max(len(jobs), 1)
        return cls(sum(j.scale_factor for j in jobs), by_type, {t: s / count for t, s in sums.items()})

    def calibrated(self, factor: float) -> Demand:
        """The same demand with its value scaled by what its jobs really made of their GPUs against that value."""
        return Demand(self.gpus, self.by_type, {t: v * factor for t, v in self.value.items()})


def fair_shares(
    tenants: Mapping[str, Tenant],
    demands: Mapping[str, Demand],
    cluster: ClusterSpec,
    boost: Mapping[str, float] | None = None,
) -> Shares:
    """Fractional GPUs per tenant and type: guarantees (up to demand), then water-filling by weight (times `boost`,
    what the tenant is owed of past rounds' progress)."""
    names = [n for n in tenants if demands.get(n) is not None and demands[n].gpus > 0]
    shares: Shares = {n: dict.fromkeys(cluster.types, 0.0) for n in tenants}
    left = {t: float(cluster.pool(t).gpus) for t in cluster.types}
    room: dict[str, float] = {}
    for name in names:
        tenant, demand = tenants[name], demands[name]
        cap = min(demand.gpus, tenant.max_gpus or demand.gpus)
        for gpu_type, promised in tenant.guarantees.items():
            given = min(promised, demand.by_type.get(gpu_type, 0), left[gpu_type], cap)
            shares[name][gpu_type] += given
            left[gpu_type] -= given
            cap -= given
        room[name] = cap
    rising = [n for n in names if room[n] > 0]
    if not rising:
        return shares
    types = list(cluster.types)
    sizes = np.array([room[n] for n in rising])
    value = np.array([[demands[n].value[t] for t in types] for n in rising])
    gpus = np.array([left[t] for t in types])
    open_ = (value > 0) & (np.array([[demands[n].by_type[t] for t in types] for n in rising]) > 0) & (gpus > 0)
    problem = WaterFillingProblem(np.where(open_, value * sizes[:, None], 0.0), sizes, gpus, open_)
    weights = np.array([tenants[n].weight * (boost or {}).get(n, 1.0) for n in rising])
    x = water_fill(problem, lambda frozen: weights)
    for row, name in enumerate(rising):
        for col, gpu_type in enumerate(types):
            shares[name][gpu_type] += float(x[row, col] * sizes[row])
    return shares


def rounded(shares: Shares, owed: Mapping[str, Mapping[str, float]], cluster: ClusterSpec) -> dict[str, dict[str, int]]:
    """Whole GPUs per tenant and type: per type, each tenant's share plus what it is owed, floored, then the GPUs
    left to the largest remainders (ties by the file's order), never more than the pool."""
    whole: dict[str, dict[str, int]] = {n: {} for n in shares}
    for gpu_type in cluster.types:
        wanted = {n: max(shares[n][gpu_type] + owed.get(n, {}).get(gpu_type, 0.0), 0.0) for n in shares}
        floors = {n: math.floor(w + 1e-9) for n, w in wanted.items()}
        total = min(round(sum(shares[n][gpu_type] for n in shares)), cluster.pool(gpu_type).gpus)
        spare = total - sum(floors.values())
        order = sorted(shares, key=lambda n: -(wanted[n] - floors[n]))
        for name in order:
            if spare <= 0:
                break
            if wanted[name] - floors[name] > 1e-9:
                floors[name] += 1
                spare -= 1
        while sum(floors.values()) > cluster.pool(gpu_type).gpus:  # owed more than the pool holds: trim the largest
            largest = max(floors, key=lambda n: floors[n] - shares[n][gpu_type])
            floors[largest] -= 1
        for name in shares:
            whole[name][gpu_type] = floors[name]
    return whole
