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

from dataclasses import dataclass

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
MOVE_GAIN = 1.25
"""A job leaves the type it ran on the round before only for one this much faster: a move costs a restart (20 s
of a 120 s round under the corrected mechanics), and often a move back when the faster type fills again."""


@dataclass(frozen=True)
class TypedRows:
    """What the layout on several GPU types reads of each job (one row per job)."""

    sizes: np.ndarray
    speeds: np.ndarray
    """v_jt: equal-share rounds of work one round on type t does (n x types; 0: cannot run there)."""
    work: np.ndarray
    """Equal-share rounds of work left."""
    urgency: np.ndarray
    late: np.ndarray
    far_behind: np.ndarray
    """Late jobs far behind their fair finish time (`FairnessView.far_behind`)."""
    critical: np.ndarray
    """Jobs on the critical path (`MarketInputs.critical`)."""


def pack_types(
    by_type: np.ndarray,
    rows: TypedRows,
    capacities: tuple[int, ...],
    rounds: int,
    before: dict[int, int],
    *,
    laid: int | None = None,
) -> list[list[Placed]]:
    """The layout on several GPU types (also one type's when `pack` finds no room for many jobs), a round at a
    time. Each round takes, while gangs fit: critical jobs that need every remaining round of the window (those
    with the fewest rounds granted off their main type first), late jobs far behind, the other jobs that need every
    remaining round, then late jobs, then jobs that ran the round before, each group by weight as in `pack`.
    `before`: the type each job ran on in the round before the plan.

    Why the critical jobs with fewest rounds off their main type first: a critical job granted rounds on two types
    takes the faster while it has room, so critical jobs granted a few V100 rounds each filled the V100s in the
    window's first rounds, and a 4-GPU job granted every V100 round, the one setting the makespan, ran on K80s for
    19 rounds (a 220-job trace on 36:36:36, seed 6111: makespan 1.10x `min_total_duration_perf`'s; 1.02x with this
    order and `longest_jobs` 8, 1.10x with `longest_jobs` 8 alone).

    Why late jobs far behind come before jobs that must run: the plan is re-solved within a few rounds, so a gang
    that only fits once the must-run jobs are done, at the window's end, never ran (a Gavel-style trace on 8:8:8
    GPUs: 8-GPU jobs waited for days).

    Each job runs on the fastest type it has rounds on (`_type_for`), and no more once its rounds do its `work`:
    the market may grant a job rounds on several types, more than it needs in all (its caps are per type), and
    on the type with most rounds left a short job ran its K80 rounds at an eighth of its P100 speed and none of
    its P100 ones (worst rho 2.8 on 220 jobs, 64:32:32). Never fails: a job that must run but finds no room
    loses that round (the next solve gives it again).

    `laid`: how many first rounds to lay out (None: all); a round depends only on those before it, and the policy
    re-solves after `resolve_every_rounds` anyway (more was most of the layout's time at 2,000 jobs)."""
    weight = _copy_weight(by_type.sum(axis=1), rows.urgency)
    left = by_type.astype(int).tolist()  # plain lists: the loops below read one element at a time
    total, gang, types = [sum(row) for row in left], rows.sizes.astype(int).tolist(), range(len(capacities))
    speed, owed = rows.speeds.tolist(), rows.work.astype(float).tolist()
    rank = np.empty(len(left), dtype=int)
    rank[np.lexsort((np.arange(len(left)), -weight))] = np.arange(len(left))
    smallest = min((g for g, n in zip(gang, total, strict=True) if n > 0), default=0)
    layout: list[list[Placed]] = []
    for h in range(rounds if laid is None else min(laid, rounds)):
        remaining = rounds - h
        free = list(capacities)
        placed: list[Placed] = []
        ran = np.zeros(len(left), dtype=bool)
        ran[list(before)] = True
        for j in _round_order(rank, left, total, remaining, rows, ran):
            if total[j] < remaining and max(free) < smallest:
                break  # the round is full: what is left of it is jobs that may wait
            row = left[j]
            options = [t for t in types if row[t] > 0 and gang[j] <= free[t]]
            if options:
                stay = before.get(j)
                stay = stay if stay is not None and gang[j] <= free[stay] else None
                t, granted = _type_for(options, row, speed[j], stay)
                placed.append((j, t))
                free[t] -= gang[j]
                row[granted] -= 1
                owed[j] -= speed[j][t]
                total[j] = 0 if owed[j] <= 1e-9 else total[j] - 1
            elif total[j] >= remaining:
                row[row.index(max(row))] -= 1
                total[j] -= 1
        layout.append(placed)
        before = dict(placed)
    return layout


def _type_for(options: list[int], row: list[int], speed: list[float], stay: int | None) -> tuple[int, int]:
    """(type to run on, type whose granted round it uses): the fastest of `options`, or the type the job ran on
    (`stay`, None where it has no room) unless the fastest is MOVE_GAIN faster; staying uses a round granted
    there if any is left (no restart either way)."""
    fastest = max(options, key=lambda t: (speed[t], row[t], -t))
    if stay is not None and speed[stay] * MOVE_GAIN >= speed[fastest]:
        return stay, stay if row[stay] > 0 else fastest
    return fastest, fastest


def _round_order(
    rank: np.ndarray, left: list[list[int]], total: list[int], remaining: int, rows: TypedRows, ran: np.ndarray
) -> list[int]:
    """`pack_types`'s order of the jobs with rounds left, for a round with `remaining` rounds to go: groups in
    order (critical and must run, far behind, must run, late and ran the round before, late, ran the round
    before, the rest), each by `rank` (the weight order); critical jobs that must run by the rounds they may spend
    off the type with most of their rounds left (`left`) first."""
    rounds_left = np.asarray(total)
    must = rounds_left >= remaining
    first = rows.critical & must
    far = rows.far_behind & ~first
    late = rows.late
    group = np.select([first, far, must, late & ran, late, ran], [0, 1, 2, 3, 4, 5], default=6)
    off_main = np.zeros(len(total), dtype=int)
    critical = np.flatnonzero(first)  # a few jobs: the others' rows are not read
    off_main[critical] = rounds_left[critical] - np.array([max(left[j]) for j in critical], dtype=int)
    live = np.flatnonzero(rounds_left > 0)
    return live[np.lexsort((rank[live], off_main[live], group[live]))].tolist()


def fill_types(
    layout: list[list[Placed]], rows: TypedRows, capacities: tuple[int, ...], before: dict[int, int]
) -> list[list[Placed]]:
    """`fill` on several types: idle GPUs go to jobs not in the round, first those that ran the round before (on
    that type, where it has room: no restart), then most work left first, each on the type with room where it
    runs fastest (ties: the cluster's order). `before`: the type each job ran on in the round before the plan.
    Why the jobs that ran first: a job filled in one round and not the next pays a restart (20 s under the
    corrected mechanics) when it runs again."""
    longest_first = np.lexsort((np.arange(len(rows.work)), -rows.work)).tolist()
    gang, speed, types = rows.sizes.astype(int).tolist(), rows.speeds.tolist(), range(len(capacities))
    smallest = min(gang, default=1)
    filled = []
    for placed in layout:
        free = list(capacities)
        for j, t in placed:
            free[t] -= gang[j]
        present = {j for j, _ in placed}
        extra: list[Placed] = []
        for j in [j for j in longest_first if j in before] + [j for j in longest_first if j not in before]:
            if max(free) < smallest:
                break  # no gang fits what is left
            if j in present:
                continue
            options = [t for t in types if speed[j][t] > 0 and gang[j] <= free[t]]
            if not options:
                continue
            t = before[j] if before.get(j) in options else max(options, key=lambda t: (speed[j][t], -t))
            extra.append((j, t))
            free[t] -= gang[j]
        filled.append(placed + extra)
        before = dict(placed + extra)
    return filled
