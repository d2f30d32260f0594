"""Per-job profile: epochs, planned batch size and duration of each epoch, and the isolated runtime T_iso.

T_iso ("run alone on its own gang") is the denominator of finish-time fairness and the oracle Shockwave's predictor
starts from. As in the reference, epoch time is (D / bs) / throughput without rounding iterations up (spec §1.5a).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from shockwave.errors import InputError
from shockwave.workload.adaptation import profile_batch_sizes
from shockwave.workload.catalog import family
from shockwave.workload.throughput import ThroughputModel, UnknownThroughput, load_throughputs
from shockwave.workload.trace import TraceJob, read_trace


@dataclass(frozen=True)
class JobProfile:
    epochs: int
    batch_sizes: tuple[int, ...]
    epoch_durations: tuple[float, ...]

    @property
    def t_isolated(self) -> float:
        return sum(self.epoch_durations)


def build_profile(job: TraceJob, throughputs: ThroughputModel) -> JobProfile:
    fam = family(job.model)
    bs0 = job.batch_size
    epochs = math.ceil(job.total_steps / fam.iterations_per_epoch(bs0))
    batch_sizes = profile_batch_sizes(fam, job.mode, bs0, job.scale_factor, epochs)
    rate: dict[int, float] = {}
    for bs in set(batch_sizes):
        try:
            rate[bs] = throughputs.throughput(fam.name, bs, job.scale_factor)
        except UnknownThroughput as exc:
            raise InputError(f"cannot profile {job.job_type} ({job.mode}): {exc}") from None
    durations = tuple(fam.dataset_size / bs / rate[bs] for bs in batch_sizes)
    return JobProfile(epochs=epochs, batch_sizes=tuple(batch_sizes), epoch_durations=durations)


def load_workload(
    trace: str | Path, throughputs: str | Path | None
) -> tuple[ThroughputModel, list[TraceJob], list[JobProfile]]:
    """A validated trace, the throughput model it is read against, and every job's profile."""
    tm = load_throughputs(throughputs)
    jobs = read_trace(trace, tm)
    return tm, jobs, [build_profile(job, tm) for job in jobs]
