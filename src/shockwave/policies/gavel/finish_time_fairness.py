"""Themis finish-time fairness (spec §3.3): minimise max_j rho_j(x).

rho_j = (time since arrival + remaining_j / rate_j(x)) / (isolated-equivalent time so far + remaining_j / iso_j),
with rate_j(x) = sum_t thr_jt x_jt and iso_j the rate at the isolated allocation (an equal 1/m share of every type
for the gang, rows capped at 1); the isolated-equivalent time accumulates progress between recomputes at the
isolated rate then current. Written as the epigraph min t s.t. since_j + remaining_j inv_pos(rate_j(x)) <= t T_j,
a second-order-cone program an open solver (ECOS) handles; the reference needed Gurobi for it. Jobs with nothing
left bound t from below only. A failed solve falls back to the isolated allocation, as in the reference.
"""

from __future__ import annotations

import numpy as np

from shockwave.core.kept import KeepsState
from shockwave.policies.gavel import cone
from shockwave.policies.gavel.lp import Program, SolverFailure, as_allocation, isolated_allocation, solve, solved
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs
from shockwave.policies.gavel.packed import packed_program
from shockwave.policies.solvers.modelling import cp


class FinishTimeFairness(KeepsState):
    """Every type at the job's V100 throughput (the reference's heterogeneity-agnostic variant)."""

    name = "finish_time_fairness"
    heterogeneity_aware = False
    packs = False
    kept = ("isolated_time", "previous_remaining", "previous_iso_rate")
    isolated_time: dict[int, float]
    """Each job's isolated-equivalent time so far: its progress between recomputes at the isolated rate then."""
    previous_remaining: dict[int, int | float]
    """Each job's steps left at the last recompute (a Gavel-generated job's, a fraction of a step included)."""
    previous_iso_rate: dict[int, float]
    """Each job's isolated rate at the last recompute."""

    def __init__(self, *, reference_quirks: bool = False) -> None:
        self.reference_quirks = reference_quirks
        """Build the program as the reference Gavel does (a maximum over one ratio per job): the same optimum, but
        ECOS returns the same point among the optimal allocations as the reference, which decides its numbers.
        Otherwise the vectorised epigraph (fewer rows, the same optimum)."""
        self.isolated_time = {}
        self.previous_remaining = {}
        self.previous_iso_rate = {}

    def throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return inputs.reference_throughput_matrix()

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        thr = self.throughputs(inputs)
        iso_x = isolated_allocation(inputs)
        iso_rates = np.sum(np.multiply(thr, iso_x), axis=1)
        iso_rate = {j: float(iso_rates[i]) for i, j in enumerate(inputs.job_ids)}
        for j in inputs.job_ids:
            self.isolated_time.setdefault(j, 0.0)
            if j in self.previous_remaining:
                done = self.previous_remaining[j] - inputs.remaining_steps[j]
                self.isolated_time[j] += done / self.previous_iso_rate[j]
        self.previous_remaining = dict(inputs.remaining_steps)
        self.previous_iso_rate = iso_rate

        remaining, since = inputs.column(inputs.remaining_steps), inputs.column(inputs.times_since_start)
        t_iso = np.array(
            [self.isolated_time[j] + max(inputs.remaining_steps[j], 0) / iso_rate[j] for j in inputs.job_ids]
        )
        try:
            return self.optimum(inputs, thr, since, remaining, t_iso)
        except SolverFailure:
            return inputs.unflatten(iso_x)

    def optimum(
        self, inputs: AllocationInputs, thr: np.ndarray, since: np.ndarray, remaining: np.ndarray, t_iso: np.ndarray
    ) -> Allocation:
        """The program's optimum, built as matrices for ECOS (`cone`); with `reference_quirks`, the reference's
        program (one ratio per job: the same optimum, and ECOS's choice among tied optima as in the reference)."""
        capacity = np.array(inputs.gpus_by_type, dtype=float)
        times = cone.FinishTimes(thr, inputs.scale_factor_matrix(), capacity, since, remaining, t_iso)
        program = times.as_the_reference() if self.reference_quirks else times.epigraph()
        return as_allocation(inputs, cone.allocation(program.solve(), thr.shape))


class FinishTimeFairnessPerf(FinishTimeFairness):
    """Every type at the job's own throughput there."""

    name = "finish_time_fairness_perf"
    heterogeneity_aware = True
    packs = False

    def throughputs(self, inputs: AllocationInputs) -> np.ndarray:
        return inputs.throughput_matrix()


class FinishTimeFairnessPacked(FinishTimeFairnessPerf):
    """Per-type throughputs, and pairs of jobs sharing GPUs: a job's rate sums its rate alone and its own rate in
    each pair it runs in (over its weight, as the reference divides them)."""

    name = "finish_time_fairness_packed"
    packs = True

    def optimum(
        self, inputs: AllocationInputs, thr: np.ndarray, since: np.ndarray, remaining: np.ndarray, t_iso: np.ndarray
    ) -> Allocation:
        """The program over jobs and pairs, through cvxpy (`packed.packed_program`)."""
        program = packed_program(inputs)
        if self.reference_quirks:
            problem = self._as_the_reference(program, since, remaining, t_iso)
        else:
            problem = self._epigraph(program, since, remaining, t_iso)
        solve(problem)
        return program.read(solved(program.x))

    @staticmethod
    def _epigraph(program: Program, since: np.ndarray, remaining: np.ndarray, t_iso: np.ndarray) -> cp.Problem:
        t = cp.Variable()
        constraints = list(program.constraints)
        busy = remaining > 0
        if busy.any():
            rows = np.flatnonzero(busy)
            rate = program.rates(rows)
            constraints.append(since[rows] + cp.multiply(remaining[rows], cp.inv_pos(rate)) <= t * t_iso[rows])
        done = ~busy & (t_iso > 0)
        if done.any():
            constraints.append(t >= np.max(since[done] / t_iso[done]))
        return cp.Problem(cp.Minimize(t), constraints)

    @staticmethod
    def _as_the_reference(program: Program, since: np.ndarray, remaining: np.ndarray, t_iso: np.ndarray) -> cp.Problem:
        ratios = [(since[i] + remaining[i] * cp.inv_pos(program.rate_of(i))) / t_iso[i] for i in range(len(since))]
        objective = cp.Minimize(ratios[0] if len(ratios) == 1 else cp.maximum(*ratios))
        return cp.Problem(objective, program.constraints)
