"""Gandiva's packing, as Gavel models it (spec §3.5): when the jobs ask for more GPUs than the cluster has, pair
them at random (equal gangs only) and give every pair and every lone job the same share of each type, as
`isolated` shares among jobs; with room for every job, no pairs and an isolated share each.

A pair persists while both jobs are active and sharing pays: the sum over both jobs and over *every* type of
co-located rate / rate alone is at least 1 (and no co-located rate is 0) -- the reference's loose criterion, since
two types' worth of 0.6 each already pass. Pairs the throughput table does not list are never formed.
"""

from __future__ import annotations

import random

from shockwave.core.kept import KeepsState, Rng
from shockwave.policies.gavel.lp import isolated_shares
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Entry, members, pair_of
from shockwave.policies.gavel.packed import sharing_gains


class Gandiva(KeepsState):
    name = "gandiva"
    heterogeneity_aware = True  # a packing policy: the reference keeps its type order
    packs = True
    kept = ("pairs", "rng")
    pairs: list[tuple[int, int]]
    """Pairs formed at earlier recomputes, in the order they were formed."""
    rng: Rng

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)  # the reference's Gandiva RNG is seeded with the seed itself
        self.pairs = []

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        self.pairs = [p for p in self.pairs if p in inputs.pairs and _packing_gain(inputs, p) >= 1.0]
        if sum(inputs.scale_factors.values()) <= inputs.gpus:
            shared: list[Entry] = list(inputs.job_ids)
        else:
            self._pair_up(inputs)
            paired = {j for pair in self.pairs for j in pair}
            shared = [*self.pairs, *(j for j in inputs.job_ids if j not in paired)]
        x = isolated_shares(inputs.gpus_by_type, [inputs.scale_factors[members(e)[0]] for e in shared])
        allocation: Allocation = {e: dict.fromkeys(inputs.gpu_types, 0.0) for e in [*inputs.job_ids, *inputs.pairs]}
        for entry, row in zip(shared, x, strict=True):
            allocation[entry] = {t: float(share) for t, share in zip(inputs.gpu_types, row, strict=True)}
        return allocation

    def _pair_up(self, inputs: AllocationInputs) -> None:
        """Draw two unpaired jobs at a time, as many times as there were unpaired jobs; equal gangs that the table
        lists together become a pair."""
        paired = {j for pair in self.pairs for j in pair}
        unpaired = [j for j in inputs.job_ids if j not in paired]
        for _ in range(len(unpaired)):
            if len(unpaired) < 2:
                break
            first, second = self.rng.sample(unpaired, 2)
            pair = pair_of(first, second)
            if inputs.scale_factors[first] != inputs.scale_factors[second] or pair not in inputs.pairs:
                continue
            unpaired.remove(first)
            unpaired.remove(second)
            self.pairs.append(pair)


def _packing_gain(inputs: AllocationInputs, pair: tuple[int, int]) -> float:
    """Sum over types and both jobs of co-located rate / rate alone; 0 if either job cannot share on any type."""
    gains = [g for gpu_type in inputs.pairs[pair] for g in sharing_gains(inputs, pair, gpu_type)]
    return sum(gains) if all(gains) else 0.0
