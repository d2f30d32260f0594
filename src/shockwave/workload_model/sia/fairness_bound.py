"""The least worst rho any schedule can give a Sia workload of goodput-adaptive jobs on one GPU type: a relaxation
that is a bound, not a policy.

rho_j = JCT_j / (T_iso_j x max(1, N/G)), as for every policy (`results/metrics.py`), so a worst rho of r means each
job j finishes within D_j = r T_iso_j max(1, N/G) of its arrival (and, with `by`, no later than `by`). Two facts no
schedule escapes, restarts and rounds left out:

- a job that finishes within D uses at least E_j(D) GPU-seconds: in each epoch it trains with one of the
  configurations it may pick (`SiaGoodput.choices`, on every placement of up to its largest gang), whose progress
  per second the profile fixes, and E_j(D) is the least GPU-time over any mix of them done within D. Its
  Lagrangian dual, max over lambda of sum_e p_e min_c (g_c + lambda) / r_ec - lambda D (p_e the epoch's progress),
  is a lower bound for every lambda; it is taken over a fixed grid of lambdas (`LAMBDAS`);
- the jobs share G GPUs: there must be a flow of E_j(D_j) GPU-seconds to each job, inside its window, at most its
  largest gang at a time, at most G in all at a time (a max flow over the intervals between arrivals and deadlines).

Where those fail at r, no schedule reaches worst rho r; the bound is the largest such r, found by bisection (a fixed
number of halvings, so the same bits on every machine). Why: the homogeneous fairness bar of the elastic Shockwave
issue was called out of reach because every policy misses it; this says how far any policy could go.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.workload_model.goodput import Training
from shockwave.workload_model.sia.goodput import SiaGoodput
from shockwave.workload_model.sia.profiles import Application, TypeProfile, canonical

LAMBDAS = np.concatenate([[0.0], np.geomspace(1e-3, 1e5, 400)])
"""GPUs' worth of time per second of time at which the dual is evaluated (any grid gives a bound; a finer one a
tighter bound)."""
HALVINGS = 30
"""Bisection steps: a fixed number, so the same bits everywhere (the bound to about 64 / 2^30)."""
FLOW_LIMIT = 2**30
"""Largest total of the integer max flow (scipy's is 32-bit): a flow's unit of GPU-seconds is chosen so that every
GPU over the whole horizon fits, demands rounded down and capacities up so it stays a relaxation."""


@dataclass(frozen=True)
class JobWindow:
    """What the bound needs of one job: its arrival, rho's denominator, its dual and its largest gang."""

    arrival_s: float
    basis_s: float
    dual: np.ndarray
    """sum_e p_e min_c (g_c + lambda) / r_ec at each of `LAMBDAS`."""
    largest_gang: int
    waste: float = 1.0
    """A what-if: the job needs this many times its least GPU-time (`most_gpu_time_factor`)."""

    def least_gpu_seconds(self, within_s: float) -> float:
        """A lower bound on the GPU-seconds of finishing within `within_s` of starting (inf: it cannot)."""
        if within_s <= 0:
            return math.inf
        return self.waste * float(np.max(self.dual - LAMBDAS * within_s))


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


def dual_of(goodput: SiaGoodput, model: str, gpu_type: str, largest: int, per_server: int, servers: int) -> np.ndarray:
    """The application's dual at each lambda over every configuration of up to `largest` GPUs."""
    app: Application = goodput.applications[model]
    profile = app.types[gpu_type]
    epochs = range(app.max_epochs)
    gains: dict[int, np.ndarray] = {}
    gpus: list[int] = []
    rates: list[np.ndarray] = []
    found = distinct_placements(profile, largest, per_server, servers)
    # A job moved to another placement of as many GPUs may keep its batch (a same-shape move is no restart).
    batches: dict[int, set[Training]] = {}
    for placement in found:
        batches.setdefault(sum(placement), set()).update(goodput.choices(model, gpu_type, placement))
    for placement in found:
        for training in sorted(batches[sum(placement)], key=lambda t: (t.local, t.accumulation)):
            timed = profile.step(placement, float(training.local))
            if timed is None:
                continue
            if training.batch not in gains:
                gains[training.batch] = np.array([app.gain(training.batch, epoch) for epoch in epochs])
            gpus.append(sum(placement))
            rates.append(gains[training.batch] / goodput.step_seconds(app, timed, training))
    if not gpus:
        raise InputError(f"{model} cannot run on any {gpu_type} placement of up to {largest} GPUs")
    rate = np.array(rates).T  # epochs x configurations
    inverse = np.divide(1.0, rate, out=np.full_like(rate, np.inf), where=rate > 0)
    progress = np.diff(np.concatenate([[0.0], app.epoch_ends]))
    counts = np.array(gpus, dtype=float)
    return np.array([progress @ ((counts + lam) * inverse).min(axis=1) for lam in LAMBDAS])


def windows(
    goodput: SiaGoodput,
    models: Sequence[str],
    arrivals: Sequence[float],
    isolated_s: Sequence[float],
    cluster: ClusterSpec,
) -> list[JobWindow]:
    """One `JobWindow` per job (the duals worked out once per application)."""
    if len(cluster.pools) != 1:
        raise InputError(f"the fairness bound is for one GPU type; --cluster has {len(cluster.pools)}")
    pool = cluster.pools[0]
    servers = math.ceil(pool.gpus / pool.gpus_per_server)
    factor = max(1.0, len(models) / cluster.gpus)
    duals: dict[str, tuple[np.ndarray, int]] = {}
    for model in dict.fromkeys(models):
        largest = min(pool.gpus, goodput.largest_gang(model, pool.gpu_type))
        duals[model] = (dual_of(goodput, model, pool.gpu_type, largest, pool.gpus_per_server, servers), largest)
    return [
        JobWindow(arrival, isolated * factor, *duals[model])
        for model, arrival, isolated in zip(models, arrivals, isolated_s, strict=True)
    ]


def deadlines(jobs: Sequence[JobWindow], rho: float, by: float = math.inf) -> np.ndarray:
    """When each job must end for a worst rho of `rho`: its arrival plus rho times its denominator, at most `by`."""
    return np.minimum(np.array([job.arrival_s + rho * job.basis_s for job in jobs]), by)


def fits(jobs: Sequence[JobWindow], due: np.ndarray, gpus: int) -> bool:
    """Whether each job's least GPU-time can flow to it inside [arrival, deadline], at most its largest gang and at
    most `gpus` in all at a time."""
    arrivals = np.array([job.arrival_s for job in jobs])
    spans = due - arrivals
    needs = [job.least_gpu_seconds(span) for job, span in zip(jobs, spans, strict=True)]
    if not all(math.isfinite(need) for need in needs):
        return False
    points = np.unique(np.concatenate([arrivals, due]))
    lengths = np.diff(points)
    unit = max(1.0, gpus * float(points[-1] - points[0]) / FLOW_LIMIT)
    n, m = len(jobs), len(lengths)
    sink = 1 + n + m
    demands = [min(math.floor(need / unit), FLOW_LIMIT) for need in needs]
    rows, cols, caps = [0] * n, list(range(1, n + 1)), list(demands)
    for j, (job, deadline) in enumerate(zip(jobs, due, strict=True)):
        first, last = np.searchsorted(points, [job.arrival_s, deadline])
        for i in range(first, last):
            rows.append(1 + j)
            cols.append(1 + n + i)
            caps.append(math.ceil(min(job.largest_gang, gpus) * lengths[i] / unit))
    for i in range(m):
        rows.append(1 + n + i)
        cols.append(sink)
        caps.append(math.ceil(gpus * lengths[i] / unit))
    graph = csr_matrix((np.array(caps, dtype=np.int64), (rows, cols)), shape=(sink + 1, sink + 1))
    return maximum_flow(graph, 0, sink).flow_value >= sum(demands)


def least_worst_rho(jobs: Sequence[JobWindow], gpus: int, *, by: float = math.inf, ceiling: float = 64.0) -> float:
    """The largest worst rho at which the workload cannot fit (0: it fits at any): no schedule does better. `by`:
    every job also done by then (e.g. another policy's last finish, to ask what fairness its makespan allows)."""

    def fit_at(rho: float) -> bool:
        return fits(jobs, deadlines(jobs, rho, by), gpus)

    return ceiling if not fit_at(ceiling) else _edge(lambda rho: not fit_at(rho), 0.0, ceiling)


def most_gpu_time_factor(
    jobs: Sequence[JobWindow], gpus: int, rho: float, *, by: float = math.inf, ceiling: float = 4.0
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
