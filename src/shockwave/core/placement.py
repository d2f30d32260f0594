"""Put the chosen gangs on GPUs: keep a job where it ran when possible (no restart), else take free GPUs."""

from __future__ import annotations

from shockwave.cluster import ClusterSpec


def place(
    chosen: list[tuple[int, int]],
    previous: dict[int, tuple[int, ...]],
    cluster: ClusterSpec,
    *,
    consolidate: bool = False,
) -> dict[int, tuple[int, ...]]:
    """Map (job id, gang size) pairs, in priority order, to GPU ids.

    Larger gangs are placed first. A job keeps its previous GPUs if none of them is taken yet; otherwise it takes
    the lowest free GPU ids (the reference's server-by-server scan) or, with `consolidate`, the fullest server that
    still fits the whole gang, so gangs spread over as few servers as possible.
    """
    ordered = sorted(chosen, key=lambda c: -c[1])
    taken: set[int] = set()
    placement: dict[int, tuple[int, ...]] = {}
    cursor = 0
    for size in sorted({size for _, size in ordered}, reverse=True):
        group = [job for job, s in ordered if s == size]
        for job in group:
            old = previous.get(job)
            if old is not None and len(old) == size and taken.isdisjoint(old):
                placement[job] = old
                taken.update(old)
        for job in group:
            if job in placement:
                continue
            gpus = _consolidated(size, taken, cluster) if consolidate else None
            if gpus is None:
                picked: list[int] = []
                while len(picked) < size and cursor < cluster.gpus:
                    if cursor not in taken:
                        picked.append(cursor)
                    cursor += 1
                gpus = tuple(picked)
            if len(gpus) != size:
                raise RuntimeError(f"policy chose more GPUs than the cluster has (job {job} needs {size})")
            placement[job] = gpus
            taken.update(gpus)
    return placement


def _consolidated(size: int, taken: set[int], cluster: ClusterSpec) -> tuple[int, ...] | None:
    per = cluster.gpus_per_server
    best: list[int] | None = None
    for server in range(cluster.servers):
        free = [g for g in range(server * per, (server + 1) * per) if g not in taken]
        if len(free) >= size and (best is None or len(free) < len(best)):
            best = free
    return tuple(best[:size]) if best is not None and size <= per else None
