"""`shockwave profile-workloads`: how fast each built-in workload trains here, per batch size and gang size, as a
Gavel-format throughput table that `--throughputs` reads (so a simulation can model this machine).

Each point is one lease of the real job (same command, same job client, same data-parallel code as under
`shockwave run`), on this machine without Ray; its rate is steps per second after the first step (start-up and
checkpoint loading excluded), as the runtime measures it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from shockwave.core.errors import InputError
from shockwave.training import lease as client
from shockwave.training.local import TRAIN, run_lease
from shockwave.workload_model.catalog import FAMILIES, WORKLOAD_FAMILIES, ModelFamily
from shockwave.workload_model.throughput import DEFAULT_GPU_TYPE, TableThroughputs

START_UP_ALLOWANCE_S = 60.0
"""Lease time on top of the measuring window for the processes to start (importing torch on a busy machine); the
lease is cut to the window once training starts."""


@dataclass(frozen=True)
class Point:
    family: str
    batch_size: int
    gang: int


def reachable(fam: ModelFamily, batch_size: int) -> list[int]:
    """Batch sizes a job starting at `batch_size` can train at: its doublings, capped at the family's maximum (what
    GNS walks through; Accordion uses the first and the last)."""
    sizes = [batch_size]
    while sizes[-1] < fam.max_batch_size:
        sizes.append(min(2 * sizes[-1], fam.max_batch_size))
    return sizes


def batch_sizes(fam: ModelFamily) -> list[int]:
    """Every batch size a job of the family can train at, from any template batch size."""
    return sorted({size for start in fam.template_batch_sizes for size in reachable(fam, start)})


def plan(families: Iterable[str], sizes: list[int] | None, gangs: list[int]) -> list[Point]:
    points = []
    for name in families:
        if name not in WORKLOAD_FAMILIES:
            raise InputError(f"no built-in workload for {name!r}; choose from {', '.join(WORKLOAD_FAMILIES)}")
        fam = FAMILIES[name]
        for size in sizes or batch_sizes(fam):
            if not fam.min_batch_size <= size <= fam.max_batch_size:
                raise InputError(
                    f"batch size {size} is outside {name}'s range {fam.min_batch_size}-{fam.max_batch_size}"
                )
            points.extend(Point(name, size, gang) for gang in gangs if gang == 1 or fam.distributable)
    return points


def measure(point: Point, seconds: float, folder: Path) -> float:
    terms = client.Terms(
        job_id=0,
        deadline=time.time() + START_UP_ALLOWANCE_S + seconds,
        max_steps=2**62,
        total_steps=2**62,
        batch_size=point.batch_size,
        checkpoint="",
    )
    command = [*TRAIN, "--family", point.family, "--mode", "static"]
    lease = run_lease(command, terms, point.gang, folder, timeout=START_UP_ALLOWANCE_S + seconds + 120, window=seconds)
    rate = lease.rate()
    if any(lease.codes) or rate is None:
        raise InputError(
            f"{point.family} at batch size {point.batch_size} on {point.gang} worker(s) did not train "
            f"(exit codes {lease.codes}); its output ends with:\n{lease.output[-800:]}"
        )
    return rate


def profile(points: list[Point], seconds: float) -> Iterator[tuple[Point, float]]:
    """Each point's rate, measured one after the other (never two at once: they would slow each other down).

    A point whose workers fail is measured once more before the error stands: on a loaded 2-core machine a gang's
    worker now and then aborts while torch.distributed tears down (exit -6, no output), and the retry trains."""
    with tempfile.TemporaryDirectory(prefix="shockwave-profile-") as scratch:
        for index, point in enumerate(points):
            try:
                rate = measure(point, seconds, Path(scratch) / str(index))
            except InputError:
                rate = measure(point, seconds, Path(scratch) / f"{index}-again")
            yield point, rate


def table_of(rates: dict[Point, float]) -> TableThroughputs:
    entries = {(DEFAULT_GPU_TYPE, p.family, p.batch_size, p.gang): rate for p, rate in rates.items()}
    return TableThroughputs(entries, "profiled on this machine")
