"""The partial-allocation (PA) auction Themis runs for the free GPUs (Cole, Gkatzelis and Goel's mechanism).

Goods and bids. A job trains on its whole gang of `scale_factor` GPUs of one type or not at all, so a bundle worth
anything to bidder i is exactly one gang on one type t; more GPUs add nothing (free disposal) and a bundle spanning
types cannot run. Each bid is therefore a log-valuation w_it = log v_i(t) > 0 per type it would use (v_i(none) = 1,
see `rho.py`), and an allocation x gives each bidder at most one type with sum_i gang_i x_it <= free_t.

Allocation. x* maximises the Nash social welfare prod_i v_i(x_i), i.e. sum_i w_i(x_i): a multiple-choice knapsack
with one knapsack per GPU type, solved exactly, by dynamic programming over the vector of GPUs left per type (each
type's capacity capped at the gangs that could use it). Bidders are added in the order given (highest rho first) and
a tie leaves a bidder out, so the result is the same on any machine. The welfare of the others without winner i,
for every i at once, comes from the same tables by divide and conquer (each bidder is added to a table log2(n)
times, not n times). The dynamic program costs states x n log2(n) x types; when that exceeds `DP_BUDGET` (large
multi-type clusters with many bidders) the auction is a 0-1 program solved by HiGHS instead (scipy.optimize.milp,
relative gap 1e-9, single-threaded, deterministic), once for x* and once per winner. One auction uses one method.
Measured on this project's 2-core machine, an auction with its payments takes 0.03 s with 300 bidders on 128 GPUs
of one type, 0.08 s with 200 bidders on v100:8,p100:8,k80:8, 0.4 s with 60 and 1 s with 200 on 36:36:36; the MILP
path (more states or bidders than that) takes about 0.1 s per solve, so its cost grows with the number of winners.

Payment. Winner i keeps only the fraction
    c_i = prod_{j != i} v_j(x*_j) / prod_{j != i} v_j(x*^{-i}_j)
of its bundle, x*^{-i} the welfare-maximising allocation of the same goods among the others. x* without i is
feasible for the others, so c_i <= 1; what is withheld is the externality i imposes on them, the hidden payment
that makes the mechanism truthful. Bundles are gangs, so the fraction is of time: the policy runs the winner on its
gang for round(c_i x lease) of the lease's rounds and gives the gang to others for the rest. (PA is truthful for
divisible goods; time in whole rounds makes it so only up to that rounding.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

DP_BUDGET = 300_000_000
"""Largest dynamic program (capacity states x bidders x log2(bidders) x types) solved exactly by it; above, HiGHS."""
MIP_GAP = 1e-9


@dataclass(frozen=True)
class Bid:
    job_id: int
    gang: int
    values: Mapping[str, float]
    """log v(t) > 0 of one gang of type t for the lease, for each type the bidder would take."""


@dataclass(frozen=True)
class Outcome:
    won: dict[int, str]
    """Winner -> the GPU type of its gang."""
    fractions: dict[int, float]
    """Winner -> c_i, the fraction of its bundle it keeps (in (0, 1])."""
    welfare: float
    """sum_i log v_i(x*_i): the log of the Nash social welfare."""
    method: str
    """"dp" or "milp"."""


def welfare_of(bids: Sequence[Bid], won: Mapping[int, str]) -> float:
    return sum(bid.values[won[bid.job_id]] for bid in bids if bid.job_id in won)


def method_for(bids: Sequence[Bid], free: Mapping[str, int]) -> str:
    caps = _capacities(bids, free)
    states = math.prod(c + 1 for c in caps.values())
    n = max(len(bids), 2)
    return "dp" if states * n * math.log2(n) * max(len(caps), 1) <= DP_BUDGET else "milp"


def max_nash_welfare(bids: Sequence[Bid], free: Mapping[str, int], method: str | None = None) -> dict[int, str]:
    """x*: each winner's GPU type, maximising sum of log-valuations under the per-type capacities `free`."""
    method = method or method_for(bids, free)
    return _Knapsack(bids, free).best() if method == "dp" else _by_milp(bids, free)


def partial_allocation(bids: Sequence[Bid], free: Mapping[str, int]) -> Outcome:
    """x* and each winner's PA fraction c_i."""
    method = method_for(bids, free)
    if method == "dp":
        knapsack = _Knapsack(bids, free)
        won = knapsack.best()
        without = knapsack.best_values_without_each()
    else:
        won = _by_milp(bids, free)
        without = [_without_by_milp(bids, i, free) if bid.job_id in won else 0.0 for i, bid in enumerate(bids)]
    total = welfare_of(bids, won)
    fractions = {
        bid.job_id: min(1.0, math.exp(min(total - bid.values[won[bid.job_id]] - without[i], 0.0)))
        for i, bid in enumerate(bids)
        if bid.job_id in won
    }
    return Outcome(won, fractions, total, method)


def _capacities(bids: Sequence[Bid], free: Mapping[str, int]) -> dict[str, int]:
    """Each type's free GPUs, capped at the gangs that could use them (no state beyond what the bids can fill)."""
    return {
        t: min(gpus, sum(b.gang for b in bids if b.values.get(t, 0.0) > 0 and b.gang <= gpus))
        for t, gpus in free.items()
    }


class _Knapsack:
    """The multiple-choice knapsack over the vector of GPUs left per type, by dynamic programming: V[c] is the best
    welfare of the bidders added so far within capacities c (one array axis per type)."""

    def __init__(self, bids: Sequence[Bid], free: Mapping[str, int]) -> None:
        caps = {t: c for t, c in _capacities(bids, free).items() if c > 0}
        self.bids, self.types = bids, list(caps)
        self.shape = tuple(caps[t] + 1 for t in self.types)
        self.options = [
            [
                (axis, bid.gang, w)
                for axis, t in enumerate(self.types)
                if (w := bid.values.get(t, 0.0)) > 0 and bid.gang <= caps[t]
            ]
            for bid in bids
        ]
        """Each bidder's (type axis, gang, log-valuation) choices."""

    def _slices(self, axis: int, gang: int) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """(states with at least `gang` GPUs of the axis's type, the states those leave)."""
        target = [slice(None)] * len(self.shape)
        source = [slice(None)] * len(self.shape)
        target[axis], source[axis] = slice(gang, None), slice(0, self.shape[axis] - gang)
        return tuple(target), tuple(source)

    def _add(self, value: np.ndarray, item: int) -> np.ndarray:
        new = value.copy()
        for axis, gang, w in self.options[item]:
            target, source = self._slices(axis, gang)
            np.maximum(new[target], value[source] + w, out=new[target])
        return new

    def best(self) -> dict[int, str]:
        """x*, items in the given order; a tie leaves the bidder out (strict improvement needed to take it)."""
        value = np.zeros(self.shape)
        choices: list[np.ndarray] = []
        for item in range(len(self.bids)):
            best, choice = value.copy(), np.full(self.shape, -1, dtype=np.int16)
            for k, (axis, gang, w) in enumerate(self.options[item]):
                target, source = self._slices(axis, gang)
                candidate = value[source] + w
                better = candidate > best[target]
                best[target] = np.where(better, candidate, best[target])
                choice[target] = np.where(better, k, choice[target])
            value = best
            choices.append(choice)
        left = [s - 1 for s in self.shape]
        won: dict[int, str] = {}
        for item in reversed(range(len(self.bids))):
            k = int(choices[item][tuple(left)])
            if k >= 0:
                axis, gang, _ = self.options[item][k]
                won[self.bids[item].job_id] = self.types[axis]
                left[axis] -= gang
        return won

    def best_values_without_each(self) -> list[float]:
        """max welfare of all bidders but i, for every i: divide and conquer, so each bidder is added to a table
        log2(n) times instead of n times (the tables of the halves are shared)."""
        out = [0.0] * len(self.bids)
        full = tuple(s - 1 for s in self.shape)

        def solve(lo: int, hi: int, value: np.ndarray) -> None:
            if hi - lo == 1:
                out[lo] = float(value[full])
                return
            mid = (lo + hi) // 2
            left = value
            for item in range(mid, hi):
                left = self._add(left, item)
            solve(lo, mid, left)
            right = value
            for item in range(lo, mid):
                right = self._add(right, item)
            solve(mid, hi, right)

        if self.bids:
            solve(0, len(self.bids), np.zeros(self.shape))
        return out


def _without_by_milp(bids: Sequence[Bid], i: int, free: Mapping[str, int]) -> float:
    others = [*bids[:i], *bids[i + 1 :]]
    return welfare_of(others, _by_milp(others, free))


def _by_milp(bids: Sequence[Bid], free: Mapping[str, int]) -> dict[int, str]:
    """The same program as a 0-1 MILP: max sum w_it x_it, sum_t x_it <= 1, sum_i gang_i x_it <= free_t."""
    columns = [(i, t, w) for i, bid in enumerate(bids) for t, w in bid.values.items() if w > 0 and t in free]
    if not columns:
        return {}
    types = list(free)
    n, m = len(columns), len(bids) + len(types)
    a = np.zeros((m, n))
    for col, (i, t, _) in enumerate(columns):
        a[i, col] = 1.0
        a[len(bids) + types.index(t), col] = bids[i].gang
    upper = np.array([1.0] * len(bids) + [float(free[t]) for t in types])
    result = milp(
        c=-np.array([w for _, _, w in columns]),
        constraints=LinearConstraint(a, -np.inf, upper),
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": MIP_GAP, "disp": False},
    )
    if result.x is None:  # HiGHS gave nothing (it should not): take bidders greedily by value per GPU
        return _greedy(bids, free)
    return {bids[i].job_id: t for (i, t, _), x in zip(columns, result.x, strict=True) if x > 0.5}


def _greedy(bids: Sequence[Bid], free: Mapping[str, int]) -> dict[int, str]:
    left = dict(free)
    won: dict[int, str] = {}
    ranked = sorted(
        ((w / bid.gang, bid.job_id, t, bid.gang) for bid in bids for t, w in bid.values.items() if t in left),
        key=lambda entry: (-entry[0], entry[1], entry[2]),
    )
    for _, job_id, t, gang in ranked:
        if job_id not in won and left[t] >= gang:
            won[job_id] = t
            left[t] -= gang
    return won
