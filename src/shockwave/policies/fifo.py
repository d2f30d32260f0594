"""FIFO (spec §5): jobs hold their full gang in arrival order until they finish; strict queue, no skipping."""

from __future__ import annotations

from typing import Any

from shockwave.core.mechanism import AllocationInputs


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
