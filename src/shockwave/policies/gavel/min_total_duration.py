"""Min-total-duration, "OSSP" (spec §5): the smallest horizon T in which every job can finish.

Feasibility of T: sum_t thr_jt x_jt >= remaining_j / T for all j within the cluster. Bisection on T over [100 s, 1e6 s]
until the bracket ratio is below 1.05, widening x10 when nothing is feasible; the allocation is the last feasible x.
"""

from __future__ import annotations

import numpy as np

from shockwave.policies.gavel.lp import Program, solve, unpacked_program
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless
from shockwave.policies.gavel.packed import packed_program
from shockwave.policies.solvers.modelling import cp

LOW_S, HIGH_S, RATIO = 100.0, 1e6, 1.05


class MinTotalDuration(Stateless):
    """Every type at the job's V100 throughput (the reference's heterogeneity-agnostic variant)."""

    name = "min_total_duration"
    heterogeneity_aware = False

    def throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return inputs.reference_throughput_matrix()

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        program = self.program(inputs)
        x = program.x
        remaining = np.array([inputs.remaining_steps[j] for j in inputs.job_ids])
        # The horizon enters as a parameter holding remaining / T itself (not remaining x 1/T): cvxpy compiles the
        # program once, and ECOS gets the same data as from a program built afresh for every horizon.
        needed = cp.Parameter(len(remaining))
        problem = cp.Problem(cp.Maximize(1), [*program.constraints, program.rates(None) >= needed])

        def feasible(horizon: float) -> np.ndarray | None:
            needed.value = remaining / horizon
            solve(problem)
            return x.value.copy() if problem.status == "optimal" else None

        low, high, widest = LOW_S, HIGH_S, HIGH_S
        best = None
        while best is None:
            while RATIO * low < high:
                horizon = (low + high) / 2.0
                found = feasible(horizon)
                if found is not None:
                    best, high = found, horizon
                else:
                    low = horizon
            low, high, widest = widest, widest * 10.0, widest * 10
        return program.read(best)

    def program(self, inputs: AllocationInputs) -> Program:
        return unpacked_program(inputs, self.throughputs(inputs))


class MinTotalDurationPerf(MinTotalDuration):
    """Every type at the job's own throughput there."""

    name = "min_total_duration_perf"
    heterogeneity_aware = True

    def throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return inputs.throughput_matrix()


class MinTotalDurationPacked(MinTotalDurationPerf):
    """Per-type throughputs, and pairs of jobs sharing GPUs (a job's rate sums its rate alone and in its pairs)."""

    name = "min_total_duration_packed"
    packs = True

    def program(self, inputs: AllocationInputs) -> Program:
        return packed_program(inputs, weighted=False)
