"""Gandiva-Fair, proportional share (spec §5): every job the same time fraction min(1, G/m), whatever its gang."""

from __future__ import annotations

from shockwave.policies.gavel.mechanism import AllocationInputs, Stateless


class GandivaFair(Stateless):
    name = "gandiva_fair"

    def allocate(self, inputs: AllocationInputs) -> dict[int, float]:
        share = inputs.gpus / len(inputs.job_ids)
        return {j: share / max(share, 1) for j in inputs.job_ids}
