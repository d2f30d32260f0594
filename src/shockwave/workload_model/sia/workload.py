"""Sia's workload CSV: one job per line, columns `name, time, application, num_replicas, batch_size` and optionally
`category`.

`time` is the submission time in seconds from the trace's start; `num_replicas` the GPUs the job asked for and
`batch_size` its global batch size (samples per optimizer step), both what a rigid job runs at; `category`
(adaptive, scale-gpus or rigid; adaptive when absent, as in every released workload) says what Sia may change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from shockwave.core.errors import InputError
from shockwave.workload_model.sia.table import rows

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
APPLICATION = re.compile(r"[A-Za-z0-9_.-]+")
CATEGORIES = ("adaptive", "scale-gpus", "rigid")
MAX_REPLICAS = 4096
MAX_BATCH = 10**7


@dataclass(frozen=True)
class SiaJob:
    name: str
    arrival_s: float
    application: str
    replicas: int
    batch_size: int
    category: str
    line: int
    """Where it was read (for errors about it found later, e.g. an application with no profile)."""


def read_workload(path: str | Path) -> list[SiaJob]:
    """The jobs of a workload file, in file order; an InputError names the file, line and column of a bad value."""
    path = Path(path)
    jobs: list[SiaJob] = []
    seen: dict[str, int] = {}
    for row in rows(path, "Sia workload file", COLUMNS, optional=("category",)):
        name = row.text("name")
        if name in seen:
            raise InputError(f"job {name!r} is also on line {seen[name]}", path=path, line=row.line, field="name")
        seen[name] = row.line
        replicas = row.whole("num_replicas")
        batch = row.whole("batch_size")
        if replicas > MAX_REPLICAS:
            raise InputError(
                f"at most {MAX_REPLICAS} GPUs, got {replicas}", path=path, line=row.line, field="num_replicas"
            )
        if batch > MAX_BATCH:
            raise InputError(f"at most {MAX_BATCH:,}, got {batch}", path=path, line=row.line, field="batch_size")
        category = row.values.get("category", "").strip() or "adaptive"
        if category not in CATEGORIES:
            raise InputError(
                f"expected one of {', '.join(CATEGORIES)}, got {category!r}", path=path, line=row.line, field="category"
            )
        application = row.text("application")
        if not APPLICATION.fullmatch(application) or application in (".", ".."):
            raise InputError(
                f"an application is named by letters, digits, '_', '.' and '-' (a folder of the profiles), "
                f"got {application!r}",
                path=path,
                line=row.line,
                field="application",
            )
        jobs.append(SiaJob(name, row.number("time"), application, replicas, batch, category, row.line))
    return jobs
