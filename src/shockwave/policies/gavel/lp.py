"""The LP scaffold Gavel-style allocators share: x (jobs x GPU types) with x >= 0, sum_j sf_j x_jt <= G_t for every
type t, sum_t x_jt <= 1 for every job.

Expressions are built in the reference's shape and order and solved with ECOS, whose interior point picks among
tied optima; that choice decides round priorities, so keeping it is what makes the published baselines reproduce.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs
from shockwave.policies.solvers.highs import SolverFailure
from shockwave.policies.solvers.modelling import cp

SOLVER = "ECOS"
log = logging.getLogger(__name__)


def base_constraints(x: cp.Variable, inputs: AllocationInputs) -> list[cp.Constraint]:
    sf = inputs.scale_factor_matrix()
    return [x >= 0, cp.sum(cp.multiply(sf, x), axis=0) <= list(inputs.gpus_by_type), cp.sum(x, axis=1) <= 1]


def proportional_throughputs(inputs: AllocationInputs, throughputs: np.ndarray) -> np.ndarray:
    """Each job's throughput under an equal split of every type (x_jt = G_t / G, spec §3.2), the max-min normaliser.
    Built as the reference builds it (G_t / m, divided by the largest row sum), so the LP's data are its bits."""
    m = len(inputs.job_ids)
    x = np.tile([g / m for g in inputs.gpus_by_type], (m, 1))
    x = x / np.sum(x, axis=1).max()
    return np.sum(np.multiply(throughputs, x), axis=1).reshape((m, 1))


def isolated_allocation(inputs: AllocationInputs) -> np.ndarray:
    """An equal 1/m share of every type for each job's gang: Themis's "isolated" baseline (spec §3.2)."""
    return isolated_shares(inputs.gpus_by_type, [inputs.scale_factors[j] for j in inputs.job_ids])


def isolated_shares(gpus_by_type: tuple[int, ...], gangs: list[int]) -> np.ndarray:
    """x_it = (G_t / m) / gang_i for m sharers (jobs, or Gandiva's pairs and lone jobs), rows capped at 1."""
    m = len(gangs)
    x = np.array([[g / m / gang for g in gpus_by_type] for gang in gangs])
    return x / np.maximum(np.sum(x, axis=1), 1.0).reshape((m, 1))


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


def solved(x: cp.Variable) -> np.ndarray:
    """The variable's value after a solve; SolverFailure when the solver left it without one."""
    if x.value is None:
        raise SolverFailure("the solver returned no allocation")
    return x.value


def as_allocation(inputs: AllocationInputs, x: cp.Variable | np.ndarray) -> Allocation:
    """A solved x (jobs x types), or its value, as the allocation, each share clipped into [0, 1] (solvers overshoot
    by their tolerance)."""
    value = x if isinstance(x, np.ndarray) else solved(x)
    return inputs.unflatten(value.clip(min=0.0).clip(max=1.0))


@dataclass(frozen=True)
class Program:
    """What the time-based programs (finish-time fairness, OSSP) need, alone or packed: the variable, each job's
    effective rate under it, the cluster's constraints on it, and how its solved value reads as an allocation."""

    x: cp.Variable
    rates: Callable[[np.ndarray | None], cp.Expression]
    """The rates of the jobs at these row positions (None: every job, in order)."""
    rate_of: Callable[[int], cp.Expression]
    """One job's rate, as the reference writes it (a sum over its own row)."""
    constraints: list[cp.Constraint]
    read: Callable[[np.ndarray], Allocation]


def unpacked_program(inputs: AllocationInputs, throughputs: np.ndarray) -> Program:
    x = cp.Variable(throughputs.shape)

    def rates(rows: np.ndarray | None) -> cp.Expression:
        if rows is None:
            return cp.sum(cp.multiply(throughputs, x), axis=1)
        return cp.sum(cp.multiply(throughputs[rows], x[rows]), axis=1)

    return Program(
        x,
        rates,
        lambda i: cp.sum(cp.multiply(throughputs[i], x[i])),
        base_constraints(x, inputs),
        lambda value: inputs.unflatten(value.clip(min=0.0).clip(max=1.0)),
    )
