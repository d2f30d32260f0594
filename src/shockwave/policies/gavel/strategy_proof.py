"""Gavel's strategy-proof max-min variant (GAVEL_SPEC.md §3.8): the partial allocation mechanism of Cole, Gkatzelis
and Goel (EC'13) on normalised throughputs.

1. Maximise the weighted Nash social welfare sum_j w_j log u_j, with u_j = sf_j sum_t thr_jt x_jt / prop_j the job's
   normalised effective throughput (as max-min fairness counts it), under the base constraints.
2. Give each job only a fraction of its share: f_j = (prod_{k != j} (u_k / u_k^{-j})^{w_k})^{1 / w_j}, where u^{-j}
   is the welfare optimum with job j absent. f_j is what j's presence costs the others, so a job gains nothing by
   misreporting its throughputs; the time it gives up is left idle (the mechanism lets others use idle GPUs).

The m + 1 programs are one compiled cvxpy problem (an exponential cone per job) whose parameters switch jobs in and
out: an absent job's x is held at 0 and its term is log(u_j + 1) = 0. A job's counterfactual is skipped when every
other job already gets all it could use alone (the others cannot gain from its absence: f_j = 1), so an
uncontended cluster costs one solve. Clarabel solves them: ECOS, the LPs' solver, fails outright on some of these
programs (two jobs that both fit, for one). The reference weights its objective in a way that cancels (a constant
factor inside a geometric mean) and uses unit weights in the discount; here weights count in both places, which is
the same when all weights are 1.
"""

from __future__ import annotations

import warnings

import numpy as np

from shockwave.policies.gavel.lp import SolverFailure
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless
from shockwave.policies.gavel.water_filling import WaterFillingProblem
from shockwave.policies.solvers.modelling import cp

SOLVER = "CLARABEL"


def partial_allocation(problem: WaterFillingProblem, weights: np.ndarray) -> np.ndarray:
    """x after the discount (jobs x types)."""
    m, n = problem.shape
    runs = problem.open.any(axis=1)
    x_out = np.zeros((m, n))
    rows = np.flatnonzero(runs)
    if not len(rows):
        return x_out
    k = len(rows)
    a = problem.coefficients[rows]
    w = weights[rows]
    present = cp.Parameter(k, nonneg=True)
    bound = cp.Parameter((k, n), nonneg=True)
    x = cp.Variable((k, n))
    u = cp.sum(cp.multiply(a, x), axis=1)
    sf = problem.scale_factors[rows]
    constraints = [
        x >= 0,
        x <= bound,
        cp.sum(cp.multiply(np.repeat(sf[:, None], n, axis=1), x), axis=0) <= problem.gpus,
        cp.sum(x, axis=1) <= 1,
    ]
    objective = cp.Maximize(cp.sum(cp.multiply(w, cp.log(u + 1 - present))))
    program = cp.Problem(objective, constraints)
    open_rows = problem.open[rows].astype(float)

    def welfare_optimum(absent: int | None) -> tuple[np.ndarray, np.ndarray]:
        mask = np.ones(k)
        if absent is not None:
            mask[absent] = 0.0
        present.value = mask
        bound.value = open_rows * mask[:, None]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            try:
                program.solve(solver=SOLVER)
            except cp.error.SolverError as exc:
                raise SolverFailure(f"the strategy-proof welfare program: {exc}") from None
        if x.value is None:
            raise SolverFailure(f"the strategy-proof welfare program returned {program.status}")
        values = np.clip(x.value, 0.0, 1.0)
        return values, (a * values).sum(axis=1)

    x_all, u_all = welfare_optimum(None)
    if k == 1:
        x_out[rows] = x_all
        return x_out
    alone = a.max(axis=1)  # each job on its best type all the time (a is 0 on the types closed to it)
    satisfied = u_all >= alone * (1 - 1e-6)
    factors = np.ones(k)
    for j in range(k):
        others = np.arange(k) != j
        if satisfied[others].all():
            continue
        _, u_without = welfare_optimum(j)
        log_ratio = np.sum(w[others] * (np.log(u_all[others]) - np.log(u_without[others])))
        factors[j] = float(np.exp(min(log_ratio, 0.0) / w[j]))
    x_out[rows] = x_all * factors[:, None]
    return x_out


class MaxMinFairnessStrategyProof(Stateless):
    """Strategy-proof fair shares of GPU time (every throughput counted as 1)."""

    name = "max_min_fairness_strategy_proof"
    heterogeneity_aware = False

    def objective_throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return np.ones((len(inputs.job_ids), len(inputs.gpu_types)))

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        problem = WaterFillingProblem.of(inputs, self.objective_throughputs(inputs))
        return inputs.unflatten(partial_allocation(problem, inputs.column(inputs.weights)))


class MaxMinFairnessStrategyProofPerf(MaxMinFairnessStrategyProof):
    """Strategy-proof fair shares of normalised throughput."""

    name = "max_min_fairness_strategy_proof_perf"
    heterogeneity_aware = True

    def objective_throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return inputs.throughput_matrix()
