"""FIFO (spec §3.4): jobs hold their whole gang in arrival order until they finish; a strict queue, no skipping.

`fifo` keeps each job on the type it was given until it finishes (or switches to a batch size that type cannot
run): a type with room for the gang, drawn at random among those (the reference's FIFO policy RNG, seeded with the
seed). `fifo_perf` re-decides at every recompute,
in arrival order, putting each job on the type where it runs fastest among those with room for its gang.

With `reference_quirks` (`--mechanics gavel`), `fifo` does what the reference Gavel's code does (GAVEL_SPEC §3.4,
§7 item 1): the random draw is made but the job goes to the alphabetically last type still listed as available,
room or not (so V100 is over-committed and the other types idle); the type removed when one fills is the drawn
one's; and a finished job's GPUs go to the queue's head only, if it fits there (before the other jobs' GPUs are
counted).
"""

from __future__ import annotations

import random

from shockwave.core.kept import KeepsState, Rng
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Entry, GavelPolicy, Stateless, pair_of
from shockwave.policies.gavel.packed import sharing_gains


def one_hot(inputs: AllocationInputs, placed: dict[int, str] | dict[Entry, str]) -> Allocation:
    """1 on each placed entry's type, 0 elsewhere and for every other job and pair."""
    entries: list[Entry] = [*inputs.job_ids, *inputs.pairs]
    return {e: {t: 1.0 if placed.get(e) == t else 0.0 for t in inputs.gpu_types} for e in entries}


class Fifo(KeepsState):
    name = "fifo"
    heterogeneity_aware = False
    packs = False
    kept = ("running", "rng")
    running: dict[int, str]
    """The type each job holds until it finishes."""
    rng: Rng

    def __init__(self, seed: int = 0, *, reference_quirks: bool = False) -> None:
        self.running: dict[int, str] = {}
        self.rng = random.Random(seed)
        self.reference_quirks = reference_quirks

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        if self.reference_quirks:
            self._allocate_as_the_reference(inputs)
            return one_hot(inputs, self.running)
        active = set(inputs.job_ids)  # a job that switched to a batch size its type cannot run is placed anew
        self.running = {j: t for j, t in self.running.items() if j in active and inputs.throughputs[j][t] > 0}
        free = dict(zip(inputs.gpu_types, inputs.gpus_by_type, strict=True))
        for j, t in self.running.items():
            free[t] -= inputs.scale_factors[j]
        for j in inputs.job_ids:
            if j in self.running:
                continue
            gang = inputs.scale_factors[j]
            fits = [t for t in inputs.gpu_types if free[t] >= gang and inputs.throughputs[j][t] > 0]
            if not fits:
                break
            gpu_type = fits[self.rng.randrange(len(fits))] if len(fits) > 1 else fits[0]
            self.running[j] = gpu_type
            free[gpu_type] -= gang
        return one_hot(inputs, self.running)

    def forget_finished(self) -> None:
        """Every job has finished: the reference's FIFO, asked over no jobs, drops them all, handing their types to
        no one (the next arrivals are placed by the draw, not on a finished job's type)."""
        self.running = {}

    def _allocate_as_the_reference(self, inputs: AllocationInputs) -> None:
        gangs, rates = inputs.scale_factors, inputs.throughputs
        free = dict(zip(inputs.gpu_types, inputs.gpus_by_type, strict=True))
        for j, t in list(self.running.items()):  # switched to a batch size its type cannot run: queued anew
            if j in rates and rates[j][t] <= 0:
                del self.running[j]
        queue = [j for j in inputs.job_ids if j not in self.running]
        for j in sorted(self.running):
            gpu_type = self.running[j]
            if j in rates:
                free[gpu_type] -= gangs[j]
                continue
            del self.running[j]
            if queue and gangs[queue[0]] <= free[gpu_type] and rates[queue[0]][gpu_type] > 0:
                head = queue.pop(0)
                self.running[head] = gpu_type
                free[gpu_type] -= gangs[head]
        listed = sorted(t for t in inputs.gpu_types if free[t] > 0)
        while queue and listed:
            head = queue.pop(0)
            fits = [i for i, t in enumerate(listed) if free[t] >= gangs[head]]
            if not fits:
                break
            drawn = fits[self.rng.randrange(len(fits))]
            gpu_type = listed[-1]
            if rates[head][gpu_type] <= 0:
                continue
            self.running[head] = gpu_type
            free[gpu_type] -= gangs[head]
            if free[gpu_type] == 0:
                listed.pop(drawn)


class FifoPerf(Stateless):
    name = "fifo_perf"

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        placed, _ = fastest_first(inputs)
        return one_hot(inputs, placed)


def fastest_first(inputs: AllocationInputs) -> tuple[dict[Entry, str], list[int]]:
    """In arrival order, each job on its fastest type with room for its gang, until one finds no room; and the jobs
    still queued after it (the reference drops the one that found no room, and any it could not run anywhere)."""
    free = dict(zip(inputs.gpu_types, inputs.gpus_by_type, strict=True))
    placed: dict[Entry, str] = {}
    queue = list(inputs.job_ids)
    while queue and any(free.values()):
        j = queue.pop(0)
        gang, rates = inputs.scale_factors[j], inputs.throughputs[j]
        fits = [t for t in inputs.gpu_types if free[t] >= gang]
        if not fits:
            break
        fastest = max(fits, key=lambda t: rates[t])  # the first of equals: alphabetical, as the reference
        if rates[fastest] <= 0:
            continue
        placed[j] = fastest
        free[fastest] -= gang
    return placed, queue


class FifoPacked(Stateless):
    """`fifo_perf`, then each job still queued, in order, shares the GPUs of the running job it pairs best with,
    if their combined normalised rate there (sum of co-located / alone) beats 1.5; the first that finds no such
    partner ends the pass, as FIFO lets no job jump the queue."""

    name = "fifo_packed"
    packs = True
    threshold = 1.5

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        placed, queue = fastest_first(inputs)
        for j in queue:
            best, partner = self.threshold, None
            for other, gpu_type in placed.items():
                if not isinstance(other, int) or (pair := pair_of(j, other)) not in inputs.pairs:
                    continue
                gain = sum(sharing_gains(inputs, pair, gpu_type))
                if gain > best:
                    best, partner = gain, other
            if partner is None:
                break
            placed[pair_of(j, partner)] = placed.pop(partner)
        return one_hot(inputs, placed)


class FifoPolicy(GavelPolicy):
    """First come, first served, strictly in order: a job outside the allocation never takes GPUs, even idle ones."""

    def __init__(
        self,
        *,
        min_realloc_interval_s: float = 1000.0,
        seed: int = 0,
        reference_quirks: bool = False,
        round_robin: str = "gavel",
    ) -> None:
        super().__init__(
            Fifo(seed, reference_quirks=reference_quirks),
            min_realloc_interval_s=min_realloc_interval_s,
            seed=seed,
            round_robin=round_robin,
        )

    def may_run(self, priority: float) -> bool:
        return priority > 0


class FifoPerfPolicy(FifoPolicy):
    """First come, first served, each job on its fastest type."""

    def __init__(self, *, min_realloc_interval_s: float = 1000.0, seed: int = 0, round_robin: str = "gavel") -> None:
        GavelPolicy.__init__(
            self, FifoPerf(), min_realloc_interval_s=min_realloc_interval_s, seed=seed, round_robin=round_robin
        )


class FifoPackedPolicy(FifoPolicy):
    """fifo_perf, then queued jobs share GPUs with running ones where the pair gains."""

    def __init__(self, *, min_realloc_interval_s: float = 1000.0, seed: int = 0, round_robin: str = "gavel") -> None:
        GavelPolicy.__init__(
            self, FifoPacked(), min_realloc_interval_s=min_realloc_interval_s, seed=seed, round_robin=round_robin
        )
