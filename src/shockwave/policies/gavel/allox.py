"""AlloX (spec §5, alpha = 0.2): minimise total completion time by matching jobs to (GPU, queue position) slots.

Cost of putting job i at position k (from the back) of a GPU's queue: k x (remaining_i / thr_i) + waiting time_i.
The Hungarian method picks the matching; the head of each GPU's queue gets x = 1/sf. Jobs already holding a full
allocation keep it, and allocations persist across recomputes, as in the reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from shockwave.core.policy import int_ids, json_ids
from shockwave.policies.gavel.mechanism import AllocationInputs

ALPHA = 0.2


class AlloX:
    name = "allox"

    def __init__(self, alpha: float = ALPHA) -> None:
        self.alpha = alpha
        self.previous: dict[int, float] = {}

    def allocate(self, inputs: AllocationInputs) -> dict[int, float]:
        held = [j for j in inputs.job_ids if self.previous.get(j) == 1.0]
        waiting = [j for j in inputs.job_ids if self.previous.get(j) != 1.0]
        slots = inputs.gpus - len(held)
        waiting.sort(key=lambda j: -inputs.times_since_start[j])
        waiting = waiting[: max(int(self.alpha * len(waiting)), slots)]
        allocation = {j: self.previous.get(j, 0.0) for j in inputs.job_ids}
        if waiting and slots > 0:
            base = np.array([[self._processing_time(inputs, j)] * slots for j in waiting])
            cost = np.hstack([(k + 1) * base for k in range(len(waiting))])
            cost += np.array([[inputs.times_since_start[j]] for j in waiting])
            rows, cols = linear_sum_assignment(cost)
            queues: dict[int, list[tuple[int, int]]] = {}
            for row, col in zip(rows, cols, strict=True):
                queues.setdefault(col % slots, []).append((col // slots, waiting[row]))
            for queue in queues.values():
                head = max(queue)[1]  # largest multiplier = runs first
                allocation[head] = 1.0 / inputs.scale_factors[head]
        self.previous = dict(allocation)
        return allocation

    def state_dict(self) -> dict[str, Any]:
        return {"previous": json_ids(self.previous)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.previous = int_ids(state["previous"], float)

    @staticmethod
    def _processing_time(inputs: AllocationInputs, job: int) -> float:
        thr = inputs.throughputs[job] or 1e-10
        return inputs.remaining_steps[job] / thr
