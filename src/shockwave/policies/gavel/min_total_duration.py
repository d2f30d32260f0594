"""Min-total-duration, "OSSP" (spec §5): the smallest horizon T in which every job can finish.

Feasibility of T: sum_t thr_jt x_jt >= remaining_j / T for all j within the cluster. Bisection on T over [100 s, 1e6 s]
until the bracket ratio is below 1.05, widening x10 when nothing is feasible; the allocation is the last feasible x.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from shockwave.policies.gavel.lp import as_allocation, base_constraints, solve
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless

LOW_S, HIGH_S, RATIO = 100.0, 1e6, 1.05


class MinTotalDuration(Stateless):
    """Every type at the job's V100 throughput (the reference's heterogeneity-agnostic variant)."""

    name = "min_total_duration"
    heterogeneity_aware = False

    def throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return inputs.reference_throughput_matrix()

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        thr = self.throughputs(inputs)
        remaining = np.array([inputs.remaining_steps[j] for j in inputs.job_ids])

        def feasible(horizon: float) -> cp.Variable | None:
            x = cp.Variable(thr.shape)
            constraints = [
                *base_constraints(x, inputs),
                cp.sum(cp.multiply(thr, x), axis=1) >= remaining / horizon,
            ]
            problem = cp.Problem(cp.Maximize(1), constraints)
            solve(problem)
            return x if problem.status == "optimal" else None

        low, high, widest = LOW_S, HIGH_S, HIGH_S
        best = None
        while best is None:
            while RATIO * low < high:
                horizon = (low + high) / 2.0
                x = feasible(horizon)
                if x is not None:
                    best, high = x, horizon
                else:
                    low = horizon
            low, high, widest = widest, widest * 10.0, widest * 10
        return as_allocation(inputs, best)


class MinTotalDurationPerf(MinTotalDuration):
    """Every type at the job's own throughput there."""

    name = "min_total_duration_perf"
    heterogeneity_aware = True

    def throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return inputs.throughput_matrix()
