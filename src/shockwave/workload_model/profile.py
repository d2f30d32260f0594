"""Per-job profile: epochs, planned batch size and duration of each epoch, and the isolated runtime T_iso.

T_iso ("run alone on its own gang") is the denominator of finish-time fairness and the oracle Shockwave's predictor
starts from. As in the reference, epoch time is (D / bs) / throughput without rounding iterations up (spec §1.5a).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.io.jsonfile import read_json_object
from shockwave.io.text import BATCH_SIZES_LIMIT
from shockwave.workload_model.adaptation import profile_batch_sizes
from shockwave.workload_model.catalog import family
from shockwave.workload_model.job import Job
from shockwave.workload_model.throughput import (
    DEFAULT_GPU_TYPE,
    ThroughputModel,
    UnknownThroughput,
    load_throughputs,
    rate_or_zero,
)
from shockwave.workload_model.trace import read_trace


@dataclass(frozen=True)
class JobProfile:
    """Runs of epochs at one batch size: (batch size, epochs, seconds per epoch). A static job of a Gavel-style
    workload trains for tens of thousands of epochs at one batch size, so the per-epoch view is built only for the
    policies that read it (Shockwave's predictor), not for every job of every simulation."""

    epochs: int
    runs: tuple[tuple[int, int, float], ...]
    last_epoch_share: float = 1.0
    """The part of its last epoch the job trains (its steps past whole epochs over an epoch's; 1: all of it)."""

    @cached_property
    def batch_sizes(self) -> tuple[int, ...]:
        return tuple(itertools.chain.from_iterable(itertools.repeat(bs, n) for bs, n, _ in self.runs))

    @cached_property
    def epoch_durations(self) -> tuple[float, ...]:
        return tuple(itertools.chain.from_iterable(itertools.repeat(d, n) for _, n, d in self.runs))

    @cached_property
    def t_isolated(self) -> float:
        # Summed epoch by epoch, as the reference does: n * d differs from it in the last bits.
        total = 0.0
        for _, n, d in self.runs:
            total = repeated_sum(total, d, n)
        return total

    @cached_property
    def least_seconds(self) -> float:
        """Time alone without the part of the last epoch the job never trains: a bound T_iso (whole epochs, the
        reference's, which rho keeps) is not, by up to an epoch per job."""
        return self.t_isolated - (1.0 - self.last_epoch_share) * self.runs[-1][2]


def repeated_sum(total: float, value: float, times: int) -> float:
    """total + value + value + ... (`times` float additions, each rounded as Python rounds it), bit for bit, in a few
    steps per binade instead of one per addition (a Gavel job can have millions of epochs). While the sum stays in
    one binade [2^e, 2^(e+1)) every addition adds the same multiple of its spacing u, unless value / u ends in .5
    (round-half-even then alternates): those additions are made one by one."""
    while times > 0:
        if not (math.isfinite(total) and math.isfinite(value)) or total < value or total <= 0:
            total, times = total + value, times - 1
            continue
        spacing = math.ulp(total)
        tie = (value / spacing) % 1.0 == 0.5  # round-half-even: the increment alternates with total's last bit
        step = (total + value) - total
        if step == 0 and not tie:
            return total  # each addition rounds back to total
        top = 2.0 ** math.frexp(total)[1]
        safe = int((top - spacing - total - value) // step) - 1 if step > 0 else 0
        if tie or safe < 1:
            total, times = total + value, times - 1
            continue
        jump = min(times, safe)
        total, times = total + jump * step, times - jump
    return total


def isolated_time(job: Job, profile: JobProfile, throughputs: ThroughputModel, cluster: ClusterSpec) -> float:
    """T_iso as finish-time fairness reads it: the profile's on a cluster of one type; on several, every epoch at
    the job's equal share of each type (steps/s sum_t (n_t / G) x rate_t, Gavel's proportional share; 0 where the
    gang does not fit a pool or the model does not know the job there), so a rho means the same on any mix."""
    if len(cluster.pools) == 1:
        return profile.t_isolated
    return seconds_at(
        job,
        profile,
        lambda bs: cluster.equal_share_rate(
            job.scale_factor, lambda gpu_type: rate_or_zero(throughputs, job.model, bs, job.scale_factor, gpu_type)
        ),
    )


def seconds_at(job: Job, profile: JobProfile, rate: Callable[[int], float]) -> float:
    """The profile's epochs at their batch sizes, each at `rate(batch size)` steps/s (inf where a rate is 0)."""
    dataset = family(job.model).dataset_size
    total = 0.0
    for bs, epochs, _ in profile.runs:
        steps_per_s = rate(bs)
        if steps_per_s <= 0:
            return math.inf
        total += epochs * dataset / bs / steps_per_s
    return total


def least_seconds_at(job: Job, profile: JobProfile, rate: Callable[[int], float]) -> float:
    """`seconds_at` without the part of the last epoch the job never trains (`JobProfile.least_seconds`)."""
    whole = seconds_at(job, profile, rate)
    if not math.isfinite(whole):
        return whole
    last = profile.runs[-1][0]
    return whole - (1.0 - profile.last_epoch_share) * family(job.model).dataset_size / last / rate(last)


def epochs_of(job: Job) -> int:
    return math.ceil(job.total_steps / family(job.model).iterations_per_epoch(job.batch_size))


def _last_epoch_share(job: Job, epochs: int) -> float:
    """The part of its last epoch the job trains: its steps past `epochs - 1` whole epochs, over an epoch's."""
    return min(1.0, job.total_steps / family(job.model).iterations_per_epoch(job.batch_size) - (epochs - 1))


def build_profile(
    job: Job, throughputs: ThroughputModel, batch_sizes: list[int] | None = None, *, gpu_type: str = DEFAULT_GPU_TYPE
) -> JobProfile:
    """The planned profile, or the one of `batch_sizes` (per epoch) when the job's real schedule is known, timed
    on `gpu_type`."""
    fam = family(job.model)
    epochs = epochs_of(job)
    if batch_sizes is not None:
        runs = [(bs, len(list(group))) for bs, group in itertools.groupby(batch_sizes)]
    elif job.mode == "static":
        runs = [(job.batch_size, epochs)]
    else:
        planned = profile_batch_sizes(fam, job.mode, job.batch_size, job.scale_factor, epochs)
        runs = [(bs, len(list(group))) for bs, group in itertools.groupby(planned)]
    rate: dict[int, float] = {}
    for bs, _ in runs:
        try:
            rate[bs] = throughputs.throughput(fam.name, bs, job.scale_factor, gpu_type)
        except UnknownThroughput as exc:
            raise InputError(f"cannot profile {job.job_type} ({job.mode}): {exc}") from None
    return JobProfile(
        epochs=epochs,
        runs=tuple((bs, n, fam.dataset_size / bs / rate[bs]) for bs, n in runs),
        last_epoch_share=_last_epoch_share(job, epochs),
    )


def schedule_from_switches(job: Job, switches: list[list[int]]) -> list[int]:
    """Per-epoch batch sizes of a job that switched to batch size b at epoch e for each [e, b] in `switches`."""
    schedule = [job.batch_size] * epochs_of(job)
    for epoch, batch_size in switches:
        schedule[epoch:] = [batch_size] * (len(schedule) - epoch)
    return schedule


def read_schedules(path: Path, jobs: list[Job]) -> dict[int, list[int]]:
    """Observed per-epoch batch sizes ({"job id": [bs, ...]}, as `shockwave run` writes them), checked against the
    trace: every epoch of the job is covered by a positive batch size."""
    raw = read_json_object(
        path, "batch-size schedule", 'an object {"<job id>": [batch size per epoch, ...]}', BATCH_SIZES_LIMIT
    )
    schedules: dict[int, list[int]] = {}
    for key, value in raw.items():
        if not (key.isascii() and key.isdigit() and len(key) <= 18) or int(key) >= len(jobs):
            raise InputError(f"{key!r} is not a job id of the trace (0..{len(jobs) - 1})", path=path, field=key)
        epochs = epochs_of(jobs[int(key)])
        valid = isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in value)
        if not valid or len(value) != epochs:
            raise InputError(f"expected a list of {epochs} positive batch sizes (one per epoch)", path=path, field=key)
        schedules[int(key)] = value
    return schedules


def load_workload(
    trace: str | Path, throughputs: str | Path | None, schedules: Path | None = None
) -> tuple[ThroughputModel, list[Job], list[JobProfile]]:
    """A validated trace, the throughput model it is read against, and every job's profile (from the observed
    batch-size `schedules` where given)."""
    tm = load_throughputs(throughputs)
    return (tm, *read_workload(trace, tm, schedules))


def read_workload(
    trace: str | Path, tm: ThroughputModel, schedules: Path | None = None
) -> tuple[list[Job], list[JobProfile]]:
    """The trace's jobs, validated against the throughput model `tm`, and every job's profile (from the observed
    batch-size `schedules` where given)."""
    jobs = [line.job() for line in read_trace(trace, tm)]
    observed = read_schedules(schedules, jobs) if schedules is not None else {}
    return jobs, [build_profile(job, tm, observed.get(i)) for i, job in enumerate(jobs)]
