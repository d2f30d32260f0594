"""The market of one window on one GPU type, for many jobs: solved by greedy allocation instead of HiGHS.

Why: HiGHS's cost per window grew faster than the jobs (measured on 2 cores, 2,000 jobs on 512 GPUs: 0.2 s for the
first solve and 0.2-1.3 s for the second at 700-1,500 active jobs, most of a 3-5 minute run), while the program of
`market.py` on one type has a structure that a sort solves:

1. The makespan term M (whole rounds) fixes each job's fewest rounds, lo_j(M) = max(0, rem_j - M, the rounds its
   finish-time bound asks for).
2. For a fixed M the welfare sum_j a_j g_j(c_j) (a_j = w_j / (n H)) is separable and concave in each c_j, under one
   knapsack row sum_j sf_j c_j <= G H. Each extra round of job j is an item worth a_j (g_j(c+1) - g_j(c)) that
   costs sf_j GPU-rounds; concavity makes a job's items worth less and less, so taking items by value per GPU-round
   takes every job's rounds in order. Taken fractionally (the first item that does not fit in part), that is the
   LP relaxation's optimum for this M; taken whole, skipping items that no longer fit, it is within the value of
   that one item of the LP, hence of the integer optimum.
3. The LP value W(M) is concave in M (a parametric right-hand side), so W(M) - k T M is maximised by a binary search
   on its slope. The plan is the whole-item greedy at that M: it meets every row of the exact program, and its
   objective is at most one item's value below the exact optimum (`Greedy.relaxed` at that M bounds it).

The second solve (keep the makespan term and (1 - welfare_slack) of the welfare, finish short jobs first) has two
rows, capacity and welfare: it is solved by a Lagrangian greedy, items worth 1/cap_j^2 + mu a_j (g_j(c+1) - g_j(c))
per GPU-round, with the smallest multiplier mu (bisection, a fixed number of steps) whose plan keeps the welfare.

Nothing depends on the clock: the same inputs give the same plan, bit for bit, with a cost of O(n H log(n H)).

The policy also hands the greedy window rounds to give before the market (`critical_floor`): the longest jobs,
levelled against the cluster's projected end, and late jobs. The exact program has no such rows; they are what
brought the large clusters' makespan and worst rho within 1.15x and 1.5 (see `critical_floor` and `leveled`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.market import Fairness, MarketInputs, MarketSolution, progress_log, ranges
from shockwave.policies.shockwave.packing import first_fit

MULTIPLIER_RANGE = (-12.0, 12.0)
"""log10 of the second solve's smallest and largest welfare multiplier."""
MULTIPLIER_STEPS = 20
"""Bisection steps on log10 mu: the multiplier found is within a factor 10^(24 / 2^20) of the boundary."""


@dataclass(frozen=True)
class Greedy:
    """One window's items: every round c in [floor_j, cap_j) of every job j, items of a job consecutive and in
    round order."""

    rem: np.ndarray
    """Whole rounds each job needs to finish (the leftover row's right-hand side)."""
    floor: np.ndarray
    """Rounds each job must get whatever M is (its finish-time bound)."""
    sizes: np.ndarray
    budget: int
    """GPU-rounds in the window: G H."""
    job: np.ndarray
    at: np.ndarray
    """The round count c each item brings to c + 1."""
    gain: np.ndarray
    """Welfare of each item: a_j (g_j(c + 1) - g_j(c)) >= 0, non-increasing along a job's items."""
    values: np.ndarray
    """a_j g_j(c) for c = 0..H (n x H+1)."""
    makespan_cost: float
    """k T: the objective's price of one round of M."""
    min_makespan: int
    """The least whole M whose forced rounds fit the window."""

    @classmethod
    def of(
        cls, inputs: MarketInputs, config: ShockwaveConfig, fairness: Fairness, first: np.ndarray | None = None
    ) -> Greedy | None:
        """The items, or None when the finish-time bounds cannot all hold (the exact program is infeasible).
        `first`: rounds to give each job before the market (`critical_floor`), where they fit with the bounds'."""
        n, h = inputs.jobs, inputs.rounds
        rem, cap = inputs.remaining_rounds, inputs.round_cap
        sizes = inputs.scale_factors.astype(int)
        floor = np.maximum(0, np.ceil(rem - fairness.leftover_ub - 1e-9)).astype(int)
        budget = inputs.gpus * h
        if (floor > cap).any() or int(sizes @ floor) > budget:
            return None
        if first is not None and int(sizes @ np.maximum(floor, first)) <= budget:
            floor = np.maximum(floor, first)
        values = progress_log(inputs, config) * (fairness.weights / (n * h))[:, None]
        per_job = cap - floor
        job = np.repeat(np.arange(n), per_job)
        at = floor[job] + ranges(per_job)
        gain = np.maximum(values[job, at + 1] - values[job, at], 0.0)
        # M >= rem_j - cap_j (no job gets more than its cap), then forced GPU-rounds fall as M grows.
        low, high = max(0, int((rem - cap).max(initial=0))), max(0, int(rem.max(initial=0)))
        while low < high:
            mid = (low + high) // 2
            if int(sizes @ np.maximum(floor, rem - mid)) <= budget:
                high = mid
            else:
                low = mid + 1
        return cls(rem, floor, sizes, budget, job, at, gain, values, config.k * inputs.round_s, low)

    @property
    def jobs(self) -> int:
        return len(self.rem)

    @functools.cached_property
    def density(self) -> np.ndarray:
        """Welfare per GPU-round of each item."""
        return self.gain / self.sizes[self.job]

    @functools.cached_property
    def by_density(self) -> np.ndarray:
        """Items of positive welfare by decreasing welfare per GPU-round; ties in item order, so a job's rounds
        come in order."""
        items = np.flatnonzero(self.density > 0)
        return items[np.argsort(-self.density[items], kind="stable")]

    def lowest(self, makespan: int) -> np.ndarray:
        """lo_j(M): the rounds each job must get for its leftover to be at most M."""
        return np.maximum(self.floor, self.rem - makespan)

    def _free(self, order: np.ndarray, makespan: int) -> tuple[np.ndarray, np.ndarray, int, float]:
        """lo_j(M), the items of `order` above it, the GPU-rounds left for them, and the welfare of lo."""
        lowest = self.lowest(makespan)
        index = order[self.at[order] >= lowest[self.job[order]]]
        budget = self.budget - int(self.sizes @ lowest)
        return lowest, index, budget, float(self.values[np.arange(self.jobs), lowest].sum())

    def take(self, order: np.ndarray, makespan: int) -> tuple[np.ndarray, float]:
        """Counts c_j: lo_j(M), then the items of `order` above it, skipping what no longer fits; and their
        welfare."""
        lowest, index, budget, base = self._free(order, makespan)
        chosen = index[first_fit(self.sizes[self.job[index]], budget)]
        counts = lowest + np.bincount(self.job[chosen], minlength=self.jobs)
        return counts, base + float(self.gain[chosen].sum())

    def relaxed(self, makespan: int) -> float:
        """The LP relaxation's objective W(M) - k T M at a whole M: items by density, the longest prefix that
        fits, then the part of the next item that fits."""
        _, index, budget, welfare = self._free(self.by_density, makespan)
        sizes = self.sizes[self.job[index]]
        used = np.cumsum(sizes)
        fit = int(np.searchsorted(used, budget, side="right"))
        welfare += float(self.gain[index[:fit]].sum())
        if fit < len(index):
            welfare += float(self.gain[index[fit]]) * (budget - (int(used[fit - 1]) if fit else 0)) / sizes[fit]
        return welfare - self.makespan_cost * makespan

    def best_makespan(self) -> int:
        """The whole M maximising the LP's W(M) - k T M: W is concave in M, so the first M where one more round
        of M gains less welfare than it costs (binary search on that slope)."""
        low, high = self.min_makespan, max(self.min_makespan, int(self.rem.max(initial=0)))
        while low < high:
            mid = (low + high) // 2
            if self.relaxed(mid + 1) > self.relaxed(mid):
                low = mid + 1
            else:
                high = mid
        return low

    def objective(self, counts: np.ndarray) -> tuple[float, int]:
        """The exact program's objective of whole counts, and their makespan term M."""
        makespan = max(0, int((self.rem - counts).max(initial=0)))
        welfare = float(self.values[np.arange(self.jobs), counts].sum())
        return welfare - self.makespan_cost * makespan, makespan


def critical_floor(
    inputs: MarketInputs, late: np.ndarray, urgency: np.ndarray, makespan_share: float, late_share: float
) -> np.ndarray:
    """Rounds given before the market: `leveled` raises the longest jobs within `makespan_share` of the window's
    GPU-rounds; then late jobs (they miss their fair finish time even running alone from now on) get every round
    they can use, most urgent first, within `late_share` more.

    Why late jobs: a round's welfare is steepest for jobs that have barely started (the log's first segment runs
    from log 1e-6), so under overload a job behind its target but past its first fifth got no round for hours even
    with priority rho^lambda (2,000 jobs on 512 GPUs: a job 1.5x behind waited 3 hours; worst rho 1.58)."""
    sizes, cap, h = inputs.scale_factors.astype(int), inputs.round_cap, inputs.rounds
    window = inputs.gpus * h
    floor = leveled(inputs.remaining_rounds, cap, sizes, inputs.gpus, h, makespan_share * window)
    return late_floor(floor, cap, sizes, late, urgency, int(late_share * window))


def late_floor(
    floor: np.ndarray,
    cap: np.ndarray,
    sizes: np.ndarray,
    late: np.ndarray,
    urgency: np.ndarray,
    budget: int,
    *,
    in_part: bool = False,
    in_full: int = 0,
) -> np.ndarray:
    """`floor` raised to every round a late job can use (`cap`), most urgent first, within `budget` more
    GPU-rounds; `in_part`: a job whose rounds do not all fit gets those that do (else it gets none, and later
    jobs may take the budget); `in_full`: the budget holds at least the `in_full` most urgent late jobs' rounds."""
    floor = floor.copy()
    behind = np.flatnonzero(late & (floor < cap))
    behind = behind[np.argsort(-urgency[behind], kind="stable")]
    first = behind[:in_full]
    budget = max(budget, int(sizes[first] @ (cap[first] - floor[first])))
    if not in_part:
        chosen = behind[first_fit(sizes[behind] * (cap[behind] - floor[behind]), budget)]
        floor[chosen] = cap[chosen]
        return floor
    for j in behind:
        given = min(int(cap[j] - floor[j]), budget // int(sizes[j]))
        floor[j] += given
        budget -= given * int(sizes[j])
    return floor


def leveled(rem: np.ndarray, cap: np.ndarray, sizes: np.ndarray, gpus: int, rounds: int, allowed: float) -> np.ndarray:
    """Rounds for each job so that its leftover after the window is at most a common level: the cluster's
    projected remaining rounds (sum_j sf_j rem_j / G, everything now known at full use) minus the window, or the
    lowest level whose floors take at most `allowed` GPU-rounds.

    Why: the makespan term only sees the longest job, so the jobs just behind it got their rounds by welfare,
    which favours short jobs; at 2,000 jobs on 512 GPUs the long ones all ended in a tail of 2 hours with the
    cluster half idle (makespan 1.21x its lower bound). A job whose remaining runtime reaches the cluster's
    projected remaining time is on the critical path: it now runs (longest-processing-time first, as a fluid
    schedule would), and `allowed` keeps the rest of the window for the fairness market."""
    projected = float(sizes @ rem) / gpus
    return lowest_level(rem, cap, sizes, max(0, math.ceil(projected - rounds)), allowed)


def lowest_level(work: np.ndarray, cap: np.ndarray, sizes: np.ndarray, start: float, allowed: float) -> np.ndarray:
    """clip(work - level, 0, cap) at the lowest level start + k (k = 0, 1, ...) at which its GPU-rounds (sizes @ it)
    are at most `allowed`, found by bisection (every job is at 0 once the level passes the most work)."""

    def floor_at(steps: int) -> np.ndarray:
        return np.clip(work - (start + steps), 0, cap)

    low, high = 0, max(0, math.ceil(float(work.max(initial=start)) - start))
    while low < high:
        mid = (low + high) // 2
        if sizes @ floor_at(mid) <= allowed:
            high = mid
        else:
            low = mid + 1
    return floor_at(low)


def solve_greedy(
    inputs: MarketInputs, config: ShockwaveConfig, fairness: Fairness, first: np.ndarray | None = None
) -> MarketSolution | None:
    """The window's plan on one GPU type without HiGHS (see the module docstring), or None when the finish-time
    bounds cannot all hold. `first`: rounds given before the market (None: the exact program's plan, within one
    item)."""
    greedy = Greedy.of(inputs, config, fairness, first)
    if greedy is None:
        return None
    counts, welfare = greedy.take(greedy.by_density, greedy.best_makespan())
    objective, makespan = greedy.objective(counts)
    counts = prefer_completion(greedy, counts, welfare, makespan, config, inputs.round_cap)
    return MarketSolution(counts[:, None], objective, fairness)


def prefer_completion(
    greedy: Greedy, counts: np.ndarray, welfare: float, makespan: int, config: ShockwaveConfig, cap: np.ndarray
) -> np.ndarray:
    """Among plans keeping M and (1 - welfare_slack) of the welfare, one giving rounds to jobs closest to finishing:
    the smallest multiplier mu whose greedy plan keeps the welfare (a large mu orders items as the first plan)."""
    target = welfare - config.welfare_slack * abs(welfare) - 1e-12
    limit = math.floor(makespan * (1 + config.solver_rel_gap) + 1e-9)
    free = np.flatnonzero(greedy.at >= greedy.lowest(limit)[greedy.job])
    completion = 1.0 / cap[greedy.job[free]].astype(float) ** 2
    gain = greedy.gain[free]
    per_gpu = greedy.sizes[greedy.job[free]]

    def plan(log_mu: float | None) -> tuple[np.ndarray, float]:
        density = (completion + (0.0 if log_mu is None else 10.0**log_mu) * gain) / per_gpu
        return greedy.take(free[np.argsort(-density, kind="stable")], limit)

    best = plan(None)
    if best[1] >= target:
        return best[0]
    low, high = MULTIPLIER_RANGE
    best = plan(high)
    if best[1] < target:
        return counts
    for _ in range(MULTIPLIER_STEPS):
        mid = (low + high) / 2
        candidate = plan(mid)
        if candidate[1] >= target:
            high, best = mid, candidate
        else:
            low = mid
    return best[0]
