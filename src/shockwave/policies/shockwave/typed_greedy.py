"""The market of one window on several GPU types, for many jobs: each job placed on one type for the window by its
comparative advantage, then one greedy market per type (`greedy.py`).

Why: on several types `market.py` solves the window's LP relaxation with HiGHS. At 2,000 jobs on
`v100:256,p100:128,k80:128` that is about 8,000 columns by 16,000 rows at the peak and 0.4-1.0 s per solve, 7x the
CPU time of the same jobs on one type, where `greedy.py` sorts. Splitting the window by type gives each type that
sort:

1. Types. A round on type t does v_jt equal-share rounds of job j's work (`MarketInputs.speeds`) and takes sf_j of
   t's GPUs. Each job's demand on t is the GPU-rounds it can use there in the window, sf_j x cap_jt. Every type is
   given a budget, its G_t H GPU-rounds times the cluster's load (total demand at each job's best type over total
   capacity, at least 1). (Job, type) pairs are taken critical jobs first (remaining work reaching the cluster's
   projected end less the window: the makespan), then late jobs, then by comparative advantage, v_jt over the job's
   mean speed (ties: shorter remaining work, which measured a shorter average JCT than longer first at the same
   makespan, then job order), each job on the first type whose budget still holds its demand.
   Under light load every job gets its fastest type; under load the jobs that gain most from a fast type get it,
   and jobs indifferent between types fill what is left. A job that fits no budget goes where it runs fastest
   among the types with the most budget left.
2. One market per type: the jobs placed on t, their forecasts in seconds of t (remaining and epoch seconds over
   v_jt) and their finish-time bounds in rounds of t, solved by `solve_greedy` with its critical floor.

The exact program lets a job run on several types in one window; here it keeps one per window (it may change at
the next solve). Nothing depends on the clock: the same inputs give the same plan, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.greedy import Greedy, critical_floor, prefer_completion
from shockwave.policies.shockwave.market import Fairness, MarketInputs, MarketSolution


def place_types(inputs: MarketInputs, late: np.ndarray) -> np.ndarray:
    """Each job's type for the window (an index into the cluster's types; see the module docstring)."""
    speed, cap = inputs.speed, inputs.type_cap
    sizes = inputs.scale_factors.astype(float)
    runs = cap > 0
    demand = sizes[:, None] * cap
    fastest = np.argmax(np.where(runs, speed, -np.inf), axis=1)
    capacity = np.array(inputs.capacities, dtype=float) * inputs.rounds
    load = max(1.0, float(demand[np.arange(inputs.jobs), fastest].sum()) / float(capacity.sum()))
    budget = capacity * load
    mean = np.where(runs, speed, 0.0).sum(axis=1) / runs.sum(axis=1)  # over the types each job can run on
    advantage = np.where(runs, speed / mean[:, None], -np.inf)
    n, types = speed.shape
    jobs, kinds = np.divmod(np.arange(n * types), types)
    critical = inputs.critical
    order = np.lexsort((kinds, jobs, inputs.remaining_s[jobs], -advantage.ravel(), ~late[jobs], ~critical[jobs]))
    placed = np.full(n, -1)
    for index in order:
        j, t = int(jobs[index]), int(kinds[index])
        if placed[j] < 0 and runs[j, t] and demand[j, t] <= budget[t]:
            placed[j] = t
            budget[t] -= demand[j, t]
    for j in np.flatnonzero(placed < 0):
        choices = np.flatnonzero(runs[j])
        most = choices[budget[choices] / capacity[choices] >= (budget[choices] / capacity[choices]).max()]
        placed[j] = most[np.argmax(speed[j, most])]
        budget[placed[j]] -= demand[j, placed[j]]
    return placed


def on_type(inputs: MarketInputs, jobs: np.ndarray, t: int) -> MarketInputs:
    """The window of `jobs` alone on type t, in that type's time: one GPU type of G_t GPUs."""
    v = inputs.speed[jobs, t]
    return MarketInputs(
        scale_factors=inputs.scale_factors[jobs],
        epochs=inputs.epochs[jobs],
        progress=inputs.progress[jobs],
        remaining_s=inputs.remaining_s[jobs] / v,
        epoch_s=inputs.epoch_s[jobs] / v,
        gpus=inputs.capacities[t],
        rounds=inputs.rounds,
        round_s=inputs.round_s,
    )


@dataclass(frozen=True)
class OnType(Greedy):
    """One type's items, with the makespan term read in equal-share rounds, as the exact program reads it: job j
    is left rem_j - v_jt c rounds of work after c rounds of t, so one M holds across the types. Only what reads
    M through `lowest` applies (`take`, `relaxed`, `fits`, `welfare`); `best_makespan` and `objective` count M in
    the type's own rounds and are not used."""

    work: np.ndarray
    """rem_j: whole equal-share rounds each job needs."""
    speed: np.ndarray
    """v_jt of each job on this type."""
    cap: np.ndarray
    """Rounds each job can use on this type."""

    def lowest(self, makespan: int) -> np.ndarray:
        """Rounds of this type each job needs for its equal-share leftover to be at most M (whole rounds: the
        ceiling over v_jt); may exceed the job's cap where M is too small, which `fits` refuses."""
        needed = np.ceil((self.work - makespan) / self.speed - 1e-9).astype(int)
        return np.maximum(self.floor, needed)

    def fits(self, makespan: int) -> bool:
        """Whether the rounds M forces fit the type's window."""
        lowest = self.lowest(makespan)
        return bool((lowest <= self.cap).all()) and int(self.sizes @ lowest) <= self.budget

    def welfare(self, makespan: int) -> float:
        """The LP relaxation's welfare at M (without the makespan term, which is the cluster's)."""
        return self.relaxed(makespan) + self.makespan_cost * makespan


def solve_typed_greedy(
    inputs: MarketInputs,
    config: ShockwaveConfig,
    fairness: Fairness,
    late: np.ndarray,
    urgency: np.ndarray,
) -> MarketSolution | None:
    """The window's plan on several GPU types without HiGHS, or None when some type cannot meet the finish-time
    bounds of the jobs placed on it (placing ignores those bounds, so this can happen where the exact program is
    feasible; the policy then relaxes them for the window). `late` and `urgency` choose the critical rounds given
    before each market; one makespan term M for all types (`_best_makespan`)."""
    placed = place_types(inputs, late)
    markets: list[tuple[np.ndarray, int, OnType]] = []
    for t in range(len(inputs.capacities)):
        jobs = np.flatnonzero(placed == t)
        if not len(jobs):
            continue
        sub = on_type(inputs, jobs, t)
        bound = Fairness(fairness.leftover_ub[jobs] / inputs.speed[jobs, t], fairness.weights[jobs])
        first = critical_floor(sub, late[jobs], urgency[jobs], config.makespan_share, config.late_share)
        greedy = Greedy.of(sub, config, bound, first)
        if greedy is None:
            return None
        items = {f.name: getattr(greedy, f.name) for f in fields(Greedy)}
        work, speed = inputs.remaining_rounds[jobs], inputs.speed[jobs, t]
        markets.append((jobs, t, OnType(**items, work=work, speed=speed, cap=sub.round_cap)))
    makespan = _best_makespan([market for _, _, market in markets], inputs)
    if makespan is None:
        return None
    by_type = np.zeros((inputs.jobs, len(inputs.capacities)), dtype=int)
    objective = -markets[0][2].makespan_cost * makespan
    for jobs, t, market in markets:
        counts, welfare = market.take(market.by_density, makespan)
        objective += welfare
        by_type[jobs, t] = prefer_completion(market, counts, welfare, makespan, config, market.cap)
    return MarketSolution(by_type, objective, fairness)


def _best_makespan(markets: list[OnType], inputs: MarketInputs) -> int | None:
    """The least M every type's forced rounds fit (None: none does), then the first M from there where one more
    round of M gains less welfare than it costs. On one type that is the best M (W is concave in M); here the
    forced rounds ceil((rem_j - M) / v_jt) step unevenly, so it is a local optimum: measured on random windows it
    is the best M at the reference configurations' k (1e-3 and above), and up to 4.5% of the objective off at
    k = 1e-4."""
    longest = max(0, int(inputs.remaining_rounds.max(initial=0)))
    low, high = 0, longest
    if not all(market.fits(high) for market in markets):
        return None
    while low < high:
        mid = (low + high) // 2
        if all(market.fits(mid) for market in markets):
            high = mid
        else:
            low = mid + 1
    cost = markets[0].makespan_cost

    def total(makespan: int) -> float:
        return sum(market.welfare(makespan) for market in markets) - cost * makespan

    high = max(low, longest)
    while low < high:
        mid = (low + high) // 2
        if total(mid + 1) > total(mid):
            low = mid + 1
        else:
            high = mid
    return low
