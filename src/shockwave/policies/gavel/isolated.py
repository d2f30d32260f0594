"""Fixed shares (spec §3.3): `isolated` gives every job an equal 1/m share of every type for its gang (rows capped
at 1), `proportional` a share of every type in proportion to the type's size (x_jt = G_t / G). Neither looks at
throughputs; they are the baselines the fair policies normalise by."""

from __future__ import annotations

import numpy as np

from shockwave.policies.gavel.lp import isolated_allocation
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless


class Isolated(Stateless):
    name = "isolated"
    heterogeneity_aware = False

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        return inputs.unflatten(isolated_allocation(inputs))


class Proportional(Stateless):
    name = "proportional"
    heterogeneity_aware = False

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        m = len(inputs.job_ids)
        x = np.array([[g / m for g in inputs.gpus_by_type] for _ in range(m)])
        return inputs.unflatten(x / np.sum(x, axis=1).max())
