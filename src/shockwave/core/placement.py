"""Put a round plan's gangs on GPUs: keep a job where it ran when possible (no restart), else take free GPUs of the
type its assignment names."""

from __future__ import annotations

from shockwave.cluster import ClusterSpec, Pool
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
    for size in sorted({a.gpus for a in ordered}, reverse=True):
        group = [a for a in ordered if a.gpus == size]
        for assignment in group:
            old = _held(assignment, previous)
            if old is not None and len(old) == size and taken.isdisjoint(old) and all(g in gpu_ids for g in old):
                placed[assignment] = old
                taken.update(old)
        for assignment in group:
            if assignment in placed:
                continue
            gpus = _consolidated(size, taken, pool, gpu_ids) if consolidate else None
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
    return placed


def _held(assignment: Assignment, previous: dict[int, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The GPUs the assignment's jobs all held last round, if they held the same ones."""
    held = {previous.get(job) for job in assignment.jobs}
    return held.pop() if len(held) == 1 else None


def _consolidated(size: int, taken: set[int], pool: Pool, gpu_ids: range) -> tuple[int, ...] | None:
    per = pool.gpus_per_server
    best: list[int] | None = None
    for first in range(gpu_ids.start, gpu_ids.stop, per):
        free = [g for g in range(first, first + per) if g not in taken]
        if len(free) >= size and (best is None or len(free) < len(best)):
            best = free
    return tuple(best[:size]) if best is not None and size <= per else None
