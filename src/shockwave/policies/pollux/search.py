"""Pollux's allocation objective and a deterministic search for it (Qiao et al., OSDI'21, §4.2).

Each job j has a speedup s_j(r) on r GPUs (its goodput there over its goodput at a fair share of the cluster);
Pollux maximises the power mean [(1/J) sum_j (s_j(r_j) / g + 1e-3)^p]^(1/p) with g GPUs per node (so one node's
worth of fair share counts 1) and p < 0 favouring the worst-off jobs. A job whose allocation changes is discounted
by its restart factor. Pollux searches with a genetic algorithm seeded with the current allocation; here a greedy
search repeatedly gives the job whose objective term improves most per extra GPU its better GPU count, once from
nothing and once from the current allocation, and keeps the better: deterministic, and never below keeping every
job as it is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

EPSILON = 1e-3


@dataclass(frozen=True)
class Candidate:
    """A job's scaled speedup (speedup over GPUs per node) at each GPU count 0..len - 1, restart discount
    included; `current` its GPUs now; `levels` the counts it may take (None: any; a rigid job: none or its gang)."""

    speedups: tuple[float, ...]
    current: int
    levels: tuple[int, ...] | None = None

    def above(self, gpus: int, free: int) -> Iterable[int]:
        """The counts above `gpus` it may grow to with `free` more GPUs."""
        top = min(len(self.speedups) - 1, gpus + free)
        if self.levels is None:
            return range(gpus + 1, top + 1)
        return (g for g in self.levels if gpus < g <= top)


def term(speedup: float, p: float) -> float:
    """A job's share of the objective, oriented so that larger is better."""
    if p == 0:
        return math.log(max(speedup, EPSILON))
    value = (speedup + EPSILON) ** p
    return -value if p < 0 else value


def objective(candidates: Sequence[Candidate], gpus: Sequence[int], p: float) -> float:
    """The power mean of the scaled speedups (the geometric mean for p = 0)."""
    n = len(candidates)
    if not n:
        return 0.0
    if p == 0:
        return math.exp(math.fsum(term(c.speedups[g], 0) for c, g in zip(candidates, gpus, strict=True)) / n)
    total = math.fsum((c.speedups[g] + EPSILON) ** p for c, g in zip(candidates, gpus, strict=True))
    return (total / n) ** (1 / p)


def search(candidates: Sequence[Candidate], capacity: int, p: float) -> list[int]:
    """GPUs per job, at most `capacity` in all: the better of greedy growth from nothing and from the current
    allocation (so never worse than keeping every job as it is and sharing what is free)."""
    fresh = grow(candidates, [0] * len(candidates), capacity, p)
    kept = [c.current for c in candidates]
    if sum(kept) > capacity:
        return fresh
    kept = grow(candidates, kept, capacity - sum(kept), p)
    return kept if objective(candidates, kept, p) > objective(candidates, fresh, p) else fresh


def grow(candidates: Sequence[Candidate], gpus: list[int], free: int, p: float) -> list[int]:
    """Give the job whose term gains most per extra GPU the GPU count that gains it, while any gains and fits."""
    gpus = list(gpus)
    while True:
        best: tuple[float, int, int] | None = None
        for j, c in enumerate(candidates):
            here = term(c.speedups[gpus[j]], p)
            for g in c.above(gpus[j], free):
                gain = (term(c.speedups[g], p) - here) / (g - gpus[j])
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, j, g)
        if best is None:
            return gpus
        _, j, g = best
        free -= g - gpus[j]
        gpus[j] = g
