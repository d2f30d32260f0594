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
    weighted = np.array(by_weight, dtype=int)
    before = np.zeros(len(counts), dtype=bool)
    before[list(running)] = True
    for h in range(rounds):
        remaining_rounds = rounds - h
        if (left > remaining_rounds).any():
            return None
        must = weighted[left[weighted] == remaining_rounds]
        free = gpus - int(sizes[must].sum())
        if free < 0:
            return None
        # Late jobs first, then those that ran the round before, each group in weight order (a stable sort).
        order = weighted[np.argsort(2 * ~late[weighted] + ~before[weighted], kind="stable")]
        order = order[(left[order] > 0) & (left[order] < remaining_rounds)]
        chosen = np.concatenate([must, order[first_fit(sizes[order], free)]])
        left[chosen] -= 1
        layout.append(chosen.tolist())
        before[:] = False
        before[chosen] = True
    return layout


def first_fit(sizes: np.ndarray, budget: int) -> np.ndarray:
    """Positions a pass over items of these sizes picks when it takes every item that still fits in `budget`.
    Vectorised: take the longest prefix that fits, skip the next item (it does not fit, nor will it later) and
    drop every later item larger than what is left; repeat. Each repeat drops a size, so few repeats."""
    positions = np.arange(len(sizes))
    picked: list[np.ndarray] = []
    while len(positions) and budget > 0:
        used = np.cumsum(sizes[positions])
        fit = int(np.searchsorted(used, budget, side="right"))
        picked.append(positions[:fit])
        if fit == len(positions):
            break
        budget -= int(used[fit - 1]) if fit else 0
        rest = positions[fit + 1 :]
        positions = rest[sizes[rest] <= budget]
    return np.concatenate(picked) if picked else positions[:0]


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


Placed = tuple[int, int]
"""A job row and the index of the GPU type it runs on."""


def pack_types(
    by_type: np.ndarray,
    sizes: np.ndarray,
    capacities: tuple[int, ...],
    rounds: int,
    urgency: np.ndarray,
    late: np.ndarray,
    before: dict[int, int],
) -> list[list[Placed]]:
    """The layout on several GPU types: each round, while gangs fit, the same order as `pack` (jobs that need
    every remaining round, late jobs, jobs that ran the round before, then by weight), each job on the type it ran
    on the round before when it still has rounds there, else on the type it has most rounds left on (so a job moves
    between types at most once per plan, and never without the market having granted it rounds there). Never
    fails: a job that must run but finds no room loses that round (the next solve gives it again)."""
    weight = _copy_weight(by_type.sum(axis=1), urgency)
    left = by_type.astype(int).tolist()  # plain lists: the loops below read one element at a time
    total, gang, types = [sum(row) for row in left], sizes.astype(int).tolist(), range(len(capacities))
    by_weight = [int(j) for j in np.lexsort((np.arange(len(left)), -weight)) if total[j] > 0]
    smallest = min((gang[j] for j in by_weight), default=0)
    layout: list[list[Placed]] = []
    for h in range(rounds):
        remaining = rounds - h
        must = [j for j in by_weight if total[j] >= remaining]
        rest = sorted((j for j in by_weight if 0 < total[j] < remaining), key=lambda j: (not late[j], j not in before))
        free = list(capacities)
        placed: list[Placed] = []
        for j in must + rest:
            if total[j] < remaining and max(free) < smallest:
                break  # the round is full: what is left of it is jobs that may wait
            row = left[j]
            options = [t for t in types if row[t] > 0 and gang[j] <= free[t]]
            if options:
                t = before[j] if before.get(j) in options else max(options, key=lambda t: (row[t], -t))
                placed.append((j, t))
                free[t] -= gang[j]
                row[t] -= 1
                total[j] -= 1
            elif total[j] >= remaining:
                row[row.index(max(row))] -= 1
                total[j] -= 1
        layout.append(placed)
        before = dict(placed)
    return layout


def fill_types(
    layout: list[list[Placed]],
    sizes: np.ndarray,
    capacities: tuple[int, ...],
    speeds: np.ndarray,
    remaining_s: np.ndarray,
) -> list[list[Placed]]:
    """`fill` on several types: idle GPUs go to jobs not in the round, longest predicted remaining runtime first,
    each on the type with room where it runs fastest (ties: the cluster's order)."""
    longest_first = np.lexsort((np.arange(len(remaining_s)), -remaining_s)).tolist()
    gang, speed, types = sizes.astype(int).tolist(), speeds.tolist(), range(len(capacities))
    smallest = min(gang, default=1)
    filled = []
    for placed in layout:
        free = list(capacities)
        for j, t in placed:
            free[t] -= gang[j]
        present = {j for j, _ in placed}
        extra: list[Placed] = []
        for j in longest_first:
            if max(free) < smallest:
                break  # no gang fits what is left
            options = [t for t in types if speed[j][t] > 0 and gang[j] <= free[t]]
            if j not in present and options:
                t = max(options, key=lambda t: (speed[j][t], -t))
                extra.append((j, t))
                free[t] -= gang[j]
        filled.append(placed + extra)
    return filled
