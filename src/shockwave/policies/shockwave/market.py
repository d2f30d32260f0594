"""The market of one planning window (spec §4.5), a MILP solved by HiGHS.

Time is counted in rounds (T seconds) so the solver's tolerances see numbers near 1. For n jobs, H rounds, G GPUs:

    maximise   sum_j w_j u_j / (n H)  -  k T M
    subject to E_j w_j y_j - c_j           <= p_j w_j          planned epochs fit the c_j granted rounds
               u_j                         <= a_i y_j + b_i    for every segment i of the piecewise-linear log
               L_j + E_j w_j y_j            >= R_j / T + p_j w_j  leftover runtime after the window
               M                           >= L_j              the makespan term
               sum_j sf_j c_j              <= G H              capacity
               L_j <= s (rhomax FT*_j - now - H T) / T         finish-time fairness
               c_j in {0..H}, y_j in [p_j/E_j, 1], L_j >= 0

with y_j the normalised progress at the window's end, w_j = d-bar_j / T (rounds per epoch) and s = min(1, G/n).
Maximising a concave function, the log is the minimum of its segments: one cut per segment replaces SOS2 binaries.

Rounds are interchangeable here: objective and constraints only see how many rounds c_j each job gets. So the
program has one aggregate capacity row and one integer per job; `packing.py` then lays the counts out in rounds.
When they cannot be laid out, `exact=True` solves it again with a binary x_{j,h} per job and round and a capacity
row per round, which is the reference's formulation and yields the layout itself.

When the fairness constraints cannot all hold, they are dropped and each job's log term is weighted by its priority
pi_j = rho_j^lambda (rho_j^100 for a job with under a round left) if its projected ratio rho_j = (now + R_j/s) / FT*_j
exceeds rhomax, else 1 (spec §4.5, "infeasible fallback").
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from shockwave.policies.shockwave.config import ShockwaveConfig

LOG_OF_ZERO = math.log(1e-6)
"""The reference's stand-in for log(0) at the first breakpoint."""
NEARLY_DONE_EXPONENT = 100.0
PRIORITY_CAP = 1e6
"""Priorities beyond this would only hurt the solver's numerics; ordering still uses the uncapped value."""


@dataclass(frozen=True)
class MarketInputs:
    """Per-job arrays (one row per active job) and the window's constants."""

    scale_factors: np.ndarray
    epochs: np.ndarray
    progress: np.ndarray
    remaining_s: np.ndarray
    after_current_s: np.ndarray
    """The reference's R_j: forecast time of the epochs after the one in progress."""
    epoch_s: np.ndarray
    targets_s: np.ndarray
    submit_s: np.ndarray
    gpus: int
    rounds: int
    round_s: float
    now_s: float
    share: float

    @property
    def jobs(self) -> int:
        return len(self.scale_factors)

    @property
    def round_cap(self) -> np.ndarray:
        """Rounds a job can use: enough to finish at its current epoch pace (at least one), at most the window."""
        needed = np.ceil((self.epochs - self.progress) * self.epoch_s / self.round_s - 1e-9)
        return np.clip(needed, 1, self.rounds).astype(int)

    def deadline_s(self, rhomax: float) -> np.ndarray:
        """Submission plus rhomax times the fair job duration."""
        return self.submit_s + rhomax * (self.targets_s - self.submit_s)

    def projected_ratio(self) -> np.ndarray:
        """Projected over fair job duration (both counted from submission, as finish-time fairness is)."""
        return (self.now_s + self.remaining_s / self.share - self.submit_s) / (self.targets_s - self.submit_s)

    def urgency(self, config: ShockwaveConfig) -> np.ndarray:
        """log pi_j, uncapped and defined for every job (jobs on track get lambda log rho_j <= 0)."""
        ratio = self.projected_ratio()
        nearly_done = (self.after_current_s < self.round_s) & (ratio > config.rhomax)
        return np.where(nearly_done, NEARLY_DONE_EXPONENT, config.lam) * np.log(ratio)

    def priorities(self, config: ShockwaveConfig) -> np.ndarray:
        behind = self.projected_ratio() > config.rhomax
        return np.where(behind, np.minimum(np.exp(np.minimum(self.urgency(config), 700.0)), PRIORITY_CAP), 1.0)


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
    def constrained(cls, inputs: MarketInputs, config: ShockwaveConfig) -> Fairness | None:
        """Every job must be able to finish by rhomax x its fair duration if, after the window, it ran at the
        share s: end of window + L_j / s <= deadline_j. None when some job cannot, whatever it gets."""
        end_of_window = inputs.now_s + inputs.rounds * inputs.round_s
        leftover_ub = inputs.share * (inputs.deadline_s(config.rhomax) - end_of_window) / inputs.round_s
        if (leftover_ub < 0).any():
            return None
        return cls(leftover_ub, np.ones(inputs.jobs))

    @classmethod
    def relaxed_for(cls, inputs: MarketInputs, config: ShockwaveConfig) -> Fairness:
        """The fallback: no job constrained, each job's log weighted by its priority."""
        return cls(np.full(inputs.jobs, np.inf), inputs.priorities(config))


@dataclass(frozen=True)
class MarketSolution:
    counts: np.ndarray
    objective: float
    fairness: Fairness
    rounds: list[list[int]] | None = None
    """Job rows per round, when solved with one binary per job and round."""


class SolverFailure(RuntimeError):
    """HiGHS returned no usable solution (error, or time limit without an incumbent)."""


def log_segments(bases: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Slope and intercept of each segment of the piecewise-linear log through the breakpoints."""
    x = np.asarray(bases)
    v = np.array([LOG_OF_ZERO if b == 0 else math.log(b) for b in bases])
    slopes = np.diff(v) / np.diff(x)
    return slopes, v[:-1] - slopes * x[:-1]


def solve_market(inputs: MarketInputs, config: ShockwaveConfig, fairness: Fairness, *, exact: bool = False,
                 start: np.ndarray | None = None) -> MarketSolution | None:
    """The window's optimum, or None when the fairness constraints make it infeasible.

    `start` is a warm start (rounds per job, for instance the previous plan's). Raises SolverFailure when HiGHS
    gives nothing usable.
    """
    lp, layout = _build(inputs, config, fairness, exact)
    solution = _run(lp, config, start if not exact else None)
    if solution is None:
        return None
    values, objective = solution
    n, h = inputs.jobs, inputs.rounds
    counts = np.rint(values[:n]).astype(int)
    rounds = None
    if exact:
        x = np.rint(values[layout.x : layout.x + n * h]).reshape(n, h)
        rounds = [np.flatnonzero(x[:, r]).tolist() for r in range(h)]
    return MarketSolution(counts=counts, objective=objective, fairness=fairness, rounds=rounds)


@dataclass(frozen=True)
class _Layout:
    n: int

    @property
    def y(self) -> int:
        return self.n

    @property
    def u(self) -> int:
        return 2 * self.n

    @property
    def leftover(self) -> int:
        return 3 * self.n

    @property
    def makespan(self) -> int:
        return 4 * self.n

    @property
    def x(self) -> int:
        return 4 * self.n + 1


def _build(inputs: MarketInputs, config: ShockwaveConfig, fairness: Fairness,
           exact: bool) -> tuple[highspy.HighsLp, _Layout]:
    n, h, g, t = inputs.jobs, inputs.rounds, inputs.gpus, inputs.round_s
    at = _Layout(n)
    rows = np.arange(n)
    pace = inputs.epoch_s / t
    epochs = inputs.epochs.astype(float)
    progress = inputs.progress.astype(float)
    slopes, intercepts = log_segments(config.log_approximation_bases)
    segments = len(slopes)

    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    row = 0

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        nonlocal row
        blocks.append((r + row, c, v, lo, hi))
        row += len(lo)

    inf = highspy.kHighsInf
    add(np.concatenate([rows, rows]), np.concatenate([at.y + rows, rows]), np.concatenate([epochs * pace, -np.ones(n)]),
        np.full(n, -inf), progress * pace)
    seg_rows = np.arange(n * segments)
    seg_jobs = np.repeat(rows, segments)
    add(np.concatenate([seg_rows, seg_rows]), np.concatenate([at.u + seg_jobs, at.y + seg_jobs]),
        np.concatenate([np.ones(n * segments), -np.tile(slopes, n)]), np.full(n * segments, -inf),
        np.tile(intercepts, n))
    add(np.concatenate([rows, rows]), np.concatenate([at.leftover + rows, at.y + rows]),
        np.concatenate([np.ones(n), epochs * pace]), inputs.remaining_s / t + progress * pace, np.full(n, inf))
    add(np.concatenate([rows, rows]), np.concatenate([np.full(n, at.makespan), at.leftover + rows]),
        np.concatenate([np.ones(n), -np.ones(n)]), np.zeros(n), np.full(n, inf))
    sizes = inputs.scale_factors.astype(float)
    if exact:
        x_cols = at.x + np.arange(n * h)
        add(np.concatenate([rows, np.repeat(rows, h)]), np.concatenate([rows, x_cols]),
            np.concatenate([np.ones(n), -np.ones(n * h)]), np.zeros(n), np.zeros(n))
        add(np.tile(np.arange(h), n), x_cols, np.repeat(sizes, h), np.full(h, -inf), np.full(h, float(g)))
    else:
        add(np.zeros(n, dtype=int), rows, sizes, np.array([-inf]), np.array([float(g * h)]))

    num_cols = at.x + (n * h if exact else 0)
    r_idx, c_idx, vals, lows, highs = (np.concatenate(parts) for parts in zip(*blocks, strict=True))
    matrix = sp.csc_matrix((vals, (r_idx, c_idx)), shape=(row, num_cols))

    cost = np.zeros(num_cols)
    cost[at.u : at.u + n] = fairness.weights / (n * h)
    cost[at.makespan] = -config.k * t
    lower = np.concatenate([np.zeros(n), progress / epochs, np.full(n, LOG_OF_ZERO), np.zeros(n), [0.0]])
    upper = np.concatenate([inputs.round_cap.astype(float), np.ones(n), np.zeros(n), fairness.leftover_ub, [inf]])
    integer = [highspy.HighsVarType.kInteger] * n + [highspy.HighsVarType.kContinuous] * (3 * n + 1)
    if exact:
        lower = np.concatenate([lower, np.zeros(n * h)])
        upper = np.concatenate([upper, np.ones(n * h)])
        integer += [highspy.HighsVarType.kInteger] * (n * h)

    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = num_cols, row
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lower, np.maximum(upper, lower)
    lp.row_lower_, lp.row_upper_ = lows, highs
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = num_cols, row
    lp.integrality_ = integer
    return lp, at


USABLE = (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit,
          highspy.HighsModelStatus.kInterrupt, highspy.HighsModelStatus.kSolutionLimit,
          highspy.HighsModelStatus.kIterationLimit)
FEASIBLE_POINT = 2  # HiGHS's primal_solution_status for "a feasible point is known"


def _run(lp: highspy.HighsLp, config: ShockwaveConfig, start: np.ndarray | None) -> tuple[np.ndarray, float] | None:
    solver = highspy.Highs()
    for option, value in (("output_flag", False), ("mip_rel_gap", config.solver_rel_gap),
                          ("time_limit", config.solver_timeout), ("random_seed", int(os.environ.get("SWSEED", "0"))),
                          ("threads", min(config.solver_num_threads, os.cpu_count() or 1))):
        solver.setOptionValue(option, value)
    solver.passModel(lp)
    if start is not None:
        solver.setSolution(len(start), np.arange(len(start), dtype=np.int32), start.astype(float))
    solver.run()
    status = solver.getModelStatus()
    if status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kUnboundedOrInfeasible):
        return None
    if status not in USABLE or solver.getInfo().primal_solution_status != FEASIBLE_POINT:
        raise SolverFailure(f"HiGHS returned {solver.modelStatusToString(status)} without a usable solution")
    return np.asarray(solver.getSolution().col_value), solver.getInfo().objective_function_value
