"""Throughput per dollar (GAVEL_SPEC.md §3.3): maximise sum_j sum_t thr_jt x_jt / price_t, optionally subject to
every job with an SLO keeping the rate that finishes it by its deadline, sum_t thr_jt x_jt >= remaining_j / (time
left to its deadline).

With SLOs the program may have no solution (too many deadlines for the cluster, or one already out of reach); then,
as the reference does, it is solved again without the SLO constraints, and the fallback is counted (`slo_fallbacks`
in the allocator's state). Jobs without an SLO, and jobs whose deadline has already passed, get no constraint (the
reference's rate bound is negative, hence void, once a deadline has passed; it fails outright on a trace without
SLOs, where ours is the policy without SLOs). As in the reference, the objective divides by the price of one GPU,
not of the job's gang.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from shockwave.core.kept import KeepsState
from shockwave.policies.gavel.lp import SolverFailure, as_allocation, base_constraints, solve
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs
from shockwave.policies.gavel.packed import Combinations
from shockwave.policies.solvers.modelling import cp
from shockwave.workload_model.prices import Prices, prices_of

log = logging.getLogger(__name__)
SOLVED = ("optimal", "optimal_inaccurate")
"""cvxpy's statuses with a usable point (its OPTIMAL and OPTIMAL_INACCURATE)."""


def slo_rates(inputs: AllocationInputs) -> tuple[list[int], np.ndarray]:
    """The rows of the jobs whose deadline is still ahead, and the rate (steps/s) each needs to meet it."""
    rows, needed = [], []
    for i, j in enumerate(inputs.job_ids):
        left = inputs.time_to_deadline_s.get(j)
        if left is not None and left > 0:
            rows.append(i)
            needed.append(inputs.remaining_steps[j] / left)
    return rows, np.array(needed, dtype=float)


class MaxSumThroughputNormalizedByCost(KeepsState):
    """Maximise the sum of throughputs per dollar; no SLOs."""

    name = "max_sum_throughput_normalized_by_cost_perf"
    heterogeneity_aware = True
    packs = False
    uses_slos = False
    kept = ("slo_fallbacks",)
    slo_fallbacks: int
    """Recomputes whose SLO constraints had no solution, solved without them."""

    def __init__(self, prices: Prices | str | Path | None = None) -> None:
        self.prices = prices_of(prices)
        self.slo_fallbacks = 0

    def price_row(self, inputs: AllocationInputs) -> np.ndarray:
        return np.array([self.prices.per_gpu_hour(t) for t in inputs.gpu_types])

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        thr = inputs.throughput_matrix()
        x = cp.Variable(thr.shape)
        objective = cp.Maximize(cp.sum(cp.multiply(thr / self.price_row(inputs), x)))
        constraints = base_constraints(x, inputs)
        rows, needed = slo_rates(inputs) if self.uses_slos else ([], np.zeros(0))
        slo = [cp.sum(cp.multiply(thr[rows], x[rows]), axis=1) >= needed] if rows else []
        self._solve(objective, constraints, slo)
        return as_allocation(inputs, x)

    def _solve(self, objective: cp.Maximize, constraints: list[cp.Constraint], slo: list[cp.Constraint]) -> None:
        """Solve with the SLO constraints; if that has no solution, without them."""
        if slo:
            problem = cp.Problem(objective, constraints + slo)
            solve(problem)
            if problem.status in SOLVED:
                return
            self.slo_fallbacks += 1
            log.debug("no allocation meets every SLO (%s): solving without them", problem.status)
        solve(cp.Problem(objective, constraints))


class MaxSumThroughputNormalizedByCostSLOs(MaxSumThroughputNormalizedByCost):
    """Throughput per dollar, every job with an SLO kept on course for its deadline while that is possible."""

    name = "max_sum_throughput_normalized_by_cost_perf_SLOs"
    uses_slos = True


class MaxSumThroughputNormalizedByCostPackedSLOs(MaxSumThroughputNormalizedByCost):
    """The same with pairs of jobs sharing GPUs: a job's rate sums its rate alone and in each of its pairs; a pair
    on a type pays for one gang there."""

    name = "max_sum_throughput_normalized_by_cost_packed_SLOs"
    packs = True
    uses_slos = True

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        rows = Combinations.of(inputs, weighted=False)
        x = cp.Variable(rows.gangs.shape)
        terms = cp.multiply(rows.rates, x[rows.index])
        objective = cp.Maximize(cp.sum(cp.multiply(rows.rates / self.price_row(inputs), x[rows.index])))
        constraints = rows.constraints(x, inputs)
        which, needed = slo_rates(inputs)
        slo = [rows.per_job(terms)[which] >= needed] if which else []
        self._solve(objective, constraints, slo)
        if x.value is None:
            raise SolverFailure("the solver returned no allocation")
        return rows.allocation(inputs, x.value)
