"""What a trace asks of a cluster: its mix, its total work and the physical lower bounds on makespan."""

from __future__ import annotations

from collections import Counter
from typing import Any

from shockwave.workload_model.profile import JobProfile
from shockwave.workload_model.trace import TraceJob


def makespan_lower_bound(jobs: list[TraceJob], profiles: list[JobProfile], gpus: int | None) -> float:
    """No schedule can end before the slowest job could finish alone, nor before all work fits on the GPUs."""
    bound = max(job.arrival + p.t_isolated for job, p in zip(jobs, profiles, strict=True))
    if gpus:
        bound = max(bound, gpu_seconds(jobs, profiles) / gpus)
    return bound


def gpu_seconds(jobs: list[TraceJob], profiles: list[JobProfile]) -> float:
    return sum(p.t_isolated * job.scale_factor for job, p in zip(jobs, profiles, strict=True))


def job_records(jobs: list[TraceJob], profiles: list[JobProfile]) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "model": job.model,
            "batch_size": job.batch_size,
            "scale_factor": job.scale_factor,
            "mode": job.mode,
            "arrival_s": job.arrival,
            "total_steps": job.total_steps,
            "epochs": p.epochs,
            "t_isolated_s": p.t_isolated,
            "batch_sizes": sorted(set(p.batch_sizes)),
        }
        for i, (job, p) in enumerate(zip(jobs, profiles, strict=True))
    ]


def summarize(jobs: list[TraceJob], profiles: list[JobProfile], gpus: int | None = None) -> dict[str, Any]:
    work = gpu_seconds(jobs, profiles)
    summary: dict[str, Any] = {
        "jobs": len(jobs),
        "models": dict(sorted(Counter(j.model for j in jobs).items())),
        "scale_factors": {str(k): v for k, v in sorted(Counter(j.scale_factor for j in jobs).items())},
        "modes": dict(sorted(Counter(j.mode for j in jobs).items())),
        "total_gpu_hours": work / 3600,
        "arrival_span_s": [min(j.arrival for j in jobs), max(j.arrival for j in jobs)],
        "t_isolated_range_s": [min(p.t_isolated for p in profiles), max(p.t_isolated for p in profiles)],
        "lower_bound_arrival_plus_t_iso_s": makespan_lower_bound(jobs, profiles, None),
    }
    if gpus:
        summary["gpus"] = gpus
        summary["lower_bound_work_over_gpus_s"] = work / gpus
        summary["makespan_lower_bound_s"] = makespan_lower_bound(jobs, profiles, gpus)
    return summary
