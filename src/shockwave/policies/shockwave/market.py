"""The market of one planning window (spec §4.5), a MILP solved by HiGHS.

Time is counted in rounds (T seconds) so the solver's tolerances see numbers near 1. For n jobs, H rounds, G GPUs,
the variables are c_j (rounds granted to job j, an integer in 0..cap_j), u_j (its log term), L_j (its leftover
runtime after the window, in rounds) and M (the makespan term):

    maximise   W - k T M,   W = sum_j w_j u_j / (n H)      (priority-weighted Nash social welfare)
    subject to u_j  <= g_j(m) + (g_j(m+1) - g_j(m)) (c_j - m)   for every m < cap_j where g_j bends
               L_j + c_j                   >= ceil(R_j / T)       leftover runtime, in whole rounds
               M                           >= L_j              the makespan term
               sum_j sf_j c_j              <= G H              capacity
               L_j <= s (deadline_j - now - H T) / T           finish-time fairness
               LOG_OF_ZERO <= u_j <= 0,  L_j >= 0

with g_j(c) = log~(min(1, (p_j + c T / d-bar_j) / E_j)) the piecewise-linear log (through the reference's
breakpoints) of job j's normalised progress after c granted rounds (p_j epochs done of E_j, d-bar_j forecast
seconds per epoch), s = min(1, G/n) and cap_j the rounds job j needs to finish (at most H). g_j is concave in c, so
its chords between consecutive integers bound u_j from above exactly at every integer c_j: one row per chord where
the slope changes replaces the reference's progress variable and SOS2 binaries. Leftover runtime counts whole
rounds (a round-based scheduler finishes a job with 0.3 rounds of work left in one more round): with fractional
leftovers the LP relaxation levels the longest jobs' leftovers to equal fractions no integer plan can match, and
closing that gap took HiGHS 20-50x longer on the 460-job trace.

On a cluster of several GPU types (the reference has one), c_jt counts job j's rounds on type t, a round on t does
v_jt rounds of the job's equal-share work (its forecast is in equal-share time, `predictor.py`), and everything above
that read c_j reads the effective rounds e_j = sum_t v_jt c_jt: the chords, the leftover row and the second solve's
objective. Capacity is a row per type (sum_j sf_j c_jt <= G_t H), and a job runs on one type per round (sum_t c_jt <=
H). The chords of g_j between integer e_j interpolate g_j where v_jt makes e_j fractional, slightly below it. One
type (v = 1) gives exactly the homogeneous program. With several types the integer program is hard (fractional speeds
leave the relaxation far from integral: 2,850 nodes and 7 s for 67 jobs on three types, where the homogeneous program
of the same jobs needs 1 node and 0.04 s), so its LP relaxation is solved and rounded: each c_jt down, then the
largest fractions up (jobs short of a floor first) while the type's capacity, the window and the job's cap allow. A
job loses less than one round per type against the relaxation, whose value bounds the integer optimum.

Goodput-adaptive jobs (`elastic.py`) take the same program with one column per configuration c (a GPU type and a
number of its GPUs) instead of per type: c_jc counts job j's rounds in c, v_jc is its speed there, the capacity row
of c's type counts gpus_c c_jc (`MarketInputs.column_types`, `column_gpus`), and everything else reads columns, but
for the makespan term: M >= L_j / pace_j, the leftover in time at the job's speed in its fastest configuration within
its share of the cluster (`MarketInputs.paces`, `elastic.leftover_pace`).

Rounds are interchangeable here: objective and constraints only see how many rounds c_j each job gets. So the
program has one aggregate capacity row and one integer per job; `packing.py` then lays the counts out in rounds.
When they cannot be laid out, `exact=True` solves it again with a binary x_{j,h} per job and round and a capacity
row per round, which is the reference's formulation and yields the layout itself.

The optimum is rarely unique, and when k T M or a few large priorities dominate the objective, HiGHS's relative gap
leaves everything else arbitrary. So a second solve picks among the plans that keep the makespan term (within the
solver's gap) and at least (1 - welfare_slack) of the welfare W: the one maximising sum_j c_j / cap_j^2, i.e. the
share of its remaining work each job gets done, weighted by 1 / remaining work (Smith's rule with unit weights).
That finishes short jobs sooner instead of spreading the cluster thinly (see docs/shockwave.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import highspy
import numpy as np
import scipy.sparse as sp

from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.fairness import FairnessView
from shockwave.policies.solvers.exact import exact_dot
from shockwave.policies.solvers.highs import (
    SolverFailure,
    quiet_solver,
)

LOG_OF_ZERO = math.log(1e-6)
"""The reference's stand-in for log(0) at the first breakpoint."""


@dataclass(frozen=True)
class MarketInputs:
    """Per-job arrays (one row per active job) and the window's constants."""

    scale_factors: np.ndarray
    epochs: np.ndarray
    progress: np.ndarray
    remaining_s: np.ndarray
    epoch_s: np.ndarray
    """Forecast seconds per remaining epoch: converts granted rounds into planned epochs."""
    gpus: int
    rounds: int
    round_s: float
    gpus_by_type: tuple[int, ...] = ()
    """GPUs of each type, in the cluster's order; empty: one type of `gpus` GPUs."""
    speeds: np.ndarray | None = None
    """v_jt: equal-share seconds of work one second on type t does for job j (n x types; 0: cannot run there).
    With `column_types`, one column per configuration instead of per type."""
    column_types: tuple[int, ...] = ()
    """For goodput-adaptive jobs (`elastic.py`): the type of each column of `speeds`, a configuration (a GPU type
    and a number of its GPUs); empty: one column per type."""
    column_gpus: np.ndarray | None = None
    """GPUs job j takes in column c (n x columns); None: its gang in every column."""
    paces: np.ndarray | None = None
    """Equal-share rounds one round of each job's leftover does after the window, so the makespan term counts
    leftovers in time (M >= L_j / pace_j; `elastic.leftover_pace`); None: 1 for every job."""

    @property
    def jobs(self) -> int:
        return len(self.scale_factors)

    @property
    def capacities(self) -> tuple[int, ...]:
        return self.gpus_by_type or (self.gpus,)

    @property
    def speed(self) -> np.ndarray:
        return np.ones((self.jobs, 1)) if self.speeds is None else self.speeds

    @property
    def pace(self) -> np.ndarray:
        """`paces`, or 1 for every job."""
        return np.ones(self.jobs) if self.paces is None else self.paces

    @property
    def columns(self) -> int:
        """Columns per job: GPU types, or configurations with `column_types`."""
        return len(self.column_types) or len(self.capacities)

    @property
    def type_of_column(self) -> np.ndarray:
        return np.array(self.column_types or range(len(self.capacities)), dtype=int)

    @property
    def gpus_in_column(self) -> np.ndarray:
        """GPUs each job takes in each column (n x columns)."""
        if self.column_gpus is not None:
            return self.column_gpus
        return np.repeat(self.scale_factors[:, None], self.columns, axis=1)

    @property
    def effective_rounds(self) -> int:
        """The most effective rounds a window can give one job (the window itself on one type)."""
        if self.columns == 1:
            return self.rounds
        return max(self.rounds, math.ceil(self.rounds * float(self.speed.max(initial=1.0)) - 1e-9))

    @property
    def remaining_rounds(self) -> np.ndarray:
        """Whole rounds a job needs to finish running alone at its forecast pace."""
        return np.ceil(self.remaining_s / self.round_s - 1e-9).astype(int)

    @property
    def round_cap(self) -> np.ndarray:
        """Effective rounds a job can use: enough to finish (at least one), at most what the window gives."""
        return np.clip(self.remaining_rounds, 1, self.effective_rounds)

    @property
    def critical(self) -> np.ndarray:
        """Jobs on the critical path: remaining rounds reaching the cluster's projected end (all known work over
        all GPUs) less the window."""
        rem = self.remaining_rounds
        return rem >= float(self.scale_factors @ rem) / self.gpus - self.rounds

    @property
    def type_cap(self) -> np.ndarray:
        """Rounds a job can use in each column, a type or a configuration (n x columns): enough to finish there, at
        most the window; 0 where it cannot run."""
        if self.columns == 1:
            return self.round_cap[:, None]
        speed = self.speed
        needed = np.ceil(self.remaining_rounds[:, None] / np.where(speed > 0, speed, 1.0) - 1e-9)
        return np.where(speed > 0, np.clip(needed, 1, self.rounds), 0).astype(int)


@dataclass(frozen=True)
class Fairness:
    """How the window treats the jobs' finish-time targets."""

    leftover_ub: np.ndarray
    """Largest leftover runtime after the window (rounds); inf where the target is not a constraint."""
    weights: np.ndarray
    """Weight of each job's log term."""

    @property
    def relaxed(self) -> bool:
        return not bool(np.isfinite(self.leftover_ub).any())

    @classmethod
    def constrained(cls, view: FairnessView, inputs: MarketInputs, config: ShockwaveConfig) -> Fairness | None:
        """Every job must be able to meet its deadline if, after the window, it ran at the share s.
        None when some job cannot, whatever it gets (the program would be infeasible)."""
        bound = view.leftover_bound(config.rhomax, view.now_s + inputs.rounds * inputs.round_s)
        if (bound < 0).any():
            return None
        return cls(bound, np.ones(inputs.jobs))

    @classmethod
    def relaxed_for(cls, view: FairnessView, config: ShockwaveConfig, sizes: np.ndarray | None = None) -> Fairness:
        """The fallback: no job constrained, each job's log weighted by its priority (given `sizes`, the gangs',
        on several GPU types: `FairnessView.gang_priorities`)."""
        if sizes is None:
            weights = view.priorities(config.lam, config.rhomax)
        else:
            weights = view.gang_priorities(config.lam, config.rhomax, sizes)
        return cls(np.full(len(weights), np.inf), weights)


@dataclass(frozen=True)
class MarketSolution:
    by_type: np.ndarray
    """Rounds granted to each job on each type, or configuration (n x columns)."""
    objective: float
    """The first solve's objective W - k T M (what the reference optimises)."""
    fairness: Fairness
    rounds: list[list[int]] | None = None
    """Job rows per round, when solved with one binary per job and round."""
    limited: bool = False
    """A solve stopped on `solver_max_nodes` and its best plan so far was used."""

    @property
    def counts(self) -> np.ndarray:
        """Rounds granted to each job, over all types."""
        return self.by_type.sum(axis=1)


def log_segments(bases: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Slope and intercept of each segment of the piecewise-linear log through the breakpoints."""
    x = np.asarray(bases)
    v = np.array([LOG_OF_ZERO if b == 0 else math.log(b) for b in bases])
    slopes = np.diff(v) / np.diff(x)
    return slopes, v[:-1] - slopes * x[:-1]


def solve_market(
    inputs: MarketInputs,
    config: ShockwaveConfig,
    fairness: Fairness,
    *,
    exact: bool = False,
    start: np.ndarray | None = None,
    floor: np.ndarray | None = None,
    progress: np.ndarray | None = None,
) -> MarketSolution | None:
    """The window's plan, or None when the fairness constraints (or `floor`, or `progress`) make it infeasible.

    `start` is a warm start (rounds per job and type, for instance the previous plan's). `exact` (one binary per
    job and round) is the homogeneous program's. `floor`: on several types, the fewest rounds each job gets over
    all types (`greedy.late_floor`; a row of the relaxation, and rounding raises the jobs short of it first, so it
    holds wherever their types have room). `progress`: the fewest effective rounds each job gets in the relaxation
    (its leftover at most its remaining rounds less them; rounding may leave it under a round short;
    `longest.longest_first`). Raises SolverFailure when HiGHS gives nothing
    usable.
    """
    _check_finite(inputs, fairness)
    if exact and len(inputs.capacities) > 1:
        raise ValueError("the per-round program is built for one GPU type")
    if floor is not None and len(inputs.capacities) == 1:
        raise ValueError("a floor on rounds is for several GPU types")
    model = _Model(inputs, config, fairness, exact, floor, progress)
    solver = _solver(model.lp, config)
    if start is not None and not exact:
        _warm_start(solver, np.minimum(start, inputs.type_cap).ravel())
    values = _run(solver)
    if values is None:
        return None
    limited = solver.getModelStatus() in LIMITED
    objective = solver.getInfo().objective_function_value
    values, second_limited = _prefer_completion(solver, model, values, config)
    n, h, columns = inputs.jobs, inputs.rounds, inputs.columns
    c = values[: n * columns].reshape(n, columns)
    by_type = np.rint(c).astype(int) if columns == 1 else _rounded(c, inputs, floor)
    rounds = None
    if exact:
        x = np.rint(values[model.x : model.x + n * h]).reshape(n, h)
        rounds = [np.flatnonzero(x[:, r]).tolist() for r in range(h)]
    return MarketSolution(by_type, objective, fairness, rounds, limited or second_limited)


def _prefer_completion(
    solver: highspy.Highs, model: _Model, values: np.ndarray, config: ShockwaveConfig
) -> tuple[np.ndarray, bool]:
    """Second solve: keep the makespan term and most of the welfare, give rounds to jobs closest to finishing."""
    welfare = exact_dot(model.welfare, values)
    solver.changeRowBounds(model.welfare_row, welfare - config.welfare_slack * abs(welfare), highspy.kHighsInf)
    makespan = float(values[model.makespan])
    solver.changeColBounds(model.makespan, 0.0, makespan + config.solver_rel_gap * abs(makespan) + 1e-9)
    columns = np.arange(model.lp.num_col_, dtype=np.int32)
    solver.changeColsCost(len(columns), columns, model.completion)
    _warm_start(solver, values)
    second = _run(solver)
    limited = solver.getModelStatus() in LIMITED
    return (values, limited) if second is None else (second, limited)


class _Runs(NamedTuple):
    """Where each job can run: one entry per (job, type) with v_jt > 0, by job then type. e_j = sum_t v_jt c_jt
    sums a job's entries, so every row that reads e_j takes its coefficients from here."""

    job: np.ndarray
    kind: np.ndarray
    """The entry's type, or its configuration with `MarketInputs.column_types`."""
    column: np.ndarray
    """The entry's c_jt column."""
    speed: np.ndarray
    """v_jt."""

    @classmethod
    def of(cls, speed: np.ndarray, types: int) -> _Runs:
        """The entries of v (n x types), read once for all the rows."""
        runs_j, runs_t = np.nonzero(speed > 0)
        return cls(runs_j, runs_t, runs_j * types + runs_t, speed[runs_j, runs_t])


class _Model:
    """The program as one sparse matrix, plus where each variable lives and the second solve's objective rows."""

    def __init__(
        self,
        inputs: MarketInputs,
        config: ShockwaveConfig,
        fairness: Fairness,
        exact: bool,
        floor: np.ndarray | None = None,
        progress: np.ndarray | None = None,
    ) -> None:
        n, h = inputs.jobs, inputs.rounds
        columns = inputs.columns
        self.u = n * columns
        self.leftover, self.makespan = self.u + n, self.u + 2 * n
        self.x = self.makespan + 1
        cols = self.x + (n * h if exact else 0)
        # e_j = sum_t v_jt c_jt: one (job, column, v) entry per type the job can run on.
        runs = _Runs.of(inputs.speed, columns)

        self._blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._rows = 0
        self._add_chords(inputs, config, runs)
        self._add_leftovers(inputs, runs)
        self._add_makespan(inputs)
        self._add_capacity(inputs, runs, exact, floor)
        self._add_welfare(inputs, fairness, cols)
        self.completion = np.zeros(cols)
        self.completion[runs.column] = runs.speed * (1.0 / inputs.round_cap.astype(float) ** 2)[runs.job]
        leftover_ub = fairness.leftover_ub
        if progress is not None:
            leftover_ub = np.minimum(leftover_ub, inputs.remaining_rounds - progress)
        self.lp = self._program(inputs, config, leftover_ub, exact, cols)

    def _add_chords(self, inputs: MarketInputs, config: ShockwaveConfig, runs: _Runs) -> None:
        """u_j - s_jk e_j <= g_j(k) - s_jk k: the log term under each chord of g_j where its slope changes."""
        n = inputs.jobs
        chord_jobs, chord_at, chord_slope = _chords(inputs, config)
        chord_rows = np.arange(len(chord_jobs))
        first_run = np.searchsorted(runs.job, chord_jobs, side="left")
        per_job = np.bincount(runs.job, minlength=n)[chord_jobs]
        entry = np.repeat(first_run, per_job) + ranges(per_job)
        self._add(
            np.concatenate([chord_rows, np.repeat(chord_rows, per_job)]),
            np.concatenate([self.u + chord_jobs, runs.column[entry]]),
            np.concatenate([np.ones(len(chord_jobs)), -np.repeat(chord_slope, per_job) * runs.speed[entry]]),
            np.full(len(chord_jobs), -highspy.kHighsInf),
            chord_at,
        )

    def _add_leftovers(self, inputs: MarketInputs, runs: _Runs) -> None:
        """L_j + e_j >= the job's remaining whole rounds: what the window does not give it is left over."""
        n = inputs.jobs
        jobs = np.arange(n)
        self._add(
            np.concatenate([jobs, runs.job]),
            np.concatenate([self.leftover + jobs, runs.column]),
            np.concatenate([np.ones(n), runs.speed]),
            inputs.remaining_rounds.astype(float),
            np.full(n, highspy.kHighsInf),
        )

    def _add_makespan(self, inputs: MarketInputs) -> None:
        """M - L_j / pace_j >= 0: the makespan term is the longest leftover, in time (`MarketInputs.paces`)."""
        n = inputs.jobs
        jobs = np.arange(n)
        self._add(
            np.concatenate([jobs, jobs]),
            np.concatenate([np.full(n, self.makespan), self.leftover + jobs]),
            np.concatenate([np.ones(n), -1.0 / inputs.pace]),
            np.zeros(n),
            np.full(n, highspy.kHighsInf),
        )

    def _add_capacity(self, inputs: MarketInputs, runs: _Runs, exact: bool, floor: np.ndarray | None) -> None:
        """The GPUs the granted rounds take: per round with one binary per job and round (whose rows also tie c_j to
        its rounds), else in aggregate over the window, per type with one type per round for each job (and at
        least its `floor` of rounds in all)."""
        n, h, capacities = inputs.jobs, inputs.rounds, inputs.capacities
        types = len(capacities)
        one_column = inputs.columns == 1
        jobs = np.arange(n)
        inf = highspy.kHighsInf
        sizes = inputs.scale_factors.astype(float)
        if exact:
            x_cols = self.x + np.arange(n * h)
            self._add(
                np.concatenate([jobs, np.repeat(jobs, h)]),
                np.concatenate([jobs, x_cols]),
                np.concatenate([np.ones(n), -np.ones(n * h)]),
                np.zeros(n),
                np.zeros(n),
            )
            self._add(
                np.tile(np.arange(h), n),
                x_cols,
                np.repeat(sizes, h),
                np.full(h, -inf),
                np.full(h, float(capacities[0])),
            )
        elif one_column:
            gpus = inputs.gpus_in_column[:, 0].astype(float)
            self._add(np.zeros(n, dtype=int), jobs, gpus, np.array([-inf]), np.array([float(capacities[0] * h)]))
        else:
            gpus = inputs.gpus_in_column[runs.job, runs.kind].astype(float)
            rows = inputs.type_of_column[runs.kind]
            self._add(rows, runs.column, gpus, np.full(types, -inf), np.array(capacities, float) * h)
            least = np.full(n, -inf) if floor is None else floor.astype(float)
            self._add(runs.job, runs.column, np.ones(len(runs.job)), least, np.full(n, float(h)))

    def _add_welfare(self, inputs: MarketInputs, fairness: Fairness, cols: int) -> None:
        """W as a free row, which the second solve bounds from below to keep most of the first solve's welfare."""
        n, h = inputs.jobs, inputs.rounds
        inf = highspy.kHighsInf
        self.welfare = np.zeros(cols)
        self.welfare[self.u : self.u + n] = fairness.weights / (n * h)
        self.welfare_row = self._rows
        welfare_cols = np.arange(self.u, self.u + n)
        self._add(np.zeros(n, dtype=int), welfare_cols, self.welfare[welfare_cols], np.array([-inf]), np.array([inf]))

    def _program(
        self, inputs: MarketInputs, config: ShockwaveConfig, leftover_ub: np.ndarray, exact: bool, cols: int
    ) -> highspy.HighsLp:
        """The rows added so far, the first solve's objective W - k T M and the variables' bounds (`leftover_ub`: the
        largest leftover of each job), as HiGHS takes them."""
        n, h, columns = inputs.jobs, inputs.rounds, inputs.columns
        inf = highspy.kHighsInf
        r_idx, c_idx, vals, lows, highs = (np.concatenate(parts) for parts in zip(*self._blocks, strict=True))
        matrix = sp.csc_matrix((vals, (r_idx, c_idx)), shape=(self._rows, cols))
        cost = self.welfare.copy()
        cost[self.makespan] = -config.k * inputs.round_s
        lower = np.concatenate([np.zeros(n * columns), np.full(n, LOG_OF_ZERO), np.zeros(n), [0.0]])
        upper = np.concatenate([inputs.type_cap.ravel().astype(float), np.zeros(n), leftover_ub, [inf]])
        counted = highspy.HighsVarType.kInteger if columns == 1 else highspy.HighsVarType.kContinuous
        integer = [counted] * (n * columns) + [highspy.HighsVarType.kContinuous] * (2 * n + 1)
        if exact:
            lower = np.concatenate([lower, np.zeros(n * h)])
            upper = np.concatenate([upper, np.ones(n * h)])
            integer += [highspy.HighsVarType.kInteger] * (n * h)

        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = cols, self._rows
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lower, np.maximum(upper, lower)
        lp.row_lower_, lp.row_upper_ = lows, highs
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, self._rows
        lp.integrality_ = integer
        return lp

    def _add(self, r: np.ndarray, c: np.ndarray, v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """A block of rows after those added so far (its row indices count from 0)."""
        self._blocks.append((r + self._rows, c, v, lo, hi))
        self._rows += len(lo)


def _rounded(relaxed: np.ndarray, inputs: MarketInputs, floor: np.ndarray | None = None) -> np.ndarray:
    """Whole rounds per job and column from the relaxation's: down, then the largest fractions up (ties: job,
    column) while the column's type's GPU-rounds, the window and the job's cap there allow; jobs still short of their
    `floor` first (the relaxation meets it, rounding down alone may not)."""
    whole = np.floor(relaxed + 1e-9).astype(int)
    fraction = relaxed - whole
    sizes = inputs.gpus_in_column.astype(int)
    kinds = inputs.type_of_column
    room = np.array(inputs.capacities) * inputs.rounds
    np.subtract.at(room, kinds, (sizes * whole).sum(axis=0))
    total = whole.sum(axis=1)
    cap = inputs.type_cap
    n, columns = whole.shape
    raised = np.zeros_like(whole, dtype=bool)
    order = np.lexsort((np.arange(n * columns), -fraction.ravel()))
    least = np.zeros(n, dtype=int) if floor is None else floor
    for short_only in (True, False):
        for index in order:
            j, c = divmod(int(index), columns)
            if fraction[j, c] <= 1e-9:
                break
            if raised[j, c] or (short_only and total[j] >= least[j]):
                continue
            t = kinds[c]
            if whole[j, c] < cap[j, c] and total[j] < inputs.rounds and sizes[j, c] <= room[t]:
                whole[j, c] += 1
                total[j] += 1
                room[t] -= sizes[j, c]
                raised[j, c] = True
    return whole


def ranges(lengths: np.ndarray) -> np.ndarray:
    """0..l-1 for each l, concatenated."""
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(int(lengths.sum())) - starts


def progress_log(inputs: MarketInputs, config: ShockwaveConfig) -> np.ndarray:
    """g_j(e): the piecewise-linear log of job j's normalised progress after e effective rounds, for e = 0..the
    most a window gives (n x that+1; on one type e = c and the window is H rounds)."""
    epochs_per_round = inputs.round_s / np.where(inputs.epoch_s > 0, inputs.epoch_s, np.inf)
    granted = np.arange(inputs.effective_rounds + 1)
    y = np.minimum(
        1.0, (inputs.progress[:, None] + granted[None, :] * epochs_per_round[:, None]) / inputs.epochs[:, None]
    )
    slopes, intercepts = log_segments(config.log_approximation_bases)
    return np.min(y[:, :, None] * slopes + intercepts, axis=2)


def _chords(inputs: MarketInputs, config: ShockwaveConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """u_j <= g_j(k) + s_jk (c_j - k) for each distinct chord k -> k+1 below job j's cap, as (job, rhs, slope)."""
    values = progress_log(inputs, config)
    slopes = np.diff(values, axis=1)
    k = np.arange(inputs.effective_rounds)
    below_cap = k[None, :] < inputs.round_cap[:, None]
    bends = np.ones_like(below_cap)
    bends[:, 1:] = ~np.isclose(slopes[:, 1:], slopes[:, :-1], rtol=1e-12, atol=1e-12)
    jobs, at = np.nonzero(below_cap & bends)
    slope = slopes[jobs, at]
    return jobs, values[jobs, at] - slope * at, slope


LIMITED = (highspy.HighsModelStatus.kSolutionLimit, highspy.HighsModelStatus.kIterationLimit)
"""Stopped on a node or iteration limit with a feasible plan: counted, and the same on any machine."""
USABLE = (highspy.HighsModelStatus.kOptimal, *LIMITED)
FEASIBLE_POINT = 2  # HiGHS's primal_solution_status for "a feasible point is known"


def _check_finite(inputs: MarketInputs, fairness: Fairness) -> None:
    """A NaN or infinite forecast would make HiGHS fail obscurely (or plan nonsense): name the rows instead."""
    for name, values in (
        ("remaining_s", inputs.remaining_s),
        ("epoch_s", inputs.epoch_s),
        ("progress", inputs.progress),
        ("epochs", inputs.epochs),
        ("weights", fairness.weights),
        ("speeds", inputs.speed),
    ):
        finite = np.isfinite(np.asarray(values, dtype=float)).reshape(len(values), -1)
        bad = np.flatnonzero(~finite.all(axis=1))
        if len(bad):
            raise SolverFailure(f"the market's {name} is non-finite for job rows {bad[:5].tolist()}")
    if np.isnan(fairness.leftover_ub).any():
        raise SolverFailure("the market's fairness bound is NaN")


def _solver(lp: highspy.HighsLp, config: ShockwaveConfig) -> highspy.Highs:
    solver = quiet_solver(mip_rel_gap=config.solver_rel_gap, mip_max_nodes=config.solver_max_nodes)
    solver.passModel(lp)
    return solver


def _warm_start(solver: highspy.Highs, values: np.ndarray) -> None:
    """Offer a (partial) solution: the first len(values) columns; HiGHS completes and checks it."""
    solver.setSolution(len(values), np.arange(len(values), dtype=np.int32), values.astype(float))


def _run(solver: highspy.Highs) -> np.ndarray | None:
    solver.run()
    status = solver.getModelStatus()
    if status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return None
    if status not in USABLE or solver.getInfo().primal_solution_status != FEASIBLE_POINT:
        raise SolverFailure(f"HiGHS returned {solver.modelStatusToString(status)} without a usable solution")
    return np.asarray(solver.getSolution().col_value)
