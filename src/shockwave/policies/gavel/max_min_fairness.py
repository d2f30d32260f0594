"""Gavel max-min fairness, heterogeneity-agnostic (spec §5): maximise min_j sf_j x_j.

With every throughput replaced by 1 the equal-share normaliser is exactly 1, so each job's "normalised
throughput" is simply the GPU time it gets: the policy equalises GPU-time shares.
"""

from __future__ import annotations

import cvxpy as cp

from shockwave.policies.gavel.lp import as_allocation, base_constraints, column, solve
from shockwave.policies.gavel.mechanism import AllocationInputs, Stateless


class MaxMinFairness(Stateless):
    name = "max_min_fairness"

    def allocate(self, inputs: AllocationInputs) -> dict[int, float]:
        sf = column(inputs, inputs.scale_factors)
        x = cp.Variable(sf.shape)
        objective = cp.Maximize(cp.min(cp.sum(cp.multiply(sf, x), axis=1)))
        solve(cp.Problem(objective, base_constraints(x, sf, inputs.gpus)))
        return as_allocation(inputs, x)
