"""The LP scaffold Gavel-style allocators share: x (jobs x 1) with x >= 0, sum_j sf_j x_j <= G, x_j <= 1.

Expressions are built in the reference's shape and order and solved with ECOS, whose interior point picks among
tied optima; that choice decides round priorities, so keeping it is what makes the published baselines reproduce.
"""

from __future__ import annotations

import logging
import warnings

import cvxpy as cp
import numpy as np

from shockwave.policies.gavel.mechanism import AllocationInputs

SOLVER = "ECOS"
log = logging.getLogger(__name__)


class SolverFailure(RuntimeError):
    """The solver returned no allocation."""


def column(inputs: AllocationInputs, values: dict[int, float] | dict[int, int]) -> np.ndarray:
    return np.array([[float(values[j])] for j in inputs.job_ids])


def base_constraints(x: cp.Variable, scale_factors: np.ndarray, gpus: int) -> list[cp.Constraint]:
    return [x >= 0, cp.sum(cp.multiply(scale_factors, x), axis=0) <= [gpus], cp.sum(x, axis=1) <= 1]


def solve(problem: cp.Problem) -> None:
    """Solve with ECOS; an "inaccurate" optimum is what the reference used too, so it is logged, not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        try:
            problem.solve(solver=SOLVER)
        except cp.error.SolverError as exc:
            raise SolverFailure(str(exc)) from None
    if problem.status == cp.OPTIMAL_INACCURATE:
        log.debug("ECOS returned an inaccurate optimum (%d variables)", problem.size_metrics.num_scalar_variables)


def as_allocation(inputs: AllocationInputs, x: cp.Variable) -> dict[int, float]:
    if x.value is None:
        raise SolverFailure("the solver returned no allocation")
    values = x.value.clip(min=0.0).clip(max=1.0)
    return {j: float(values[i][0]) for i, j in enumerate(inputs.job_ids)}
