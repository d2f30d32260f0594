"""A new LP on Gavel's round mechanism, as a plug-in: between max-sum-throughput and max-min fairness. Run it with
`shockwave simulate --policy examples/my_allocator.py:ThroughputPlusFairness --policy-param fairness=2 ...`.
"""

import cvxpy as cp

from shockwave.policies.gavel.lp import as_allocation, base_constraints, proportional_throughputs, solve
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless


class ThroughputPlusFairness(Stateless):
    """maximise sum_j n_j + fairness x N x min_j n_j, where n_j = sum_t thr_jt x_jt / prop_j is job j's throughput
    over its fair share's (Gavel §3.3): fairness 0 is max-sum-throughput, a large one max-min fairness."""

    name = "throughput_plus_fairness"  # what results call it

    def __init__(self, fairness: float = 1.0) -> None:
        self.fairness = fairness

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        rates = inputs.throughput_matrix()
        normalised = rates / proportional_throughputs(inputs, rates) * inputs.scale_factor_matrix()
        x, least = cp.Variable(rates.shape), cp.Variable()
        shares = cp.sum(cp.multiply(normalised, x), axis=1)
        objective = cp.Maximize(cp.sum(shares) + self.fairness * len(inputs.job_ids) * least)
        solve(cp.Problem(objective, [*base_constraints(x, inputs), shares >= least]))
        return as_allocation(inputs, x)
