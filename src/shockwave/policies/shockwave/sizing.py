"""Elastic Shockwave on one GPU type: the market decides who runs this round, Sia's ILP how many GPUs each gets.

The window's first round (`elastic.first_round`) follows the market's plan, and its configurations follow the
plan's rounds, which move as the jobs' goodput estimates do: on homogeneous Philly 1 shockwave spent 8% more
GPU-hours than Sia for the same work, in twice Sia's restarts and in configurations past the point where a job's
goodput stops growing. Here the jobs the first round runs keep running, and Sia's allocation ILP (`sia/ilp.py`)
sizes them, with every job the GPUs left can take: each configuration valued by the job's goodput there over its
worst (`sia/configs.goodput_row`), every configuration but a running job's current one at the job's move factor
(`ElasticWindow.move_factors`), each job's terms weighted by the market's two terms (`weights`: its share of the
window's rounds in the plan and its leftover in time, so the plan's long view and the job that sets the makespan
get GPUs first), and jobs still restoring or within their stint kept as they are.

Only on one GPU type. Measured against our `sia` on Sia's homogeneous setting (64 GPUs; ratios to Sia's in the
same run), Philly 1-8: average JCT 0.88-0.98x, makespan 0.95-1.02x (geometric mean 0.997), worst rho 2.04-2.66
(Sia's 6.08-10.03), unfair jobs 45.0% on average (Sia's 44.1%). With the market's sizing: 0.85-1.03x, 1.03-1.16x,
1.65-2.40, 39.2%. Weighted by 1 + the share alone: 0.81-0.91x, 0.95-1.06x (1.016), 37.7% unfair; by 1 + a quarter
of the leftover too, about the makespans of the share alone on Philly 4-8. On several types the market's sizing is
what keeps jobs fair: with this ILP's (share weights), Saturn 1-3 had worst rho 1.37-1.46 and 1.9-6.9% unfair jobs
(at most 1.08 and 0.6% with the market's), and 1.10-1.41 and 0.6-4.4% with each job held to the type the market
chose."""

from __future__ import annotations

import numpy as np

from shockwave.core.policy import SchedulerView
from shockwave.policies.shockwave.elastic import ElasticWindow
from shockwave.policies.sia.ilp import LAMBDA_N, P, choose
from shockwave.policies.sia.policy import job_options
from shockwave.policies.solvers.highs import SolverFailure


def sized_by_goodput(
    view: SchedulerView, ids: list[int], window: ElasticWindow, counts: np.ndarray, taken: dict[int, int]
) -> dict[int, int]:
    """Job row -> column: the rows `taken` runs (and any others that fit), each in the configuration Sia's ILP gives
    it, each job's terms weighted by `weights`; `taken` itself where the ILP finds no plan that runs them all."""
    weight = weights(window, counts)
    columns = window.columns
    index = {config: c for c, config in enumerate(columns)}
    options = []
    for row, job_id in enumerate(ids):
        now = int(window.current[row])
        current, factor = (None, 1.0) if now < 0 else (columns[now], float(window.move_factors[row]))
        options += job_options(row, view.jobs[job_id], view, columns, current, factor, weight=float(weight[row]))
    pinned = {row: columns[int(window.current[row])] for row in np.flatnonzero(window.pinned).tolist()}
    capacities = {pool.gpu_type: pool.gpus for pool in view.cluster.pools}
    try:
        chosen = choose(options, capacities, p=P, lambda_n=LAMBDA_N, pinned=pinned, required=set(taken))
    except SolverFailure:
        return taken
    return {row: index[config] for row, config in chosen.items()}


def weights(window: ElasticWindow, counts: np.ndarray) -> np.ndarray:
    """1 + the job's share of the window's rounds in the plan (the welfare's view) + its leftover in time over the
    longest one (the makespan term's, `leftover_pace`): the market's two terms, each in [0, 1]."""
    inputs = window.inputs
    share = counts.sum(axis=1) / inputs.rounds
    left = inputs.remaining_rounds / inputs.pace
    longest = left.max(initial=0.0)
    return 1.0 + share + (left / longest if longest > 0 else 0.0)
