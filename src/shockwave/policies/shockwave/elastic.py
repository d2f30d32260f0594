"""Shockwave's window for goodput-adaptive jobs: the same market (`market.py`), one column per configuration.

Sia chooses each job's GPU type and count for the next round; Shockwave plans a window of rounds with a Nash social
welfare over the jobs' progress, a makespan term and finish-time-fairness bounds. Here the market's columns are
configurations, Sia's (`sia/configs.py`: a GPU type and a number of its GPUs shaped to its servers) plus each rigid
job's gang on each type, and c_jc counts the rounds of the window job j spends in configuration c:

- a round in c does v_jc rounds of the job's equal-share work: its estimated progress per second there (the
  goodput model's fit of what the job measured, projected to types it has not run on, `estimated_goodputs`; before
  it measured anything, its one-GPU share of the rate its request gets from the profile) over b_j, the progress per
  second of its request alone on an equal share of every type (W_j / T_iso_j, the basis of rho for every policy);
- a configuration takes its GPUs of its type: one capacity row per type, sum_jc gpus_c c_jc <= G_t H;
- a job is in one configuration per round, sum_c c_jc <= H;
- the makespan term counts each job's leftover in time, at its speed in its fastest configuration within its share of
  the cluster (`leftover_pace`): equal-share work says little of how long a job that scales badly takes;
- a move costs a restart: every configuration but a running job's current one does v_jc f_j, f_j the share of its
  life the job keeps if it restarts once more ((age - restarts x restart) / (age + restart), 1 while it is younger
  than one restart: Sia's discount, `Allocations.move_factor`, with the job's own restart time where Sia's policy
  assumes one per application), so the market moves a job only where the move gains, and ever less readily as its
  restarts add up (a job that waits pays the same restart wherever it starts).

Progress and targets are in the same units: a goodput-adaptive job's progress is its share of its work done (one
"epoch" of T_iso_j equal-share seconds), a rigid job's its epochs as the rigid window reads them. Goodput estimates
change as jobs learn, so the window is solved every round, and only its first round is taken:

1. jobs that moved recently stay where they are: while they restore their checkpoint, and then until they have
   trained `elastic_min_stint` restarts' time (a job started and preempted a round later wastes its restart);
2. then, by planned share of the window (ties: most urgent), each job in the configuration the plan gives it most
   rounds (ties: the one it runs in now, then fewer GPUs) where its type still has the GPUs; a running job stays
   where it is unless the move does all its remaining work sooner, restart counted, and is faster even discounted
   by f_j (`_worth_moving`: the market's discount alone let jobs change configuration every round as their
   estimates moved, and never progress);
3. idle GPUs go to jobs left out, most urgent first, in their fastest configuration that fits, of no more GPUs
   than the plan gave them (or than their smallest configuration);
4. jobs grow into GPUs still idle on their type where that is faster (`_grow`, restart counted).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.policy import SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.elastic import restart_seconds
from shockwave.policies.shockwave.fairness import FairnessView, FinishTimeTargets
from shockwave.policies.shockwave.market import MarketInputs
from shockwave.policies.shockwave.predictor import JobForecast
from shockwave.policies.shockwave.window import WindowRow, forecast_row, window_inputs
from shockwave.policies.sia.configs import Config, Knowledge, configurations, estimated_goodputs
from shockwave.workload_model.goodput import GoodputModel
from shockwave.workload_model.profile import seconds_at


@dataclass(frozen=True)
class ElasticWindow:
    """One solve's market inputs, fairness view and columns."""

    inputs: MarketInputs
    fairness: FairnessView
    columns: list[Config]
    current: np.ndarray
    """The column each job row runs in now (-1: none)."""
    pinned: np.ndarray
    """Jobs that moved recently (still restoring a checkpoint, or within their minimum stint): they keep their
    configuration."""
    speeds: np.ndarray
    """v_jc before the restart discount (n x columns)."""
    restart_rounds: np.ndarray
    """Rounds a restart takes each job."""
    move_factors: np.ndarray
    """f_j: the share of its life each job keeps if it moves once more."""


def window_columns(cluster: ClusterSpec, jobs: list[JobState]) -> list[Config]:
    """Sia's configurations, then each rigid job's gang on each type that holds it (that no configuration is)."""
    columns = configurations(cluster)
    seen = set(columns)
    for job in jobs:
        if job.spec.elastic:
            continue
        for pool in cluster.pools:
            gang = Config(pool.gpu_type, job.scale_factor)
            if gang not in seen and job.scale_factor <= pool.gpus:
                seen.add(gang)
                columns.append(gang)
    return columns


def observe_window(
    view: SchedulerView,
    ids: list[int],
    forecasts: dict[int, JobForecast],
    targets: FinishTimeTargets,
    current: dict[int, tuple[str, int]],
    pinned: set[int],
    move_factors: np.ndarray,
    *,
    rounds: int,
    refresh_targets: bool,
) -> ElasticWindow:
    """Every active job's row of the window (refreshing the finish-time targets when the job set changed); a
    `pinned` job (one that moved recently) can only stay where it is, a running one moves at `move_factors`."""
    cluster, jobs = view.cluster, [view.jobs[j] for j in ids]
    columns = window_columns(cluster, jobs)
    index = {(c.gpu_type, c.gpus): i for i, c in enumerate(columns)}
    now = np.array([index.get(current[j], -1) if j in current else -1 for j in ids])
    rows = [_row(view, job, forecasts, columns) for job in jobs]
    restarts = np.array([restart_seconds(job) for job in jobs])
    raw = np.array([r.speeds for r in rows])
    kept = np.array([j in pinned for j in ids]) & (now >= 0)
    pools = {pool.gpu_type: k for k, pool in enumerate(cluster.pools)}
    column_gpus = np.repeat(np.array([[c.gpus for c in columns]]), len(ids), axis=0)
    speeds = _discounted(raw, now, kept, move_factors)
    sizes = np.array([job.scale_factor for job in jobs])
    inputs, fairness = window_inputs(
        view,
        ids,
        rows,
        targets,
        rounds=rounds,
        refresh_targets=refresh_targets,
        speeds=speeds,
        column_types=tuple(pools[c.gpu_type] for c in columns),
        column_gpus=column_gpus,
        paces=leftover_pace(speeds, column_gpus, sizes, cluster.gpus),
    )
    return ElasticWindow(inputs, fairness, columns, now, kept, raw, restarts / view.round_seconds, move_factors)


def leftover_pace(speeds: np.ndarray, column_gpus: np.ndarray, requests: np.ndarray, gpus: int) -> np.ndarray:
    """How fast each job's leftover runs after the window, in rounds of its equal-share work per round: its speed in
    its fastest configuration within its share of the cluster (its request, or all GPUs over the active jobs if
    more), else in its fastest at all, 1 where it runs nowhere. `speeds` are the market's: a running job's other
    configurations at its move factor, so one that has restarted often, and would restart to get its share, is paced
    slow and stays on the makespan's critical path. A rigid job's columns are its gang on each type, so its pace is
    its fastest type's speed.

    Why: the makespan term counted leftovers in equal-share work, in which a long job that scales badly and one that
    scales well look alike; on homogeneous Philly 1 an imagenet job whose goodput stops growing at 16 GPUs ran on 8
    while a job that scales to 36 took 32-36, and on Saturn long jobs ran late and unfairly. Measured against the
    alternatives on Sia's nine workloads: pacing at speeds before the move factor, or at least at the speed a job
    runs at now, left worst rho alike but homogeneous makespans of 1.17-1.19x and 1.09-1.34x Sia's (against
    1.03-1.09x); at the fastest configuration overall, 1.32x on homogeneous Philly 2."""
    share = np.maximum(requests, gpus / max(len(requests), 1))[:, None]
    fastest = speeds.max(axis=1, initial=0.0)
    within = np.where(column_gpus <= share, speeds, 0.0).max(axis=1, initial=0.0)
    pace = np.where(within > 0, within, fastest)
    return np.where(pace > 0, pace, 1.0)


def _row(view: SchedulerView, job: JobState, forecasts: dict[int, JobForecast], columns: list[Config]) -> WindowRow:
    if not job.spec.elastic:
        return _rigid_row(job, view, forecasts[job.id], columns)
    if view.goodput is None:
        raise InputError("policy 'shockwave': goodput-adaptive jobs need a goodput model (Sia's profiles)")
    return _elastic_row(job, view.cluster, columns, view.goodput)


def _discounted(raw: np.ndarray, now: np.ndarray, pinned: np.ndarray, move_factors: np.ndarray) -> np.ndarray:
    """The market's speeds: a running job's every other column times its move factor, a pinned job's only in its
    own column."""
    running = now >= 0
    discount = np.where(running, move_factors, 1.0)
    speeds = raw * discount[:, None]
    speeds[running, now[running]] = raw[running, now[running]]
    own = np.arange(raw.shape[1])[None, :] == now[:, None]
    return np.where(pinned[:, None] & ~own, 0.0, speeds)


def _elastic_row(job: JobState, cluster: ClusterSpec, columns: list[Config], model: GoodputModel) -> WindowRow:
    """A goodput-adaptive job: one "epoch" of all its work, T_iso equal-share seconds long."""
    fair_rate = cluster.equal_share_rate(job.scale_factor, job.rate)
    alone_s = seconds_at(job.spec, job.profile, lambda _batch: fair_rate)
    work = float(job.total_steps)
    base = work / alone_s
    estimate, unknown = estimated_goodputs(job, columns, model, Knowledge.of(job), cluster.types)
    for i, config in enumerate(columns):
        if config.gpu_type in unknown and config.gpus == 1:
            estimate[i] = base * job.rate(config.gpu_type) / (fair_rate * job.scale_factor)
    done = min(float(job.steps_done), work)
    remaining_s = (work - done) / base
    return WindowRow(1.0, done / work, remaining_s, alone_s, done / base, remaining_s, job.arrival_s, estimate / base)


def _rigid_row(job: JobState, view: SchedulerView, forecast: JobForecast, columns: list[Config]) -> WindowRow:
    """A rigid job: its forecast as the rigid window reads it, its gang's columns at its speed on each type."""
    row = forecast_row(view, job, forecast)
    by_type = dict(zip(view.cluster.types, row.speeds, strict=True))
    speeds = np.array([by_type[c.gpu_type] if c.gpus == job.scale_factor else 0.0 for c in columns])
    return replace(row, speeds=speeds)


def first_round(counts: np.ndarray, window: ElasticWindow, urgency: np.ndarray) -> dict[int, int]:
    """Job row -> column for the round about to start (see the module docstring)."""
    inputs = window.inputs
    sizes, kinds, speed = inputs.gpus_in_column, inputs.type_of_column, inputs.speed
    free = np.array(inputs.capacities)
    n = inputs.jobs
    share = counts.sum(axis=1)
    taken: dict[int, int] = {}

    def take(j: int, c: int) -> None:
        taken[j] = c
        free[kinds[c]] -= sizes[j, c]

    for j in np.flatnonzero(window.pinned).tolist():
        take(j, int(window.current[j]))
    for j in np.lexsort((np.arange(n), -urgency, -share)).tolist():
        if share[j] == 0:
            break
        if j in taken:
            continue
        planned = sorted(
            np.flatnonzero(counts[j]).tolist(),
            key=lambda c, j=j: (-counts[j, c], c != window.current[j], sizes[j, c], c),
        )
        stay = int(window.current[j])
        if stay >= 0 and planned[0] != stay and not _worth_moving(window, j, planned[0]):
            planned.insert(0, stay)
        fits = [c for c in planned if sizes[j, c] <= free[kinds[c]]]
        if fits:
            take(j, fits[0])
    for j in np.lexsort((np.arange(n), -urgency)).tolist():
        if j in taken:
            continue
        fits = np.flatnonzero((speed[j] > 0) & (sizes[j] <= free[kinds]))
        usable = sizes[j, speed[j] > 0]
        if not len(usable):
            continue
        largest = max(int(sizes[j, counts[j] > 0].max(initial=0)), int(usable.min()))
        within = fits[sizes[j, fits] <= largest]
        if len(within):
            take(j, int(within[np.argmax(speed[j, within])]))
    _grow(window, taken, free, urgency)
    return taken


def _grow(window: ElasticWindow, taken: dict[int, int], free: np.ndarray, urgency: np.ndarray) -> None:
    """GPUs still idle: jobs, most urgent first, move to a larger configuration of their type where it runs them
    faster (counting a restart, for a job that would not move otherwise)."""
    inputs = window.inputs
    sizes, kinds, raw = inputs.gpus_in_column, inputs.type_of_column, window.speeds
    for j in np.lexsort((np.arange(inputs.jobs), -urgency)).tolist():
        if j not in taken or window.pinned[j]:
            continue
        c = taken[j]
        t = kinds[c]
        larger = np.flatnonzero((kinds == t) & (sizes[j] > sizes[j, c]) & (sizes[j] - sizes[j, c] <= free[t]))
        larger = larger[raw[j, larger] > raw[j, c]]
        if not len(larger):
            continue
        best = int(larger[np.argmax(raw[j, larger])])
        if c == window.current[j] and not _worth_moving(window, j, best):
            continue
        free[t] -= sizes[j, best] - sizes[j, c]
        taken[j] = best


def _worth_moving(window: ElasticWindow, j: int, to: int) -> bool:
    """Whether job row j, in column `to`, does all the work it has left sooner, counting the restart, and runs
    faster even at its move factor (a job that restarted often moves only for a large gain)."""
    inputs = window.inputs
    here, there = window.speeds[j, window.current[j]], window.speeds[j, to]
    if there <= 0:
        return False
    if here <= 0:
        return True
    work = inputs.remaining_s[j] / inputs.round_s
    return there * window.move_factors[j] > here and window.restart_rounds[j] + work / there < work / here
