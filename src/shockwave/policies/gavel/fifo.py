"""FIFO (spec §5): jobs hold their full gang in arrival order until they finish; strict queue, no skipping."""

from __future__ import annotations

from typing import Any

from shockwave.policies.gavel.mechanism import AllocationInputs, GavelPolicy


class Fifo:
    name = "fifo"

    def __init__(self) -> None:
        self.running: list[int] = []

    def allocate(self, inputs: AllocationInputs) -> dict[int, float]:
        active = set(inputs.job_ids)
        self.running = [j for j in self.running if j in active]
        free = inputs.gpus - sum(inputs.scale_factors[j] for j in self.running)
        for j in inputs.job_ids:
            if j in self.running:
                continue
            if inputs.scale_factors[j] > free:
                break
            self.running.append(j)
            free -= inputs.scale_factors[j]
        return {j: 1.0 if j in self.running else 0.0 for j in inputs.job_ids}

    def state_dict(self) -> dict[str, Any]:
        return {"running": list(self.running)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.running = [int(j) for j in state["running"]]


class FifoPolicy(GavelPolicy):
    """A strict queue: a job outside the allocation never takes GPUs, even idle ones."""

    def __init__(self, *, min_realloc_interval_s: float = 1000.0) -> None:
        super().__init__(Fifo(), min_realloc_interval_s=min_realloc_interval_s)

    def may_run(self, priority: float) -> bool:
        return priority > 0
