"""Max-sum-throughput (spec §5): maximise sum_j thr_j x_j in raw steps/s. Efficiency only, never fair."""

from __future__ import annotations

import cvxpy as cp

from shockwave.policies.gavel.lp import as_allocation, base_constraints, column, solve
from shockwave.policies.gavel.mechanism import AllocationInputs, Stateless


class MaxSumThroughput(Stateless):
    name = "max_sum_throughput_perf"

    def allocate(self, inputs: AllocationInputs) -> dict[int, float]:
        thr = column(inputs, inputs.throughputs)
        x = cp.Variable(thr.shape)
        objective = cp.Maximize(cp.sum(cp.sum(cp.multiply(thr, x), axis=1)))
        solve(cp.Problem(objective, base_constraints(x, column(inputs, inputs.scale_factors), inputs.gpus)))
        return as_allocation(inputs, x)
