"""Put a round plan's gangs on GPUs: keep a job where it ran when possible (no restart), else take free GPUs of the
type its assignment names."""

from __future__ import annotations

import numpy as np

from shockwave.core.cluster import ClusterSpec, Pool
from shockwave.core.plan import Assignment, RoundPlan


def place(
    plan: RoundPlan,
    previous: dict[int, tuple[int, ...]],
    cluster: ClusterSpec,
    *,
    consolidate: bool = False,
) -> dict[int, tuple[int, ...]]:
    """Each planned job's GPU ids (the jobs of a pair get the same ones).

    Per GPU type, larger gangs are placed first. An assignment keeps its previous GPUs if its jobs held exactly
    those and none of them is taken yet; otherwise it takes the pool's lowest free GPU ids (the reference's
    server-by-server scan) or, with `consolidate`, the fullest server that still fits the whole gang, so gangs
    spread over as few servers as possible.
    """
    placement: dict[int, tuple[int, ...]] = {}
    for pool in cluster.pools:
        mine = [a for a in plan.assignments if a.gpu_type == pool.gpu_type]
        gpu_ids = cluster.gpu_ids(pool.gpu_type)
        for assignment, gpus in _place_pool(mine, previous, pool, gpu_ids, consolidate).items():
            for job in assignment.jobs:
                placement[job] = gpus
    return placement


def _place_pool(
    assignments: list[Assignment],
    previous: dict[int, tuple[int, ...]],
    pool: Pool,
    gpu_ids: range,
    consolidate: bool,
) -> dict[Assignment, tuple[int, ...]]:
    ordered = sorted(assignments, key=lambda a: -a.gpus)
    taken: set[int] = set()
    placed: dict[Assignment, tuple[int, ...]] = {}
    cursor = gpu_ids.start
    servers = _Servers(pool, gpu_ids) if consolidate else None
    for size in sorted({a.gpus for a in ordered}, reverse=True):
        group = [a for a in ordered if a.gpus == size]
        for assignment in group:
            old = _held(assignment, previous)
            kept = old is not None and len(old) == size and gpu_ids.start <= min(old) and max(old) < gpu_ids.stop
            if kept and taken.isdisjoint(old):
                placed[assignment] = old
                taken.update(old)
                if servers is not None:
                    servers.take(old)
        for assignment in group:
            if assignment in placed:
                continue
            gpus = servers.fullest_fitting(size, taken) if servers is not None else None
            if gpus is None:
                picked: list[int] = []
                while len(picked) < size and cursor < gpu_ids.stop:
                    if cursor not in taken:
                        picked.append(cursor)
                    cursor += 1
                gpus = tuple(picked)
            if len(gpus) != size:
                raise RuntimeError(
                    f"policy chose more {pool.gpu_type} GPUs than the cluster has (jobs {assignment.jobs} need {size})"
                )
            placed[assignment] = gpus
            taken.update(gpus)
            if servers is not None:
                servers.take(gpus)
    return placed


def _held(assignment: Assignment, previous: dict[int, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The GPUs the assignment's jobs all held last round, if they held the same ones."""
    if len(assignment.jobs) == 1:
        return previous.get(assignment.jobs[0])
    held = {previous.get(job) for job in assignment.jobs}
    return held.pop() if len(held) == 1 else None


class _Servers:
    """Free GPUs per server of one pool while a round is placed, so finding the fullest server that fits a gang
    costs one pass over an array instead of a scan of every GPU (thousands of gangs on thousands of GPUs)."""

    def __init__(self, pool: Pool, gpu_ids: range) -> None:
        self.per = pool.gpus_per_server
        self.start = gpu_ids.start
        self.free = np.full(len(gpu_ids) // self.per, self.per)  # a pool holds whole servers (ClusterSpec checks)

    def take(self, gpus: tuple[int, ...]) -> None:
        for g in gpus:
            self.free[(g - self.start) // self.per] -= 1

    def fullest_fitting(self, size: int, taken: set[int]) -> tuple[int, ...] | None:
        """The first `size` free GPUs of the server with the fewest free GPUs that still holds the gang (ties: the
        lowest server); None when the gang is larger than a server or no server holds it."""
        if size > self.per:
            return None
        fits = np.flatnonzero(self.free >= size)
        if not len(fits):
            return None
        server = int(fits[np.argmin(self.free[fits])])
        first = self.start + server * self.per
        return tuple([g for g in range(first, first + self.per) if g not in taken][:size])
