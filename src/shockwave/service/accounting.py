"""`shockwave accounting`: what each tenant of a service received, in the spirit of Slurm's `sreport`: GPU-seconds
per tenant and GPU type, its jobs by state, their queueing delay, and its share of the GPU-seconds against the share
its weight entitles it to.

Read from the service's folder, while it serves or after: the queue (`service.sqlite`: each job's tenant, state and
submission) and the journal (`journal.sqlite`: each job's GPU time per type, its leases' starts, and the tenants
file the service shares the cluster by). A job's GPU-seconds are its wall seconds on each type times its gang; its
queueing delay is from its arrival to its first lease (a job not started yet has waited until the journal's last
round, and counts as waiting). `contended_share` is the tenant's share of equal-share progress over the rounds
every tenant had jobs waiting, as the scheduler's tenant sharing counts it (GPU-seconds weighted by what a GPU type
is worth to the job, so that an A100 is not a T4): the share a weight promises is measured there.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.runtime.journal import JobRecord, Journal
from shockwave.service.serve import JOURNAL_FILE, ServiceSettings
from shockwave.service.store import STORE_FILE, Job, Store
from shockwave.workload_model.tenants import read_tenants

NO_TENANT = "-"
"""The row of jobs submitted to a service without tenants."""


@dataclass
class TenantAccount:
    tenant: str
    weight: float | None = None
    jobs: Counter[str] = field(default_factory=Counter)
    gpu_seconds_by_type: Counter[str] = field(default_factory=Counter)
    delays: list[float] = field(default_factory=list)
    waiting: int = 0
    contended_progress: float | None = None

    @property
    def gpu_seconds(self) -> float:
        return float(sum(self.gpu_seconds_by_type.values()))


def accounts(folder: Path, since: float | None = None) -> dict[str, Any]:
    """Each tenant's account in the service of `folder`, of the jobs submitted at or after `since` (Unix time)."""
    for name in (STORE_FILE, JOURNAL_FILE):
        if not (folder / name).exists():
            raise InputError("no service has run here: `shockwave serve --out DIR` writes it", path=folder / name)
    journal = Journal(folder / JOURNAL_FILE)
    settings = journal.settings_as(ServiceSettings)
    records = journal.jobs()
    run_ids = {taken.store_id: i for i, taken in enumerate(settings.service_jobs)}
    weights = _weights(settings.tenants)
    book = {name: TenantAccount(name, weight) for name, weight in weights.items()}
    for job in Store(folder).jobs():
        if since is not None and job.submitted_s < since:
            continue
        name = job.tenant or NO_TENANT
        account = book.setdefault(name, TenantAccount(name, weights.get(name)))
        account.jobs[job.state] += 1
        run_id = run_ids.get(job.id)
        record = records.get(run_id) if run_id is not None else None
        if record is not None and job.spec is not None:
            _charge(account, job, record, settings.service_jobs[run_id].arrival)  # type: ignore[index]
        if job.state == "queued" and (record is None or not record.starts):
            account.waiting += 1
    for name, progress in _contended(journal).items():
        if name in book:
            book[name].contended_progress = progress
    return _summary(list(book.values()), since)


def _charge(account: TenantAccount, job: Job, record: JobRecord, arrival: float) -> None:
    assert job.spec is not None
    for gpu_type, seconds in record.run_seconds_by_type.items():
        account.gpu_seconds_by_type[gpu_type] += seconds * job.spec.gpus
    if record.starts:
        account.delays.append(max(record.starts[0] - arrival, 0.0))


def _weights(path: str | None) -> dict[str, float]:
    """Each tenant's weight as the service's tenants file says now (none where it has no file)."""
    if path is None:
        return {}
    return {name: tenant.weight for name, tenant in read_tenants(path).tenants.items()}


def _contended(journal: Journal) -> dict[str, float]:
    """The tenant sharing's equal-share progress per tenant in contended rounds, from the scheduler's snapshot (empty
    where it keeps none: a service without tenants, or before its first round)."""
    try:
        snapshot = journal.snapshot()
        state = json.loads(snapshot) if isinstance(snapshot, str) else None
    except (InputError, ValueError):
        return {}
    kept = state.get("state", {}).get("contended_progress") if isinstance(state, dict) else None
    if not isinstance(kept, dict):
        return {}
    return {
        str(name): float(value)
        for name, value in kept.items()
        if isinstance(value, int | float) and math.isfinite(value) and value >= 0
    }


def _summary(book: list[TenantAccount], since: float | None) -> dict[str, Any]:
    total = sum(a.gpu_seconds for a in book)
    weights = sum(a.weight for a in book if a.weight is not None)
    contended = sum(a.contended_progress or 0.0 for a in book)
    rows = []
    for a in book:
        rows.append(
            {
                "tenant": a.tenant,
                "weight": a.weight,
                "entitled_share": None if a.weight is None or not weights else a.weight / weights,
                "gpu_seconds": a.gpu_seconds,
                "gpu_seconds_by_type": dict(sorted(a.gpu_seconds_by_type.items())),
                "share": a.gpu_seconds / total if total else 0.0,
                "contended_share": (a.contended_progress or 0.0) / contended if contended else None,
                "jobs": sum(a.jobs.values()),
                "jobs_by_state": dict(sorted(a.jobs.items())),
                "waiting": a.waiting,
                "mean_queue_delay_s": sum(a.delays) / len(a.delays) if a.delays else None,
                "max_queue_delay_s": max(a.delays) if a.delays else None,
            }
        )
    return {"since": since, "gpu_seconds": total, "tenants": rows}
