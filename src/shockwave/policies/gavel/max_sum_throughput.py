"""Max-sum-throughput (spec §3.3): maximise sum_j sum_t thr_jt x_jt in raw steps/s. Efficiency only, never fair."""

from __future__ import annotations

from shockwave.policies.gavel.lp import as_allocation, base_constraints, solve
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless
from shockwave.policies.solvers.modelling import cp


class MaxSumThroughput(Stateless):
    name = "max_sum_throughput_perf"

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        thr = inputs.throughput_matrix()
        x = cp.Variable(thr.shape)
        objective = cp.Maximize(cp.sum(cp.sum(cp.multiply(thr, x), axis=1)))
        solve(cp.Problem(objective, base_constraints(x, inputs)))
        return as_allocation(inputs, x)
