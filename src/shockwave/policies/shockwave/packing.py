"""Lay the market's per-job round counts out as the window's rounds (spec §4.5 re-ordering, §4.6 fill).

The market only says how many of the next H rounds each job gets; which rounds is free, and it matters: the plan
is re-solved often, so mostly its first rounds run, and a job that did not run in the previous round pays a restart.
Each round is filled, while gangs fit, in this order:
1. jobs that need every remaining round of the window to get their count;
2. late jobs (they miss their fair finish time even running alone from now on), most urgent first;
3. jobs that ran in the round before (a lease extension: no restart cost, spec §8);
4. the rest by urgency over rounds granted, the reference's re-ordering objective (sum_j pi_j x mean round index
   of j is smallest when a job's rounds come earlier the larger pi_j / c_j is).
If a gang no longer fits, `pack` retries with the least-loaded layout (largest gangs first, each into its c_j
emptiest rounds) and orders those rounds by weight. None means neither found room; the caller then solves the
exact per-round program. Finally `fill` keeps GPUs busy: idle GPUs of each round go to other jobs, longest
predicted remaining runtime first, as in the reference.
"""

from __future__ import annotations

import numpy as np


def pack(
    counts: np.ndarray,
    sizes: np.ndarray,
    gpus: int,
    rounds: int,
    urgency: np.ndarray,
    late: np.ndarray,
    running: set[int],
) -> list[list[int]] | None:
    weight = _copy_weight(counts, urgency)
    by_weight = [int(j) for j in np.lexsort((np.arange(len(counts)), -weight)) if counts[j] > 0]
    by_rounds = _by_rounds(counts, sizes, gpus, rounds, by_weight, late, running)
    if by_rounds is not None:
        return by_rounds
    least_loaded = _least_loaded(counts, sizes, gpus, rounds, by_weight)
    return arrange(least_loaded, counts, urgency) if least_loaded is not None else None


def arrange(layout: list[list[int]], counts: np.ndarray, urgency: np.ndarray) -> list[list[int]]:
    """Order whole rounds so the ones holding the most urgent jobs come first."""
    weight = _copy_weight(counts, urgency)
    value = np.exp(weight - weight.max()) if len(weight) else weight
    return sorted(layout, key=lambda jobs: -float(value[jobs].sum()))


def _copy_weight(counts: np.ndarray, urgency: np.ndarray) -> np.ndarray:
    """log of (urgency / rounds granted): the weight of one of a job's rounds."""
    return urgency - np.log(np.maximum(counts, 1))


def _by_rounds(
    counts: np.ndarray,
    sizes: np.ndarray,
    gpus: int,
    rounds: int,
    by_weight: list[int],
    late: np.ndarray,
    running: set[int],
) -> list[list[int]] | None:
    left = counts.astype(int).copy()
    layout: list[list[int]] = []
    before = running
    for h in range(rounds):
        remaining_rounds = rounds - h
        if (left > remaining_rounds).any():
            return None
        must = [j for j in by_weight if left[j] == remaining_rounds]
        free = gpus - int(sizes[must].sum())
        if free < 0:
            return None
        chosen = list(must)
        for j in sorted(by_weight, key=lambda j: (not late[j], j not in before)):
            if 0 < left[j] < remaining_rounds and sizes[j] <= free:
                chosen.append(j)
                free -= int(sizes[j])
        left[chosen] -= 1
        layout.append(chosen)
        before = set(chosen)
    return layout


def _least_loaded(
    counts: np.ndarray, sizes: np.ndarray, gpus: int, rounds: int, by_weight: list[int]
) -> list[list[int]] | None:
    load = np.zeros(rounds, dtype=int)
    layout: list[list[int]] = [[] for _ in range(rounds)]
    for j in sorted(by_weight, key=lambda j: -sizes[j]):  # stable: equal gangs keep their weight order
        picked = np.lexsort((np.arange(rounds), load))[: counts[j]]
        if (load[picked] + sizes[j] > gpus).any():
            return None
        load[picked] += sizes[j]
        for h in picked:
            layout[h].append(j)
    return layout


def fill(layout: list[list[int]], sizes: np.ndarray, gpus: int, remaining_s: np.ndarray) -> list[list[int]]:
    longest_first = np.lexsort((np.arange(len(remaining_s)), -remaining_s))
    filled = []
    for jobs in layout:
        free = gpus - int(sizes[jobs].sum())
        extra = []
        present = set(jobs)
        for j in longest_first:
            if free <= 0:
                break
            if j not in present and sizes[j] <= free:
                extra.append(int(j))
                free -= int(sizes[j])
        filled.append(jobs + extra)
    return filled
