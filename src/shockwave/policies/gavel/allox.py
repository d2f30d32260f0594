"""AlloX (spec §3.6): minimise total completion time by matching jobs to (GPU, queue position) slots.

Cost of putting job i at position k (from the back) of a GPU's queue: k x (remaining_i / thr_i on that GPU's type)
+ waiting time_i. The Hungarian method picks the matching; the head of each GPU's queue gets that type, x = 1/sf.
Jobs already holding a full allocation keep it, and allocations persist across recomputes, as in the reference.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from shockwave.core.kept import KeepsState
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs

ALPHA = 0.2


class AlloX(KeepsState):
    name = "allox"
    heterogeneity_aware = True
    packs = False
    kept = ("previous",)
    previous: dict[int, dict[str, float]]
    """The last allocation: jobs holding a full one keep it."""

    def __init__(self, alpha: float = ALPHA) -> None:
        self.alpha = alpha
        self.previous = {}

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        types = inputs.gpu_types
        held = [j for j in inputs.job_ids if sum(self.previous.get(j, {}).values()) == 1.0]
        waiting = [j for j in inputs.job_ids if j not in held]
        slot_types = [
            t
            for t, gpus in zip(types, inputs.gpus_by_type, strict=True)
            for _ in range(gpus - sum(self.previous[j].get(t, 0.0) == 1.0 for j in held))
        ]
        slots = len(slot_types)
        waiting.sort(key=lambda j: -inputs.times_since_start[j])
        waiting = waiting[: max(int(self.alpha * len(waiting)), slots)]
        allocation = {j: dict(self.previous.get(j, dict.fromkeys(types, 0.0))) for j in inputs.job_ids}
        if waiting and slots > 0:
            base = np.array([[self._processing_time(inputs, j, t) for t in slot_types] for j in waiting])
            cost = np.hstack([(k + 1) * base for k in range(len(waiting))])
            cost += np.array([[inputs.times_since_start[j]] for j in waiting])
            rows, cols = linear_sum_assignment(cost)
            queues: dict[int, list[tuple[int, int]]] = {}
            for row, col in zip(rows, cols, strict=True):
                queues.setdefault(col % slots, []).append((col // slots, waiting[row]))
            for gpu, queue in queues.items():
                head = max(queue)[1]  # largest multiplier = runs first
                allocation[head] = dict.fromkeys(types, 0.0) | {slot_types[gpu]: 1.0 / inputs.scale_factors[head]}
        self.previous = {j: dict(x) for j, x in allocation.items()}
        return allocation

    @staticmethod
    def _processing_time(inputs: AllocationInputs, job: int, gpu_type: str) -> float:
        thr = inputs.throughputs[job][gpu_type] or 1e-10
        return inputs.remaining_steps[job] / thr
