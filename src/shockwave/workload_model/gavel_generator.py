"""Gavel's synthetic workloads (GAVEL_SPEC.md §1.2, §2): the reference simulator's job stream, job for job.

Each job is drawn from one `random.Random(seed + 2)` stream in the reference's order: a scale-factor draw (always
made, even when multi-GPU jobs are off), a duration bucket and an exponent (60·10^u seconds, u in [3, 4) with
probability 0.2, else [1.5, 3)), then templates until one fits the scale factor, then (with priorities) a weight
draw. Arrivals come from `random.Random(seed + 3)`: the first job at 0, then exponential gaps of mean `lam` seconds
(none drawn when `lam` is 0: a static workload). A job's steps are its duration times its gang's V100 throughput,
so the duration is its run time on dedicated V100s; steps are kept fractional, as in the reference (whose own
trace writer rounds them down, moving every finish by up to a step). CPython's Mersenne Twister and `_randbelow`
are the same on every install, so the same seed gives the same stream the reference generates.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.workload_model.catalog import FAMILIES
from shockwave.workload_model.throughput import ThroughputModel, UnknownThroughput
from shockwave.workload_model.trace import TraceJob, generator_header, write_trace

REFERENCE_TYPE = "v100"


@dataclass(frozen=True)
class GavelTemplate:
    family: str
    batch_size: int
    distributed: bool
    needs_data_dir: bool = True

    @property
    def job_type(self) -> str:
        if len(FAMILIES[self.family].template_batch_sizes) == 1:
            return self.family  # Gavel names A3C and CycleGAN without a batch size
        return FAMILIES[self.family].job_type(self.batch_size)


TEMPLATES: tuple[GavelTemplate, ...] = (
    *(GavelTemplate("ResNet-18", bs, True) for bs in (16, 32, 64, 128, 256)),
    *(GavelTemplate("ResNet-50", bs, True) for bs in (16, 32, 64, 128)),
    *(GavelTemplate("Transformer", bs, True) for bs in (16, 32, 64, 128, 256)),
    *(GavelTemplate("LM", bs, True) for bs in (5, 10, 20, 40, 80)),
    *(GavelTemplate("Recommendation", bs, False) for bs in (512, 1024, 2048, 4096, 8192)),
    GavelTemplate("A3C", 4, False, needs_data_dir=False),
    GavelTemplate("CycleGAN", 1, False),
)
"""Gavel's job table in its order: `choice` draws an index into it (spec §1.2)."""


@dataclass(frozen=True)
class GavelWorkload:
    jobs: int
    lam: float
    """Mean inter-arrival time in seconds; 0 puts every job at time 0 (a static workload)."""
    seed: int = 0
    multi_gpu: bool = False
    multi_priority: bool = False
    slos: bool = False
    """Draw each job's SLO factor as the reference's scheduler does when it has prices (spec §2.2 item 7)."""

    def file_name(self) -> str:
        kind = "static" if self.lam == 0 else f"lam{self.lam:g}"
        extras = ("_multigpu" if self.multi_gpu else "") + ("_multipriority" if self.multi_priority else "")
        extras += "_slos" if self.slos else ""
        return f"gavel_{self.jobs}_{kind}_seed{self.seed}{extras}.trace"

    @classmethod
    def of_reference_run(cls, run: Mapping[str, Any]) -> GavelWorkload:
        """The workload of a run of the reference simulator as `reference_results.json` records one (10,000 generated
        jobs unless it says how many: the reference generates until its window is done, and at 4 jobs/h some seeds
        need 6,700; static runs have no inter-arrival time)."""
        static = run["experiment"] == "static_multi_gpu"
        lam = 0.0 if static else float(run["lam_mean_interarrival_s"])
        return cls(int(run.get("jobs", 10_000)), lam, seed=int(run["seed"]), multi_gpu=bool(run["multi_gpu_jobs"]))

    def write(self, throughputs: ThroughputModel, folder: Path) -> Path:
        """The workload's trace in `folder` under `file_name()`, generated unless it is there already."""
        path = folder / self.file_name()
        if not path.exists():
            write_trace(generate_gavel(self, throughputs), path, generator=self.header())
        return path

    def header(self) -> str:
        """The comment line a trace of this workload opens with."""
        return generator_header("gavel", dataclasses.asdict(self))

    @property
    def jobs_per_hour(self) -> float | None:
        """The input job rate (None for a static workload)."""
        return 3600.0 / self.lam if self.lam else None

    def __post_init__(self) -> None:
        if not 1 <= self.jobs <= 1_000_000:
            raise InputError(f"--jobs must be between 1 and 1000000, got {self.jobs}")
        if not (math.isfinite(self.lam) and 0 <= self.lam <= 365 * 24 * 3600):
            raise InputError(f"--lam must be a mean inter-arrival time >= 0 seconds and at most a year, got {self.lam}")


def scale_factor(rng: random.Random) -> int:
    """Philly's gang sizes: P(1, 2, 4, 8) = (0.7, 0.1, 0.15, 0.05); bounds inclusive, checked in this order."""
    r = rng.uniform(0, 1)
    if 0.7 <= r <= 0.8:
        return 2
    if 0.8 <= r <= 0.95:
        return 4
    if r >= 0.95:
        return 8
    return 1


def duration_s(rng: random.Random) -> float:
    if rng.random() >= 0.8:
        return 60 * (10 ** rng.uniform(3, 4))
    return 60 * (10 ** rng.uniform(1.5, 3))


def _job(rng: random.Random, workload: GavelWorkload, throughputs: ThroughputModel, arrival: float) -> TraceJob:
    gang = scale_factor(rng)
    duration = duration_s(rng)
    if not workload.multi_gpu:
        gang = 1
    template = rng.choice(TEMPLATES)
    while gang > 1 and not template.distributed:
        template = rng.choice(TEMPLATES)
    weight = 1.0
    if workload.multi_priority and rng.uniform(0, 1) <= 0.2:
        weight = 5.0
    family = FAMILIES[template.family]
    try:
        rate = throughputs.throughput(family.name, template.batch_size, gang, REFERENCE_TYPE)
    except UnknownThroughput as exc:
        raise InputError(f"cannot generate a Gavel workload: {exc}") from None
    return TraceJob(
        job_type=template.job_type,
        command=family.launch_command(template.batch_size),
        working_directory=family.working_directory,
        num_steps_arg=family.num_steps_arg,
        needs_data_dir=template.needs_data_dir,
        total_steps=duration * rate,  # not rounded: the reference's generated jobs keep the fraction
        scale_factor=gang,
        mode="static",
        priority_weight=weight,
        slo=-1.0,
        duration=int(duration),
        arrival=arrival,
    )


def arrivals(workload: GavelWorkload) -> Iterator[float]:
    rng = random.Random(workload.seed + 3)
    now = 0.0
    while True:
        yield now
        if workload.lam > 0:
            now += -math.log(1.0 - rng.random()) / (1.0 / workload.lam)


def generate_gavel(workload: GavelWorkload, throughputs: ThroughputModel) -> list[TraceJob]:
    rng = random.Random(workload.seed + 2)
    times = arrivals(workload)
    jobs = [_job(rng, workload, throughputs, next(times)) for _ in range(workload.jobs)]
    return with_slos(jobs, workload.seed) if workload.slos else jobs


def slo_factor(rng: random.Random) -> float:
    """The reference's SLO draw: 1.2, 2 or 10 times the job's duration, each about a third of the time."""
    r = rng.uniform(0, 1)
    if r < 0.33:
        return 1.2
    if r < 0.67:
        return 2.0
    return 10.0


def with_slos(jobs: list[TraceJob], seed: int) -> list[TraceJob]:
    """The jobs with SLO factors drawn, job by job in arrival order, from the reference's SLO stream (seed + 6),
    which its scheduler draws from as each job arrives."""
    rng = random.Random(seed + 6)
    return [dataclasses.replace(job, slo=slo_factor(rng)) for job in jobs]
