"""Gavel max-min fairness (spec §3.3): maximise min_j sf_j sum_t thr_jt x_jt / (w_j prop_j).

prop_j is the job's throughput under an equal split of every type (spec §3.2). The heterogeneity-agnostic policy
replaces every throughput by 1, so prop_j is 1 and each job's "normalised throughput" is simply the GPU time it
gets: it equalises GPU-time shares. `max_min_fairness_perf` uses the real throughputs, so a job's share of a fast
type counts for more than the same share of a slow one.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from shockwave.policies.gavel.lp import as_allocation, base_constraints, proportional_throughputs, solve
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless


def max_min_allocation(inputs: AllocationInputs, throughputs: np.ndarray) -> Allocation:
    m = len(inputs.job_ids)
    scale = (1.0 / inputs.column(inputs.weights)).reshape((m, 1))
    scale = np.multiply(scale, 1.0 / proportional_throughputs(inputs, throughputs))
    coefficients = np.multiply(throughputs * scale, inputs.scale_factor_matrix())
    x = cp.Variable(throughputs.shape)
    objective = cp.Maximize(cp.min(cp.sum(cp.multiply(coefficients, x), axis=1)))
    solve(cp.Problem(objective, base_constraints(x, inputs)))
    return as_allocation(inputs, x)


class MaxMinFairness(Stateless):
    name = "max_min_fairness"
    heterogeneity_aware = False

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        return max_min_allocation(inputs, np.ones((len(inputs.job_ids), len(inputs.gpu_types))))


class MaxMinFairnessPerf(Stateless):
    name = "max_min_fairness_perf"

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        return max_min_allocation(inputs, inputs.throughput_matrix())
