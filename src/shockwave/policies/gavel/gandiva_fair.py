"""Gandiva-Fair, proportional share (spec §5): every job the same time fraction min(1, G/m), whatever its gang,
spread over the types in proportion to their sizes."""

from __future__ import annotations

from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless


class GandivaFair(Stateless):
    name = "gandiva_fair"
    heterogeneity_aware = False

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        share = inputs.gpus / len(inputs.job_ids)
        fraction = share / max(share, 1)
        row = [fraction * (g / inputs.gpus) for g in inputs.gpus_by_type]
        return inputs.unflatten([row for _ in inputs.job_ids])
