"""Gavel's water-filling max-min fairness (GAVEL_SPEC.md §3.7), and with entities its multi-level fairness.

Plain max-min fairness (`max_min_fairness.py`) maximises the smallest weighted normalised throughput and stops: any
capacity the worst-off jobs cannot use is left to the solver's whim. Water-filling keeps going. With
u_j = sf_j sum_t thr_jt x_jt / prop_j a job's normalised effective throughput (prop_j its throughput under an equal
split of every type, so u_j counts GPUs' worth of progress) and w_j its weight, each iteration

  1. (LP) raises every job still rising by the same multiple of its weight, as the cluster allows:
        maximise c   s.t.  u_j >= level_j + w_j c   (rising jobs),  u_j >= level_j  (the others),
                           x >= 0,  sum_j sf_j x_jt <= G_t,  sum_t x_jt <= 1;
     then level_j += w_j c;
  2. (MILP) asks which rising jobs could still get more while nobody drops below their level:
        maximise sum_j z_j   s.t.  u_j >= level_j + delta_j z_j,  z_j binary (0 for the jobs no longer rising),
     and freezes the rest at their level (a job with weight 0 that cannot get more is frozen too);
  3. stops when every job is frozen, or none was.

The MILP's relaxation is integral (the jobs that can each rise alone can all rise together: average their
solutions), so HiGHS settles it at the root; it is kept a MILP because that is the reference's test. Both programs
are built once as sparse HiGHS models; an iteration changes a column's coefficients and rows' bounds and re-solves
from the last basis. The reference's GLPK MILP also bounds frozen jobs from above, which makes it infeasible (and
freezes everything) whenever a frozen job's level is below ~0.1 or a job has weight 0; that is not repeated here.

Types where a job cannot run (throughput 0) or its gang cannot fit are closed to it: the reference leaves them open,
which lets its LP spend time the mechanism can never use.

Weights come from a `weights_of(frozen)` rule, asked again every iteration: a job's priority weight by default, or
with entities (`hierarchical.py`) an entity's weight split among its jobs still rising, so each entity's total u rises
in proportion to its weight while any of its jobs can still use more.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import highspy
import numpy as np
import scipy.sparse as sp

from shockwave.policies.gavel.hierarchical import EntityWeights, WeightRule
from shockwave.policies.gavel.lp import SolverFailure, proportional_throughputs
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless
from shockwave.policies.solvers.highs import quiet_solver
from shockwave.workload_model.entities import Entities

REL_RISE = 1e-4
"""A job 'can still rise' if it can gain this fraction of its level (the reference's slack 1.0001) ..."""
ABS_RISE = 1e-6
"""... plus this many GPUs' worth of normalised throughput."""


@dataclass(frozen=True)
class WaterFillingProblem:
    """Rows are jobs, columns GPU types: u = (coefficients * x).sum(axis=1)."""

    coefficients: np.ndarray
    scale_factors: np.ndarray
    gpus: np.ndarray
    open: np.ndarray
    """Where x may be positive."""

    @classmethod
    def of(cls, inputs: AllocationInputs, throughputs: np.ndarray) -> WaterFillingProblem:
        """`throughputs` are those the objective counts (all ones for the heterogeneity-agnostic policy); a type
        is open to a job where its real throughput is positive and its gang fits."""
        m = len(inputs.job_ids)
        sf = inputs.column(inputs.scale_factors)
        gpus = np.array(inputs.gpus_by_type, dtype=float)
        open_ = (inputs.throughput_matrix() > 0) & (sf[:, None] <= gpus[None, :])
        prop = proportional_throughputs(inputs, throughputs).reshape(m)
        scale = np.divide(sf, prop, out=np.zeros(m), where=prop > 0)
        coefficients = np.where(open_, throughputs * scale[:, None], 0.0)
        return cls(coefficients, sf, gpus, open_ & (coefficients > 0))

    @property
    def shape(self) -> tuple[int, int]:
        return self.coefficients.shape  # type: ignore[return-value]

    def throughputs(self, x: np.ndarray) -> np.ndarray:
        return (self.coefficients * x).sum(axis=1)


def water_fill(problem: WaterFillingProblem, weights_of: WeightRule) -> np.ndarray:
    """The water-filling allocation x (jobs x types)."""
    m, n = problem.shape
    frozen = ~problem.open.any(axis=1)  # a job that can run nowhere stays at 0
    level = np.zeros(m)
    x = np.zeros((m, n))
    if frozen.all():
        return x
    lp, milp = _Model(problem, binary=False), _Model(problem, binary=True)
    for _ in range(2 * m + 2):
        weights = np.where(frozen, 0.0, np.maximum(weights_of(frozen), 0.0))
        if not (weights > 0).any():
            break
        rise, x = lp.raise_levels(weights, level)
        achieved = problem.throughputs(x)
        # Never ask the next solve for more than this x gives (solver round-off), so it stays feasible.
        level = np.where(weights > 0, np.minimum(level + weights * rise, achieved), level)
        stuck = ~frozen & ~milp.can_rise(level, ~frozen)
        if not stuck.any():
            break
        frozen |= stuck
        if frozen.all():
            break
    return np.where(x > 0, x.clip(max=1.0), 0.0)  # no -0.0 from round-off


class _Model:
    """The LP (`binary=False`: columns x and c) or the MILP (columns x and z) on the base constraints, with one
    'level' row per job: u_j - k_j v_j >= level_j, where v is c (k = weights) or z_j (k = delta)."""

    def __init__(self, problem: WaterFillingProblem, *, binary: bool) -> None:
        m, n = problem.shape
        self.m, self.n, self.binary = m, n, binary
        self.extra = m * n  # first column after x: c, or z_0
        extra_cols = m if binary else 1
        cols = m * n + extra_cols
        job = np.repeat(np.arange(m), n)
        gpu_type = np.tile(np.arange(n), m)
        x_cols = np.arange(m * n)
        capacity = (gpu_type, x_cols, np.repeat(problem.scale_factors, n))
        per_job = (n + job, x_cols, np.ones(m * n))
        level = (n + m + job, x_cols, problem.coefficients.reshape(-1))
        # The level rows' extra column: a placeholder coefficient of 1 keeps the entry in the matrix (changed later).
        extra_rows = n + m + np.arange(m)
        extra = (extra_rows, self.extra + (np.arange(m) if binary else np.zeros(m, dtype=int)), -np.ones(m))
        rows, columns, values = (np.concatenate(p) for p in zip(capacity, per_job, level, extra, strict=True))
        matrix = sp.csc_matrix((values, (rows, columns)), shape=(n + 2 * m, cols))
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = cols, n + 2 * m
        lp.sense_ = highspy.ObjSense.kMaximize
        cost = np.zeros(cols)
        cost[self.extra :] = 1.0
        upper_x = problem.open.reshape(-1).astype(float)
        lp.col_cost_ = cost
        lp.col_lower_ = np.zeros(cols)
        lp.col_upper_ = np.concatenate([upper_x, np.ones(m) if binary else [inf]])
        lp.row_lower_ = np.concatenate([np.full(n + m, -inf), np.zeros(m)])
        lp.row_upper_ = np.concatenate([problem.gpus, np.ones(m), np.full(m, inf)])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, n + 2 * m
        if binary:
            lp.integrality_ = [highspy.HighsVarType.kContinuous] * (m * n) + [highspy.HighsVarType.kInteger] * m
        self.solver = _solver()
        self.solver.passModel(lp)
        self.level_rows = np.arange(n + m, n + 2 * m, dtype=np.int32)
        self.coefficients = -np.ones(m)

    def _set_levels(self, level: np.ndarray) -> None:
        self.solver.changeRowsBounds(self.m, self.level_rows, level, np.full(self.m, highspy.kHighsInf))

    def _set_extra(self, coefficients: np.ndarray) -> None:
        """Each level row's coefficient on its extra column (-w_j or -delta_j), where it changed."""
        for j in np.flatnonzero(coefficients != self.coefficients):
            column = self.extra + (j if self.binary else 0)
            self.solver.changeCoeff(int(self.level_rows[j]), int(column), float(coefficients[j]))
        self.coefficients = coefficients.copy()

    def _run(self) -> np.ndarray:
        self.solver.run()
        status = self.solver.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            kind = "MILP" if self.binary else "LP"
            raise SolverFailure(f"water-filling {kind}: HiGHS returned {self.solver.modelStatusToString(status)}")
        return np.asarray(self.solver.getSolution().col_value)

    def raise_levels(self, weights: np.ndarray, level: np.ndarray) -> tuple[float, np.ndarray]:
        """The largest c with u >= level + weights c, and an x reaching it."""
        self._set_extra(-weights)
        self._set_levels(level)
        values = self._run()
        return max(float(values[self.extra]), 0.0), values[: self.extra].reshape(self.m, self.n)

    def can_rise(self, level: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """Which candidate jobs can each gain delta_j while every job keeps its level (all together, so one
        MILP answers for every job)."""
        self._set_extra(-(REL_RISE * level + ABS_RISE))
        self._set_levels(level)
        z = np.arange(self.extra, self.extra + self.m, dtype=np.int32)
        self.solver.changeColsBounds(self.m, z, np.zeros(self.m), candidates.astype(float))
        return self._run()[self.extra :] > 0.5


def _solver() -> highspy.Highs:
    return quiet_solver(mip_rel_gap=0.0)


class MaxMinFairnessWaterFilling(Stateless):
    """Water-filling max-min of GPU time (every throughput counted as 1, as `max_min_fairness` does)."""

    name = "max_min_fairness_water_filling"
    heterogeneity_aware = False

    def __init__(self, entities: Entities | str | Path | None = None) -> None:
        self.entities = EntityWeights.of(entities)

    def objective_throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return np.ones((len(inputs.job_ids), len(inputs.gpu_types)))

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        problem = WaterFillingProblem.of(inputs, self.objective_throughputs(inputs))
        x = water_fill(problem, self.entities.rule(inputs))
        return inputs.unflatten(x)


class MaxMinFairnessWaterFillingPerf(MaxMinFairnessWaterFilling):
    """Water-filling max-min of normalised throughput (each type's speed counted)."""

    name = "max_min_fairness_water_filling_perf"
    heterogeneity_aware = True

    def objective_throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return inputs.throughput_matrix()
