"""Sia's workload as rigid jobs: each job at the GPU count and global batch size its line asks for, so every policy
of this project (which keeps a job's gang) runs on Sia's workloads.

A job at global batch M on r GPUs of type t runs on the packed placement (whole nodes of t, then the rest), each
GPU at per-GPU batch b with k gradient-accumulation steps: local = ceil(M / r), k = ceil(local / b_max) - 1 (at
least 1 on one GPU above the application's smallest batch), b = ceil(local / (k + 1)), b_max the largest per-GPU
batch measured at that placement (the artifact's rule for a fixed batch). A step takes step + k (step - sync)
seconds times the application's calibration slowdown. Its work is the application's total progress, which a step
at the effective batch M' = r b (k + 1) advances by the profile's gain in the step's epoch, so the job needs
sum_e (progress of epoch e) / gain_e(M') steps: its total steps count them at the line's batch, and a type whose
M' differs runs proportionally more or fewer of them per second. The job's "epochs" here are its steps over the
application's implied epoch (total progress / epochs x smallest batch samples), as every job of this project.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.workload_model.catalog import ModelFamily, register_imported
from shockwave.workload_model.goodput import Training
from shockwave.workload_model.job import Job
from shockwave.workload_model.profile import JobProfile, build_profile
from shockwave.workload_model.sia.goodput import SiaGoodput, split
from shockwave.workload_model.sia.profiles import Application, load_profiles, packed, require_folder
from shockwave.workload_model.sia.workload import SiaJob, read_workload
from shockwave.workload_model.throughput import UnknownThroughput


@dataclass
class SiaThroughputs:
    """Steps per second of a rigid job of an imported application, by GPU type (the ThroughputModel protocol)."""

    applications: dict[str, Application]
    gpus_per_node: dict[str, int]
    name: str = "sia profiles"
    _ends: dict[tuple[str, int], tuple[float, ...]] = field(default_factory=dict, repr=False)
    _placed: dict[tuple[str, int, tuple[int, ...], str], float | None] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def goodput(self) -> SiaGoodput:
        """The same applications' goodput-adaptive jobs."""
        return SiaGoodput(self.applications, self.gpus_per_node)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        common = set.intersection(*(set(app.types) for app in self.applications.values()))
        return tuple(t for t in self.gpus_per_node if t in common)

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = "") -> float:
        """Steps per second of the gang on the packed placement (whole nodes, then the rest; cached by `placed`)."""
        app = self.applications.get(model)
        if app is None or gpu_type not in app.types or gpu_type not in self.gpus_per_node:
            raise UnknownThroughput(f"no Sia profile for {model} on {gpu_type!r}")
        rate = self.placed(model, batch_size, packed(gpus, self.gpus_per_node[gpu_type]), gpu_type)
        if rate is None:
            raise UnknownThroughput(f"{model} at batch {batch_size} on {gpus} {gpu_type} GPUs is outside its profile")
        return rate

    def placed(self, model: str, batch_size: int, per_server: tuple[int, ...], gpu_type: str) -> float | None:
        """Steps (at the job's batch) per second of a gang with these GPUs on each server (the TimesPlacements
        protocol): a step at the effective batch does proportionally more or less of the job's work."""
        key = (model, batch_size, per_server, gpu_type)
        if key not in self._placed:
            app = self.applications.get(model)
            step = (
                None if app is None or gpu_type not in app.types else rigid_step(app, gpu_type, per_server, batch_size)
            )
            if step is None:
                self._placed[key] = None
            else:
                seconds, effective = step
                self._placed[key] = self.steps(model, batch_size) / self.steps(model, effective) / seconds
        return self._placed[key]

    def steps(self, model: str, batch: int) -> float:
        """Steps at a global batch that do the application's whole progress."""
        return self.epoch_ends(model, batch)[-1]

    def epoch_ends(self, model: str, batch_size: int) -> tuple[float, ...]:
        """`epoch_ends` of an application at a global batch, worked out once (every job of a workload asks at one
        of a few batch sizes; the KnowsEpochs protocol)."""
        key = (model, batch_size)
        if key not in self._ends:
            self._ends[key] = epoch_ends(self.applications[model], batch_size)
        return self._ends[key]


def rigid_step(app: Application, gpu_type: str, placement: tuple[int, ...], batch: int) -> tuple[float, int] | None:
    """(seconds per step with the slowdown, effective global batch) of `batch` on a placement (GPUs per server) of
    a type, or None where the profile has no measurement."""
    profile = app.types[gpu_type]
    gpus = sum(placement)
    largest = profile.max_local_bsz(placement)
    if largest <= 0:
        return None
    # A fixed batch splits like a chosen one, its per-GPU share rounded up to whole samples first.
    per_gpu, accumulation = split(math.ceil(batch / gpus - 1e-8) * gpus, gpus, largest, app.init_batch)
    timed = profile.step(placement, per_gpu)
    if timed is None:
        return None
    training = Training(gpus, per_gpu, accumulation, 0)
    return SiaGoodput.step_seconds(app, timed, training), training.batch


def epoch_ends(app: Application, batch: int) -> tuple[float, ...]:
    """Steps at global batch `batch` done when each of the application's epochs ends (the last: its whole work)."""
    ends, steps, before = [], 0.0, 0.0
    for epoch in range(app.max_epochs):
        end = app.epoch_end(epoch)
        steps += (end - before) / app.gain(batch, epoch)
        ends.append(steps)
        before = end
    return tuple(ends)


def family_of(app: Application) -> ModelFamily:
    """The application as a model family: its samples per epoch implied by the profile."""
    dataset = max(1, round(app.total_progress / app.max_epochs * app.init_batch))
    return ModelFamily(
        name=app.name,
        dataset="Sia profile",
        dataset_size=dataset,
        template_batch_sizes=(),
        min_batch_size=app.init_batch,
        max_batch_size=app.max_batch,
        distributable=True,
        command="",
        working_directory="",
        num_steps_arg="",
        generated=False,
    )


def read_sia_workload(
    workload: str | Path, profiles: str | Path, cluster: ClusterSpec, *, elastic: bool = False
) -> tuple[list[Job], list[JobProfile], SiaThroughputs]:
    """The workload's jobs by arrival (a job's id is its place in that order), their profiles as rigid jobs (each
    timed on the first of the cluster's types it runs on) and the throughput model of their applications on the
    cluster's types. `elastic`: the jobs are goodput-adaptive (`goodput.py`), their work the application's total
    progress, but for lines of category `rigid`; else all rigid. (`scale-gpus` lines are read as adaptive.)"""
    sia_jobs = sorted(read_workload(workload), key=lambda job: job.arrival_s)
    _require_profiles(sia_jobs, Path(workload), Path(profiles))
    apps = load_profiles(profiles, {job.application for job in sia_jobs})
    for app in apps.values():
        missing = [t for t in cluster.types if t not in app.types]
        if missing:
            raise InputError(
                f"application {app.name!r} has no profile for GPU type {', '.join(missing)} "
                f"(profiled: {', '.join(sorted(app.types))})",
                path=Path(profiles) / app.name,
            )
    tm = SiaThroughputs(apps, {pool.gpu_type: pool.gpus_per_server for pool in cluster.pools})
    runs_on = [_first_type(job, Path(workload), tm) for job in sia_jobs]
    for app in apps.values():
        register_imported(family_of(app))
    jobs = []
    for job in sia_jobs:
        app = apps[job.application]
        steps = tm.steps(app.name, job.batch_size)
        jobs.append(
            Job(app.name, job.batch_size, job.replicas, steps, job.arrival_s, restart_s=app.restart_s, continuous=True)
        )
    profiled = [build_profile(job, tm, gpu_type=t) for job, t in zip(jobs, runs_on, strict=True)]
    if elastic:
        jobs = [
            job if line.category == "rigid" else replace(job, total_steps=apps[job.model].total_progress, elastic=True)
            for job, line in zip(jobs, sia_jobs, strict=True)
        ]
    return jobs, profiled, tm


def _require_profiles(jobs: list[SiaJob], workload: Path, profiles: Path) -> None:
    """Every job's application has a profile folder, or the job's line is named."""
    require_folder(profiles)
    for job in jobs:
        if not (profiles / job.application).is_dir():
            raise InputError(
                f"no profile folder {job.application!r} under {profiles}",
                path=workload,
                line=job.line,
                field="application",
            )


def _first_type(job: SiaJob, workload: Path, tm: SiaThroughputs) -> str:
    """The first of the cluster's types the job runs on at its gang and batch, or an error naming its line."""
    for gpu_type in tm.gpus_per_node:
        try:
            if tm.throughput(job.application, job.batch_size, job.replicas, gpu_type) > 0:
                return gpu_type
        except UnknownThroughput:
            continue
    raise InputError(
        f"{job.application} at batch {job.batch_size} on {job.replicas} GPUs is outside its profile on every GPU type",
        path=workload,
        line=job.line,
        field="batch_size",
    )
