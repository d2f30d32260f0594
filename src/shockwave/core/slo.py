"""Service-level objectives: a job with an SLO s > 0 should finish within s times its duration of its arrival.

The trace's SLO column (negative: none) is a factor, as in Gavel: the deadline is SLO x duration + arrival
(GAVEL_SPEC.md §2.2 item 7), the duration being the trace's `duration` column (Gavel's generated jobs: their run time
on dedicated V100s) or, where a trace has none (Gavel's own trace formats), the job's isolated run time T_iso.
A job violates its SLO when its JCT exceeds SLO x duration. (The reference's count compares the JCT, a duration,
with the absolute deadline, SLO x duration + arrival, so it misses late jobs that arrived late: spec §7 item 11.
We compare like with like.)
"""

from __future__ import annotations

from shockwave.core.state import JobState


def has_slo(job: JobState) -> bool:
    return job.spec.slo > 0


def slo_duration_s(job: JobState) -> float:
    """The duration the SLO factor multiplies: the trace's, else the job's isolated run time."""
    return float(job.spec.duration) if job.spec.duration > 0 else job.profile.t_isolated


def deadline_s(job: JobState) -> float | None:
    """The job's absolute deadline (None: no SLO)."""
    return job.arrival_s + job.spec.slo * slo_duration_s(job) if has_slo(job) else None


def violates_slo(job: JobState) -> bool:
    """A finished job whose JCT exceeded SLO x duration (False without an SLO)."""
    return has_slo(job) and missed(job.spec.slo, slo_duration_s(job), job.last_finish_s - job.arrival_s)


def missed(slo: float, duration_s: float, jct_s: float) -> bool:
    """Whether a job with SLO factor `slo` and SLO duration `duration_s` that took `jct_s` missed its SLO."""
    return jct_s > slo * duration_s
