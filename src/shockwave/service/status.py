"""The queue as `shockwave status` shows it: one row per job, as `squeue` does."""

from __future__ import annotations

import time

from rich.markup import escape
from rich.table import Table

from shockwave.service.store import Job

STATE_STYLES = {
    "queued": "yellow",
    "running": "cyan",
    "done": "green",
    "cancelled": "dim",
    "failed": "red",
    "invalid": "bold red",
}


def gpus_of(job: Job) -> str:
    """The GPUs it holds ('2x v100'), or those it asks for ('2x any', '1x v100/k80') while it holds none."""
    if job.gpu_type is not None and job.gpus:
        return f"{job.gpus}x {job.gpu_type}"
    if job.spec is None:  # an invalid row: nothing it asks for can be trusted
        return "-"
    return f"{job.spec.gpus}x {'/'.join(job.spec.gpu_types or ['any'])}"


def progress_of(job: Job) -> str:
    share = job.progress_steps / job.total_steps if job.total_steps else 0.0
    return f"{job.progress_steps}/{job.total_steps} ({share:.0%})"


def local_time(unix_s: float | None) -> str:
    return "-" if unix_s is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix_s))


RHO_CAPTION = (
    "rho: finish-time fairness, the job's expected completion time over its time on an equal share of the cluster "
    "(at most 1: no later than on its fair share)"
)
WAITING = ("queued", "running")
"""States with a finish ahead of them (the others' estimate, if any, is stale)."""


def queue_table(jobs: list[Job]) -> Table:
    """One row per job; a tenant column where the service has tenants."""
    table = Table(caption=RHO_CAPTION, caption_justify="left")
    tenanted = any(job.tenant is not None for job in jobs)
    headers = ("id", "job", *(("tenant",) if tenanted else ()), "state", "GPUs", "progress", "est. finish", "rho")
    for header in (*headers, "reason"):
        table.add_column(header, justify="right" if header in ("id", "progress", "rho") else "left")
    for job in jobs:
        table.add_row(
            str(job.id),
            escape(job.name),
            *((escape(job.tenant or "-"),) if tenanted else ()),
            f"[{STATE_STYLES[job.state]}]{job.state}[/]",
            escape(gpus_of(job)),
            progress_of(job),
            local_time(job.estimated_finish_s if job.state in WAITING else None),
            "-" if job.rho is None else f"{job.rho:.2f}",
            escape(job.reason or ""),
        )
    return table
