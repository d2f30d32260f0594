"""The least worst rho any schedule can give a Sia workload of goodput-adaptive jobs, on one GPU type or several: a
relaxation that is a bound, not a policy.

rho_j = JCT_j / (T_iso_j x max(1, N/G)), as for every policy (`results/metrics.py`), so a worst rho of r means each
job j finishes within D_j = r T_iso_j max(1, N/G) of its arrival (and, with `by`, no later than `by`). Two facts no
schedule escapes, restarts and rounds left out:

- a job that finishes within D spends GPU-seconds E_jt on each type t that cost at least C_j(D, w) = min w . E_j at
  any prices w >= 0 per GPU-second of each type: in each epoch it trains with one of the configurations it may
  pick (`SiaGoodput.choices`, on every placement of up to its largest gang on every type), whose progress per
  second the profile fixes, and C_j is the least cost over any mix of them done within D. Its Lagrangian dual, max
  over lambda of sum_e p_e min_c (w_t(c) g_c + lambda) / r_ec - lambda D (p_e the epoch's progress), is a lower bound
  for every lambda; it is taken over a fixed grid of lambdas (`LAMBDAS`) and of prices (`price_grid`: one price on
  one type, where it is the least GPU-time);
- the jobs share the types' GPUs: there must be GPU-seconds E_jti of each type in each interval between arrivals and
  deadlines, inside each job's window, at most its largest gang at a time, at most the type's GPUs in all at a time,
  with w . sum_i E_jti >= C_j at every price of the grid (a linear program, HiGHS through scipy).

Where those fail at r, no schedule reaches worst rho r; the bound is the largest such r, found by bisection (a fixed
number of halvings, so the same bits on every machine). Why: the fairness bars of the elastic Shockwave issue were
missed by every policy on some workloads (homogeneous Philly, a burst of short jobs on heterogeneous Saturn 5); this
says how far any policy could go.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.workload_model.goodput import Training
from shockwave.workload_model.sia.goodput import SiaGoodput
from shockwave.workload_model.sia.profiles import Application, TypeProfile, canonical

LAMBDAS = np.concatenate([[0.0], np.geomspace(1e-3, 1e5, 400)])
"""GPUs' worth of time per second of time at which the dual is evaluated (any grid gives a bound; a finer one a
tighter bound)."""
HALVINGS = 24
"""Bisection steps: a fixed number, so the same bits everywhere (the bound to about 64 / 2^24)."""
PRICE_STEPS = (0.0, 1.0, 2.0, 4.0)
"""Each type's price per GPU-second in the grid of prices (relative; one type alone gives the single price 1)."""


def price_grid(types: int) -> np.ndarray:
    """Distinct price vectors (rows, largest price 1) from `PRICE_STEPS` per type: the all-ones row first, so that
    row 0 prices GPU-time itself."""
    rows: dict[tuple[float, ...], None] = {(1.0,) * types: None}
    for steps in itertools.product(PRICE_STEPS, repeat=types):
        if max(steps) > 0:
            rows.setdefault(tuple(s / max(steps) for s in steps), None)
    return np.array(list(rows))


@dataclass(frozen=True)
class JobWindow:
    """What the bound needs of one job: its arrival, rho's denominator, its duals and its largest gang per type."""

    arrival_s: float
    basis_s: float
    dual: np.ndarray
    """sum_e p_e min_c (w_t(c) g_c + lambda) / r_ec: one row per price vector of the grid, one column per `LAMBDAS`;
    row 0 (all prices 1) is the job's GPU-time."""
    gangs: tuple[int, ...]
    """The most GPUs of each type it may train on at once (0: none of that type)."""
    waste: float = 1.0
    """A what-if: the job needs this many times its least GPU-time (`most_gpu_time_factor`)."""

    def least_costs(self, within_s: float) -> np.ndarray:
        """A lower bound on the cost, at each price vector, of finishing within `within_s` of starting (inf: it
        cannot)."""
        if within_s <= 0:
            return np.full(len(self.dual), math.inf)
        return self.waste * np.max(self.dual - LAMBDAS * within_s, axis=1)

    def least_gpu_seconds(self, within_s: float) -> float:
        """A lower bound on the GPU-seconds of finishing within `within_s` of starting (inf: it cannot)."""
        return float(self.least_costs(within_s)[0])


def partitions(gpus: int, per_server: int, servers: int) -> Iterator[tuple[int, ...]]:
    """Every multiset of GPUs per server that holds `gpus` on at most `servers` servers of `per_server` each
    (largest first)."""

    def parts(left: int, largest: int, room: int) -> Iterator[tuple[int, ...]]:
        if left == 0:
            yield ()
            return
        if room == 0:
            return
        for first in range(min(largest, left), 0, -1):
            for rest in parts(left - first, first, room - 1):
                yield (first, *rest)

    yield from parts(gpus, per_server, servers)


def orders(partition: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """The distinct orders of a multiset, lexicographically from the smallest (each once, however many repeats)."""
    order = sorted(partition)
    while True:
        yield tuple(order)
        i = len(order) - 2
        while i >= 0 and order[i] >= order[i + 1]:
            i -= 1
        if i < 0:
            return
        j = len(order) - 1
        while order[j] <= order[i]:
            j -= 1
        order[i], order[j] = order[j], order[i]
        order[i + 1 :] = reversed(order[i + 1 :])


def distinct_placements(profile: TypeProfile, largest: int, per_server: int, servers: int) -> list[tuple[int, ...]]:
    """A placement of 1 to `largest` GPUs for each distinct step time: every profiled one that fits, and for each
    number of servers and GPUs one that is not profiled (`TypeProfile.step` times those by that shape alone), where
    any order of any of its partitions is not."""
    found = [p for p in profile.placements if sum(p) <= largest and max(p) <= per_server and len(p) <= servers]
    for count in range(1, largest + 1):
        shapes: dict[int, tuple[int, ...]] = {}
        for partition in partitions(count, per_server, servers):
            if len(partition) in shapes:
                continue
            unprofiled = (p for p in orders(partition) if canonical(p) not in profile.placements)
            placement = next(unprofiled, None)
            if placement is not None:
                shapes[len(partition)] = placement
        found += shapes.values()
    return found


@dataclass(frozen=True)
class TypeRoom:
    """What a job may take of one type: the most GPUs at once, the servers' shape."""

    gpu_type: str
    largest: int
    per_server: int
    servers: int


def dual_of(goodput: SiaGoodput, model: str, rooms: Sequence[TypeRoom], prices: np.ndarray) -> np.ndarray:
    """The application's dual at each price vector (rows of `prices`, one column per room) and each lambda, over
    every configuration of up to each room's largest gang."""
    app: Application = goodput.applications[model]
    epochs = range(app.max_epochs)
    gains: dict[int, np.ndarray] = {}
    gpus: list[int] = []
    kinds: list[int] = []
    rates: list[np.ndarray] = []
    for kind, room in enumerate(rooms):
        if room.largest < 1:
            continue
        profile = app.types[room.gpu_type]
        found = distinct_placements(profile, room.largest, room.per_server, room.servers)
        # A job moved to another placement of as many GPUs may keep its batch (a same-shape move is no restart).
        batches: dict[int, set[Training]] = {}
        for placement in found:
            batches.setdefault(sum(placement), set()).update(goodput.choices(model, room.gpu_type, placement))
        for placement in found:
            for training in sorted(batches[sum(placement)], key=lambda t: (t.local, t.accumulation)):
                timed = profile.step(placement, float(training.local))
                if timed is None:
                    continue
                if training.batch not in gains:
                    gains[training.batch] = np.array([app.gain(training.batch, epoch) for epoch in epochs])
                gpus.append(sum(placement))
                kinds.append(kind)
                rates.append(gains[training.batch] / goodput.step_seconds(app, timed, training))
    if not gpus:
        names = ", ".join(room.gpu_type for room in rooms)
        raise InputError(f"{model} cannot run on any placement of {names} within its largest gang")
    rate = np.array(rates).T  # epochs x configurations
    inverse = np.divide(1.0, rate, out=np.full_like(rate, np.inf), where=rate > 0)
    progress = np.diff(np.concatenate([[0.0], app.epoch_ends]))
    # At any prices the fastest of the configurations of one type and GPU count is the cheapest of them too.
    shapes = sorted(set(zip(kinds, gpus, strict=True)))
    column = {shape: k for k, shape in enumerate(shapes)}
    fastest = np.full((len(progress), len(shapes)), np.inf)
    for c, shape in enumerate(zip(kinds, gpus, strict=True)):
        np.minimum(fastest[:, column[shape]], inverse[:, c], out=fastest[:, column[shape]])
    inverse = fastest
    kinds, gpus = [kind for kind, _ in shapes], [count for _, count in shapes]
    costs = prices[:, kinds] * np.array(gpus, dtype=float)  # prices x configurations, per second
    return np.array(
        [sum(p * cheapest(cost, seconds) for p, seconds in zip(progress, inverse, strict=True)) for cost in costs]
    )


def cheapest(cost: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """min over configurations of (cost_c + lambda) x seconds_c at each of `LAMBDAS` (cost_c per second, seconds_c
    per unit of progress), over the lower convex hull of the points (seconds_c, cost_c x seconds_c): the only ones
    a line of slope lambda >= 0 can touch first; inf where none runs."""
    runs = np.isfinite(seconds)
    seconds, total = seconds[runs], cost[runs] * seconds[runs]
    if not len(seconds):
        return np.full_like(LAMBDAS, np.inf)
    order = np.lexsort((total, seconds))
    seconds, total = seconds[order], total[order]
    kept = total < np.minimum.accumulate(np.concatenate([[np.inf], total[:-1]]))  # faster and cheaper than before
    hull: list[tuple[float, float]] = []
    for point in zip(seconds[kept].tolist(), total[kept].tolist(), strict=True):
        while len(hull) >= 2 and _turns_right(hull[-2], hull[-1], point):
            hull.pop()
        hull.append(point)
    x, y = np.array(hull).T
    return (y[None, :] + LAMBDAS[:, None] * x[None, :]).min(axis=1)


def _turns_right(a: tuple[float, float], b: tuple[float, float], c: tuple[float, float]) -> bool:
    """Whether b lies on or above the segment from a to c (so it is not on the lower hull)."""
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]) <= 0


def windows(
    goodput: SiaGoodput,
    models: Sequence[str],
    arrivals: Sequence[float],
    isolated_s: Sequence[float],
    cluster: ClusterSpec,
) -> list[JobWindow]:
    """One `JobWindow` per job (the duals worked out once per application)."""
    factor = max(1.0, len(models) / cluster.gpus)
    prices = price_grid(len(cluster.pools))
    duals: dict[str, tuple[np.ndarray, tuple[int, ...]]] = {}
    for model in dict.fromkeys(models):
        rooms = [
            TypeRoom(
                pool.gpu_type,
                min(pool.gpus, goodput.largest_gang(model, pool.gpu_type))
                if pool.gpu_type in goodput.applications[model].types
                else 0,
                pool.gpus_per_server,
                math.ceil(pool.gpus / pool.gpus_per_server),
            )
            for pool in cluster.pools
        ]
        duals[model] = (dual_of(goodput, model, rooms, prices), tuple(room.largest for room in rooms))
    return [
        JobWindow(arrival, isolated * factor, *duals[model])
        for model, arrival, isolated in zip(models, arrivals, isolated_s, strict=True)
    ]


def deadlines(jobs: Sequence[JobWindow], rho: float, by: float = math.inf) -> np.ndarray:
    """When each job must end for a worst rho of `rho`: its arrival plus rho times its denominator, at most `by`."""
    return np.minimum(np.array([job.arrival_s + rho * job.basis_s for job in jobs]), by)


def fits(jobs: Sequence[JobWindow], due: np.ndarray, gpus: Sequence[int]) -> bool:
    """Whether GPU-seconds of each type (`gpus` of each at a time) can go to each job inside [arrival, deadline], at
    most its largest gang of each type and of all types at a time, costing at least its least cost within its span
    at every price of the grid (`prices[k] . E_j >= C_jk`)."""
    prices = price_grid(len(gpus))
    arrivals = np.array([job.arrival_s for job in jobs])
    needs = [job.least_costs(span) for job, span in zip(jobs, due - arrivals, strict=True)]
    if not all(np.isfinite(need).all() for need in needs):
        return False
    points = np.unique(np.concatenate([arrivals, due]))
    lengths = np.diff(points)
    scale = max(float(points[-1] - points[0]), 1.0)  # GPU-seconds in units of GPUs over the horizon: well scaled
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    bounds: list[float] = []
    upper = (np.outer(gpus, lengths) / scale).ravel().tolist()  # row t x intervals + i: type t's GPUs in interval i
    row = len(upper)
    column = 0
    for j, (job, deadline) in enumerate(zip(jobs, due, strict=True)):
        first, last = np.searchsorted(points, [job.arrival_s, deadline])
        mine: list[tuple[int, int]] = []  # (column, type)
        for i in range(first, last):
            gang_row = row
            upper.append(max(job.gangs) * lengths[i] / scale)
            row += 1
            for t, gang in enumerate(job.gangs):
                if gang < 1:
                    continue
                rows += [t * len(lengths) + i, gang_row]
                cols += [column, column]
                values += [1.0, 1.0]
                bounds.append(min(gang, gpus[t]) * lengths[i] / scale)
                mine.append((column, t))
                column += 1
        for k, need in enumerate(needs[j]):
            if need <= 0:
                continue
            for c, t in mine:
                if prices[k, t] > 0:
                    rows.append(row)
                    cols.append(c)
                    values.append(-prices[k, t])
            upper.append(-need / scale)
            row += 1
    if column == 0:
        return all((need <= 0).all() for need in needs)
    matrix = coo_matrix((values, (rows, cols)), shape=(row, column)).tocsr()
    found = linprog(
        np.zeros(column), A_ub=matrix, b_ub=np.array(upper), bounds=list(zip([0.0] * column, bounds, strict=True)),
        method="highs",
    )  # fmt: skip
    return bool(found.status == 0)


def least_worst_rho(
    jobs: Sequence[JobWindow], gpus: Sequence[int], *, by: float = math.inf, ceiling: float = 64.0
) -> float:
    """The largest worst rho at which the workload cannot fit (0: it fits at any): no schedule does better. `by`:
    every job also done by then (e.g. another policy's last finish, to ask what fairness its makespan allows)."""

    def fit_at(rho: float) -> bool:
        return fits(jobs, deadlines(jobs, rho, by), gpus)

    return ceiling if not fit_at(ceiling) else _edge(lambda rho: not fit_at(rho), 0.0, ceiling)


def most_gpu_time_factor(
    jobs: Sequence[JobWindow], gpus: Sequence[int], rho: float, *, by: float = math.inf, ceiling: float = 4.0
) -> float:
    """The largest F such that the jobs still fit at worst rho `rho` (and by `by`) when each needs F times its least
    GPU-time to end within any span (0: not even at F = 1): how much GPU-time a schedule may waste, in restarts or
    in configurations past the most efficient, and still reach `rho`."""
    due = deadlines(jobs, rho, by)

    def fit_at(factor: float) -> bool:
        return fits([replace(job, waste=factor) for job in jobs], due, gpus)

    if not fit_at(1.0):
        return 0.0
    return ceiling if fit_at(ceiling) else _edge(fit_at, 1.0, ceiling)


def _edge(below: Callable[[float], bool], low: float, high: float) -> float:
    """The low end of [low, high] after HALVINGS halvings towards where `below` stops holding (it holds at `low`)."""
    for _ in range(HALVINGS):
        middle = (low + high) / 2
        low, high = (middle, high) if below(middle) else (low, middle)
    return low


def gpu_time_factor(jobs: Sequence[JobWindow], jct_s: Sequence[float], gpu_seconds: float) -> float:
    """A run's GPU-time over the least in which each job could have taken the time it took."""
    return gpu_seconds / sum(job.least_gpu_seconds(jct) for job, jct in zip(jobs, jct_s, strict=True))
