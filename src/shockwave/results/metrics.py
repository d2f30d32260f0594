"""Run metrics of spec §6, computed the same way for every driver: rho, the summary, utilisation by GPU type, GPU-hours
and their cost, SLO violations."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from shockwave.core.cluster import ClusterSpec
from shockwave.workload_model.prices import DEFAULT_PRICES, Prices

UNFAIR_RHO = 1.05  # a job is "unfairly treated" above this finish-time-fairness ratio (reference aggregation)


@dataclass(frozen=True)
class JobOutcome:
    id: int
    arrival_s: float
    finish_s: float
    t_isolated_s: float
    batch_size_changes: int

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.arrival_s


def finish_time_fairness(job: JobOutcome, num_jobs: int, gpus: int) -> float:
    """rho = JCT / (T_iso x max(1, N/G)): the static contention factor N/G stands in for a fair share."""
    return job.jct_s / (job.t_isolated_s * max(1.0, num_jobs / gpus))


def summarize_run(
    outcomes: list[JobOutcome],
    *,
    gpus: int,
    makespan_s: float,
    gpu_busy_s: list[float],
    num_rounds: int,
    makespan_lower_bound_s: float,
) -> dict[str, Any]:
    n = len(outcomes)
    rhos = [finish_time_fairness(o, n, gpus) for o in outcomes]
    jcts = [o.jct_s for o in outcomes]
    return {
        "makespan_s": makespan_s,
        "avg_jct_s": float(np.mean(jcts)) if n else 0.0,
        "worst_ftf": max(rhos, default=0.0),
        "unfair_fraction": sum(r > UNFAIR_RHO for r in rhos) / n if n else 0.0,
        "utilization": sum(gpu_busy_s) / (len(gpu_busy_s) * makespan_s) if makespan_s > 0 else 0.0,
        "num_rounds": num_rounds,
        "makespan_lower_bound_s": makespan_lower_bound_s,
        "jobs": [
            {
                "id": o.id,
                "arrival_s": o.arrival_s,
                "finish_s": o.finish_s,
                "jct_s": o.jct_s,
                "t_isolated_s": o.t_isolated_s,
                "ftf": rho,
                "batch_size_changes": o.batch_size_changes,
            }
            for o, rho in zip(outcomes, rhos, strict=True)
        ],
    }


def utilization_by_type(
    busy_s: Mapping[str, float], cluster: ClusterSpec, makespan_s: float, *, capped: bool = False
) -> dict[str, float] | None:
    """Each GPU type's busy fraction over the makespan (None on one type: `utilization` says it). `capped`: a run
    that stopped with jobs unfinished counts at most the makespan of each GPU (their leases may run past it)."""
    if len(cluster.pools) == 1:
        return None
    shares = {}
    for pool in cluster.pools:
        busy = min(busy_s.get(pool.gpu_type, 0.0), pool.gpus * makespan_s) if capped else busy_s.get(pool.gpu_type, 0.0)
        shares[pool.gpu_type] = busy / (pool.gpus * makespan_s) if makespan_s > 0 else 0.0
    return shares


def cost_fields(busy_s: Mapping[str, float], prices: Prices | None) -> dict[str, Any]:
    """GPU-hours by type and, where the prices know every type (the given ones, else Gavel's defaults), their cost."""
    hours = {t: seconds / 3600.0 for t, seconds in busy_s.items()}
    out: dict[str, Any] = {"gpu_hours_by_type": hours}
    chosen = prices or DEFAULT_PRICES
    if prices is not None or all(t in chosen.by_type for t in hours):
        cost = chosen.cost(hours)
        out.update(cost_by_type=cost, total_cost=sum(cost.values()), prices=chosen.describe())
    return out


def slo_fields(violations: Iterable[bool]) -> dict[str, Any]:
    """How many finished jobs had an SLO and how many of them missed it (nothing when none had one)."""
    flags = list(violations)
    return {"slo_jobs": len(flags), "slo_violations": sum(flags)} if flags else {}
