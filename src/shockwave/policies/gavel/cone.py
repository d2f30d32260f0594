"""Gavel's max-min and finish-time-fairness programs handed to ECOS as matrices, without a modelling layer.

ECOS is an interior-point method: among tied optima it returns a point that depends on every bit of its input, and
that point decides round priorities, so the reference's numbers reproduce only from the very matrices cvxpy 1.9.3
builds for the reference's expressions. Compiling those expressions costs 5-100x the solve each round; here the same
matrices (the same rows and columns in the same order, the same values and the same structural zeros dropped) are
built directly with numpy, and `tests/policies/gavel/test_cone.py` checks them against cvxpy's, bit for bit.

Variables, in cvxpy's order: the objective's epigraph variable, then x (jobs x types) column-major, then one u_j per
finish-time ratio (u_j >= 1 / rate_j, the second-order cone ||(rate_j - u_j, 2)|| <= rate_j + u_j).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ecos
import numpy as np
import scipy.sparse as sp

from shockwave.policies.solvers.highs import SolverFailure

SOLVED = {0, 10, -1}
"""ECOS exit flags with a usable point, as cvxpy reads them: optimal, optimal but inaccurate, iteration limit."""


@dataclass
class _Rows:
    """A G matrix and h vector assembled block by block as triplets."""

    rows: list[np.ndarray] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    h: list[np.ndarray] = field(default_factory=list)
    count: int = 0

    def add(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, h: np.ndarray) -> None:
        """A block of len(h) rows; `rows` counts from the block's first row."""
        self.rows.append(np.asarray(rows) + self.count)
        self.cols.append(np.asarray(cols))
        self.values.append(np.asarray(values, dtype=float))
        self.h.append(np.asarray(h, dtype=float))
        self.count += len(h)

    def program(self, variables: int, linear: int, cones: tuple[int, ...], objective: float = 1.0) -> ConeProgram:
        """The program minimising `objective` times the first variable."""
        g = sp.csc_matrix(
            (np.concatenate(self.values), (np.concatenate(self.rows), np.concatenate(self.cols))),
            shape=(self.count, variables),
        )
        g.eliminate_zeros()
        g.sort_indices()
        c = np.zeros(variables)
        c[0] = objective
        return ConeProgram(c, g, np.concatenate(self.h), linear, cones)


@dataclass(frozen=True)
class ConeProgram:
    """minimise c'z subject to h - Gz in (nonnegative orthant of `linear` rows) x (second-order cones of `cones`)."""

    c: np.ndarray
    G: sp.csc_matrix
    h: np.ndarray
    linear: int
    cones: tuple[int, ...]

    def solve(self) -> np.ndarray:
        """ECOS's z; SolverFailure where it has none (infeasible, unbounded, numerical failure)."""
        try:
            solution = ecos.solve(self.c, self.G, self.h, {"l": self.linear, "q": list(self.cones)}, verbose=False)
        except (ValueError, TypeError) as exc:
            raise SolverFailure(f"ECOS: {exc}") from None
        if solution["info"]["exitFlag"] not in SOLVED:
            raise SolverFailure(f"ECOS: {solution['info']['infostring']}")
        return solution["x"]


def allocation(z: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """x (jobs x types) read from a solution's z, past the epigraph variable."""
    return z[1 : 1 + shape[0] * shape[1]].reshape(shape, order="F")


def _x_columns(shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each entry of x in column-major order: its job, its type and its column in z."""
    m, k = shape
    return np.tile(np.arange(m), k), np.repeat(np.arange(k), m), 1 + np.arange(m * k)


def _cluster_rows(g: _Rows, gangs: np.ndarray, capacity: np.ndarray) -> None:
    """x >= 0, sum_j gang_jt x_jt <= G_t per type, sum_t x_jt <= 1 per job: base_constraints' rows."""
    m, k = gangs.shape
    job, gpu_type, col = _x_columns((m, k))
    n = m * k
    g.add(np.arange(n), col, -np.ones(n), np.zeros(n))
    g.add(gpu_type, col, gangs.T.ravel(), capacity)
    g.add(job, col, np.ones(n), np.ones(m))


def _rate_cones(g: _Rows, rates: np.ndarray, jobs: np.ndarray, first_u: int) -> None:
    """For each job in `jobs` (in order), u >= 1 / rate as a 3-row second-order cone."""
    m, k = rates.shape
    for i, j in enumerate(jobs.tolist()):
        cols = 1 + j + m * np.arange(k)
        u = first_u + i
        values = -rates[j]
        g.add(
            np.concatenate([np.zeros(k, int), [0], np.ones(k, int), [1]]),
            np.concatenate([cols, [u], cols, [u]]),
            np.concatenate([values, [-1.0], values, [1.0]]),
            np.array([0.0, 0.0, 2.0]),
        )


def max_min_program(coefficients: np.ndarray, gangs: np.ndarray, capacity: np.ndarray) -> ConeProgram:
    """maximise min_j sum_t a_jt x_jt over base_constraints: minimise s with s >= -a_j x_j per job."""
    m, k = coefficients.shape
    job, _, col = _x_columns((m, k))
    g = _Rows()
    g.add(
        np.concatenate([np.arange(m), job]),
        np.concatenate([np.zeros(m, int), col]),
        np.concatenate([-np.ones(m), -coefficients.T.ravel()]),
        np.zeros(m),
    )
    _cluster_rows(g, gangs, capacity)
    return g.program(1 + m * k, g.count, ())


@dataclass(frozen=True)
class FinishTimes:
    """What a finish-time-fairness program reads, per job: its rate per type and gang (jobs x types), the time since
    it arrived, its steps left and T_j (its isolated-equivalent time); and the GPUs of each type."""

    rates: np.ndarray
    gangs: np.ndarray
    capacity: np.ndarray
    since: np.ndarray
    remaining: np.ndarray
    t_iso: np.ndarray

    def epigraph(self) -> ConeProgram:
        """minimise t with since_j + remaining_j u_j <= t T_j for jobs with steps left, and t >= since_j / T_j for
        jobs without (the vectorised epigraph of `FinishTimeFairness`)."""
        m, k = self.rates.shape
        busy = np.flatnonzero(self.remaining > 0)
        done = (self.remaining <= 0) & (self.t_iso > 0)
        first_u = 1 + m * k
        g = _Rows()
        _cluster_rows(g, self.gangs, self.capacity)
        g.add(
            np.concatenate([np.arange(len(busy)), np.arange(len(busy))]),
            np.concatenate([np.zeros(len(busy), int), first_u + np.arange(len(busy))]),
            np.concatenate([-self.t_iso[busy], self.remaining[busy]]),
            -self.since[busy],
        )
        if done.any():
            g.add(np.zeros(1, int), np.zeros(1, int), -np.ones(1), [-np.max(self.since[done] / self.t_iso[done])])
        linear = g.count
        _rate_cones(g, self.rates, busy, first_u)
        return g.program(first_u + len(busy), linear, (3,) * len(busy))

    def as_the_reference(self) -> ConeProgram:
        """minimise max_j (since_j + remaining_j u_j) / T_j, one ratio per job as the reference writes it. A lone
        job's ratio is the objective itself: cvxpy then drops since / T and puts u first."""
        m, k = self.rates.shape
        g = _Rows()
        if m == 1:
            _cluster_rows(g, self.gangs, self.capacity)
            linear = g.count
            _rate_cones(g, self.rates, np.arange(1), 0)
            return g.program(1 + k, linear, (3,), objective=float(self.remaining[0] * (1 / self.t_iso[0])))
        first_u = 1 + m * k
        g.add(
            np.concatenate([np.arange(m), np.arange(m)]),
            np.concatenate([np.zeros(m, int), first_u + np.arange(m)]),
            np.concatenate([-np.ones(m), self.remaining * (1 / self.t_iso)]),
            -(self.since * (1 / self.t_iso)),
        )
        _cluster_rows(g, self.gangs, self.capacity)
        linear = g.count
        _rate_cones(g, self.rates, np.arange(m), first_u)
        return g.program(first_u + m, linear, (3,) * m)
