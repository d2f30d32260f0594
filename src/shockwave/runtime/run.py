"""`shockwave run`: a trace replayed on a real cluster, from files and flags to DIR/results.json.

The trace is scaled by --time-scale X (arrivals and step counts divided by X) and written to DIR/trace.scaled.trace,
so `shockwave simulate` can replay exactly what ran, with DIR/measured_throughputs.json (a Gavel table of the rates
the jobs really reached, per GPU type and batch size), DIR/batch_sizes.json (the batch size each job really trained
each epoch at, for `simulate --batch-sizes`), DIR/measurements.json (each job's own rates, lease start-ups and
switches, each round's length, for `simulate --measurements`) and DIR/planned_throughputs.json (the table it planned
with). Results are the `simulate --json` object, with per-job status, preemptions, restarts, batch-size switches,
the GPU type of each lease and measured throughput; T_iso (for finish-time fairness) is computed from the measured
rates and the batch sizes the job really used.

The cluster may hold several GPU types (`--cluster v100:2,k80:2`), for policies that plan onto every type: on Ray
each type is a custom resource (`shockwave.runtime.ray_backend.type_resource`) and a gang's GPUs are all of the type
its plan names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field

from shockwave.assembly.inputs import assemble
from shockwave.core.cluster import MAX_GPUS, ClusterSpec
from shockwave.core.errors import InputError, require_extra
from shockwave.core.loop import timeline
from shockwave.core.slo import missed
from shockwave.io.atomic import ensure_writable, write_atomically
from shockwave.io.lock import FolderLock
from shockwave.io.private import private_folder, private_subfolder
from shockwave.io.text import THROUGHPUT_LIMIT, read_bytes
from shockwave.policies.registry import policy_info
from shockwave.results.metrics import (
    JobOutcome,
    cost_fields,
    finish_time_fairness,
    slo_fields,
    summarize_run,
    utilization_by_type,
)
from shockwave.results.model import Result
from shockwave.results.provenance import provenance, with_command
from shockwave.runtime.backend import Backend
from shockwave.runtime.folder import (
    CHECKPOINTS,
    Digests,
    KeptName,
    is_builtin,
    keep_inputs,
    read_inputs,
    require_resumable,
    require_same_program,
)
from shockwave.runtime.journal import LAYOUT, MAX_SECONDS, JobRecord, Journal, row
from shockwave.runtime.scheduler import RuntimeScheduler, RuntimeSettings, calibrated_rates
from shockwave.runtime.snapshot import Snapshot
from shockwave.workload_model.job import Job
from shockwave.workload_model.measurements import MeasuredJob, Measurements
from shockwave.workload_model.prices import Prices
from shockwave.workload_model.profile import build_profile, isolated_time, schedule_from_switches
from shockwave.workload_model.throughput import (
    DEFAULT_GPU_TYPE,
    TableThroughputs,
    ThroughputModel,
    knows,
    rate_or_zero,
)
from shockwave.workload_model.trace import TraceJob, read_trace, require_gangs_fit, write_trace

log = logging.getLogger(__name__)
MEASUREMENTS = "measurements.json"
"""Each job's own rates, start-ups, switches and T_iso and each round's length, in a run's folder
(`shockwave.workload_model.measurements`)."""
PLANNED_THROUGHPUTS = "planned_throughputs.json"
"""A copy of the throughput table the run planned with, in its folder (none: the built-in model)."""


@dataclass(frozen=True)
class RunRequest:
    trace: Path
    policy: str
    gpus: int
    """GPUs of the default type; with `cluster`, the cluster's total (taken from it)."""
    out: Path
    address: str | None = None
    round_seconds: float = 10.0
    time_scale: float = 1.0
    journal: Path | None = None
    resume: bool = False
    throughputs: Path | None = None
    config: Path | None = None
    placement: str = "PACK"
    max_restarts: int = 3
    command: str | None = None
    """The job command ({family}, {batch_size}, {mode} and {job_id} filled in); None: the built-in workload's."""
    cluster: str | None = None
    """The GPUs by type as `--cluster` writes them (`v100:2,k80:2`); None: `gpus` GPUs of the default type."""
    realloc_seconds: float | None = None
    """Gavel-style policies recompute their allocation at most this often (default: once per round; the
    simulator's reference mechanics throttle to 1000 simulated seconds instead)."""
    policy_params: tuple[str, ...] = ()
    """The policy's own parameters as KEY=VALUE (`--policy-param`), as `simulate` and `serve` take them."""

    @property
    def journal_path(self) -> Path:
        return self.journal or self.out / "journal.sqlite"

    @property
    def cluster_spec(self) -> ClusterSpec:
        return ClusterSpec.parse(self.cluster) if self.cluster is not None else ClusterSpec.of(self.gpus)


def scale_trace(jobs: list[TraceJob], time_scale: float) -> list[TraceJob]:
    """Arrivals and work divided by `time_scale` (at least one step per job)."""
    return [
        dataclasses.replace(
            job,
            arrival=job.arrival / time_scale,
            duration=max(1, round(job.duration / time_scale)) if job.duration > 0 else 0,  # 0: none stated
            total_steps=max(1, math.ceil(job.total_steps / time_scale)),
        )
        for job in jobs
    ]


def replay_arguments(out: Path, result: dict[str, Any]) -> list[str]:
    """`shockwave simulate` arguments that replay a finished run: its scaled trace, measured rates, the batch sizes
    its jobs really used, its rounds as they really were, each job's own rates, lease start-ups and switches and each
    round's length (DIR/measurements.json), and the mean start-up and switch by gang size for those the run never
    made.

    A real round lasts `round_seconds` plus the time its preempted jobs took to leave (the round's clock starts once
    their GPUs are free), the wait for jobs' last exits and the decision itself, and kept jobs train all along; a
    started job loses its start-up, which is measured from the round's decision. So a replayed round lasts as long as
    the run's round of that index (measurements.json), and past those (or where the run has none: it waited idle for
    jobs, or was resumed) the run's mean round, never the configured length: with it, a restart cost close to it
    leaves gangs that alternate (max-min fairness on two 4-GPU jobs) almost no progress, a livelock the real run did
    not have. `--realloc-seconds` is scaled for the mean round (with measured rounds and an interval of a round or
    less, the fidelity runs' case, it is 0: recompute at every decision)."""
    configured = result["round_seconds"]
    decisions = [row[0] for row in result.get("timeline", [])]
    idle = result.get("idle_s", 0.0)  # waits for jobs between rounds: no round lasted them
    round_s = (decisions[-1] - decisions[0] - idle) / (len(decisions) - 1) if len(decisions) > 1 else configured
    interval = result.get("realloc_seconds") or configured
    # A run whose interval is at most a round recomputed at every decision that needed it (its rounds are never
    # shorter than configured); the replay must too, and the mean round itself is a threshold that sums of rounds
    # miss by a rounding error half the time. A longer interval spans the same number of replayed rounds.
    realloc = 0.0 if interval <= configured else interval * round_s / configured
    gangs = [job.scale_factor for job in read_trace(out / "trace.scaled.trace")]
    by_gang = _mean_by_gang(result["jobs"], gangs, "startup_s")
    switch_by_gang = _mean_by_gang(result["jobs"], gangs, "switch_s")
    restart = result.get("restart_overhead_s") or 0.0
    policy = result.get("policy_spec", result["policy"])  # a file's class: its file and class
    cluster = ("--cluster", result["cluster"]) if result.get("cluster") else ("--gpus", str(result["gpus"]))
    return [
        *("--trace", str(out / "trace.scaled.trace"), *_replay_rates(out)),
        *("--batch-sizes", str(out / "batch_sizes.json"), "--policy", policy, *cluster),
        *("--round-seconds", f"{round_s:.3f}", "--realloc-seconds", f"{realloc:.3f}", "--mechanics", "corrected"),
        *("--restart-seconds", f"{restart:.2f}", *(("--restart-seconds-by-gang", by_gang) if by_gang else ())),
        *(("--switch-seconds-by-gang", switch_by_gang) if switch_by_gang else ()),
    ]


def _replay_rates(out: Path) -> tuple[str, ...]:
    """What a replay's jobs train at and are weighed by: each job's measured rates (`--measurements`); and the
    table the run's scheduler planned with (DIR/planned_throughputs.json; none: the built-in model) for what else it
    took from its table (profiles, forecasts, finish-time targets), so a near tie is decided from what the run knew.
    A folder from before measurements.json: the measured rates pooled by kind of job, for both. Profiled from the
    measured table instead, two long-regime Shockwave runs were replayed +4.5% in makespan and +8.5% in average JCT;
    from the run's table, +0.0% and -2.8%."""
    if not (out / MEASUREMENTS).exists():
        return ("--throughputs", str(out / "measured_throughputs.json"))
    planned = out / PLANNED_THROUGHPUTS
    return (*(("--throughputs", str(planned)) if planned.exists() else ()), "--measurements", str(out / MEASUREMENTS))


def _round_lengths(decisions: list[float], idle_s: float, resumed: bool) -> tuple[float, ...]:
    """Each round's length, from its decision to the next; none (a replay takes the mean round) where the cluster
    ever waited idle for jobs (a wait lies between two decisions, in no round), where the run was resumed (its
    downtime too, after a stop's empty round the replay does not have), or where a stop cut a round short."""
    lengths = tuple(later - earlier for earlier, later in itertools.pairwise(decisions))
    if idle_s > 0 or resumed or any(length < MIN_ROUND_SECONDS for length in lengths):
        return ()
    return lengths


def _mean_by_gang(jobs: list[dict[str, Any]], gangs: list[int], key: str) -> str:
    """'GANG:SECONDS,...': the mean of the jobs' `key` lists (seconds) by gang size, for the gangs that have any."""
    seconds: dict[int, list[float]] = {}
    for job in jobs:
        seconds.setdefault(gangs[job["id"]], []).extend(job.get(key, []))
    return ",".join(f"{gang}:{fmean(s):.2f}" for gang, s in sorted(seconds.items()) if s)


T = TypeVar("T")
Rates = dict[tuple[str, str, int, int], float]
"""(GPU type, model, batch size, gang) -> steps/s: a throughput table's keys."""


def _measured_rates(jobs: list[Job], records: dict[int, JobRecord]) -> Rates:
    """Steps/s by (GPU type, model, batch size, gang): all steps the jobs that ran like that trained, over all the
    seconds they took (lease by lease, start-up excluded), so a replay at that rate trains as the run did.
    Leases are short and each starts slower than it goes on, so the smoothed rate the scheduler plans with (which
    leans to the last lease) overstated one 2-GPU job's by 20% in a fidelity run. A key no job trained alone at (a
    pair's lease, a journal from before `trained`) keeps the jobs' mean smoothed rate."""
    totals: dict[tuple[str, str, int, int], list[float]] = {}
    smoothed: dict[tuple[str, str, int, int], list[float]] = {}
    for job_id, record in records.items():
        job = jobs[job_id]
        for gpu_type, bs, rate in _by_type_and_size(record.rates):
            smoothed.setdefault((gpu_type, job.model, bs, job.scale_factor), []).append(rate)
        for gpu_type, bs, (steps, seconds) in _trained(record):
            total = totals.setdefault((gpu_type, job.model, bs, job.scale_factor), [0.0, 0.0])
            total[0] += steps
            total[1] += seconds
    rates = {key: fmean(values) for key, values in smoothed.items()}
    rates.update({key: steps / seconds for key, (steps, seconds) in totals.items()})
    return rates


def _measurements(
    records: Mapping[int, JobRecord], jobs: list[Job], run: Measured, types: Collection[str], rounds: tuple[float, ...]
) -> Measurements:
    """What a replay reads of the run (`--measurements`): each job's own steps/s by GPU type and batch size (its
    steps there over its seconds, start-ups excluded, as `_measured_rates` pools them by kind of job), and where it
    has none (a type or batch size it never trained at alone, a job that never ran alone) the run's rate for its kind
    if some job of that kind was measured (on any type: the others are calibrated from it), so a replay never weighs
    a measured rate against a table's; its leases' start-ups and switches; a finished job's T_iso; the `rounds`."""
    own = {
        job_id: {(gpu_type, bs): steps / seconds for gpu_type, bs, (steps, seconds) in _trained(record)}
        for job_id, record in sorted(records.items())
    }
    kinds = {(jobs[job_id].model, bs, jobs[job_id].scale_factor) for job_id, rates in own.items() for _, bs in rates}
    isolated = {outcome.id: outcome.t_isolated_s for outcome in run.outcomes}
    measured: dict[int, MeasuredJob] = {}
    for job_id, record in sorted(records.items()):
        job, rates = jobs[job_id], dict(own[job_id])
        for bs in sorted({job.batch_size, *run.schedules.get(job_id, ())}):
            for gpu_type in types:
                kind = (gpu_type, job.model, bs, job.scale_factor)
                if kind[1:] in kinds and kind in run.rates:
                    rates.setdefault((gpu_type, bs), run.rates[kind])
        by_type: dict[str, dict[int, float]] = {}
        for (gpu_type, bs), rate in rates.items():
            by_type.setdefault(gpu_type, {})[bs] = rate
        t_isolated = isolated.get(job_id)
        known = t_isolated is not None and 0 < t_isolated <= MAX_SECONDS  # inf: a rate of 0 somewhere
        startups = tuple(max(0.0, seconds) for seconds in record.startups)  # clocks of two machines can disagree
        switches = tuple(max(0.0, seconds) for seconds in record.switch_seconds)
        measured[job_id] = MeasuredJob(by_type, startups, t_isolated if known else None, switches)
    return Measurements(measured, rounds)


def _trained(record: JobRecord) -> Iterator[tuple[str, int, tuple[float, float]]]:
    """(GPU type, batch size, (steps, seconds)) the job trained alone, where it trained at all."""
    for gpu_type, bs, (steps, seconds) in _by_type_and_size(record.trained):
        if steps > 0 and seconds > 0:
            yield gpu_type, bs, (steps, seconds)


def _by_type_and_size(nested: Mapping[str, Mapping[str, T]]) -> Iterator[tuple[str, int, T]]:
    """(GPU type, batch size, value) of a record's type -> batch size -> value map."""
    for gpu_type, by_size in nested.items():
        for bs, value in by_size.items():
            yield gpu_type, int(bs), value


def _completed_rates(
    measured: Rates, used: set[tuple[str, int, int]], types: list[str], tm: ThroughputModel, quiet: bool = False
) -> Rates:
    """The measured rates, and for every (model, batch size, gang) the run used, a rate on each of `types`: one not
    measured there follows a type it was measured on by the throughput model's ratio between the two (the run's
    scale, not the table's), else it is the model's own."""
    rates = dict(measured)
    for key in sorted(used | {k[1:] for k in measured}):
        seen = {t: measured[(t, *key)] for t in types if (t, *key) in measured}
        if not seen:
            (log.debug if quiet else log.warning)(
                "no rate measured for %s at batch size %d on %d GPU(s): the table uses the model's", *key
            )
        known = {t: rate for t in types if (rate := rate_or_zero(tm, *key, t)) > 0}
        for gpu_type, rate in calibrated_rates(tm, key, known, seen, types).items():
            rates.setdefault((gpu_type, *key), rate)
    return rates


class _Measured:
    """Measured rates (completed across types) first, the run's throughput model for anything else."""

    def __init__(self, measured: Rates, fallback: ThroughputModel) -> None:
        self.measured, self.fallback, self.name = measured, fallback, "measured"

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> float:
        if (gpu_type, model, batch_size, gpus) in self.measured:
            return self.measured[(gpu_type, model, batch_size, gpus)]
        return self.fallback.throughput(model, batch_size, gpus, gpu_type)


MIN_ROUND_SECONDS, MAX_ROUND_SECONDS = 0.01, 86_400.0
"""Rounds last seconds to minutes (Gavel's 6, Shockwave's 2; tests' a tenth of a second): a round of more than a day,
or of less than a hundredth of a second, is a typo (a journal's 1e300 started Ray and waited forever; 1e-311 plans
rounds that never end anything)."""
MAX_TIME_SCALE = 1e6
MAX_RESTARTS = 1000
Placement = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]
RoundSeconds = Annotated[float, Field(ge=MIN_ROUND_SECONDS, le=MAX_ROUND_SECONDS)]


class RunSettings(BaseModel):
    """What a run's journal records of it, written at its start and read back (strictly) on `--resume`: the data a
    resumed run repeats, and the policy and job command it is only compared with."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

    layout: Literal[2] = LAYOUT
    policy: Annotated[str, Field(min_length=1, max_length=4096)]
    command: Annotated[str, Field(max_length=65_536)] | None = None
    """None: the built-in workload."""
    trace: KeptName
    """The trace's copy in the folder (`inputs/trace...`)."""
    throughputs: KeptName | None = None
    config: KeptName | None = None
    inputs: Digests
    gpus: Annotated[int, Field(ge=1, le=MAX_GPUS)]
    cluster: Annotated[str, Field(max_length=4096)] | None = None
    round_seconds: RoundSeconds
    time_scale: Annotated[float, Field(gt=0, le=MAX_TIME_SCALE)] = 1.0
    placement: Placement = "PACK"
    max_restarts: Annotated[int, Field(ge=0, le=MAX_RESTARTS)] = 3
    realloc_seconds: Annotated[float, Field(ge=0, le=1e9)] | None = None
    policy_params: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list)
    """`--policy-param`s, a file one names as its copy in the folder."""
    start_wall: Annotated[float, Field(ge=-1e12, le=1e12)] | None = None
    """The wall time the run started at (its elapsed seconds count from here, across resumes)."""
    rounds: Annotated[int, Field(ge=0)] = 0
    idle_s: Annotated[float, Field(ge=0, le=MAX_SECONDS)] = 0.0
    """Seconds the cluster waited idle for jobs between two rounds' decisions."""


def require_round_seconds(seconds: float) -> None:
    if not (math.isfinite(seconds) and MIN_ROUND_SECONDS <= seconds <= MAX_ROUND_SECONDS):
        raise InputError(
            f"--round-seconds must be a number from {MIN_ROUND_SECONDS:g} to {MAX_ROUND_SECONDS:g}, got {seconds}"
        )


def _check_flags(request: RunRequest) -> None:
    """The invocation's numbers, before anything is created or started."""
    if not (math.isfinite(request.time_scale) and 0 < request.time_scale <= MAX_TIME_SCALE):
        raise InputError(f"--time-scale must be a number > 0 and <= {MAX_TIME_SCALE:g}, got {request.time_scale}")
    require_round_seconds(request.round_seconds)
    realloc = request.realloc_seconds
    if realloc is not None and not (math.isfinite(realloc) and 0 <= realloc <= 1e9):
        raise InputError(f"--realloc-seconds must be a finite number >= 0, got {realloc}")
    if not 0 <= request.max_restarts <= MAX_RESTARTS:
        raise InputError(f"--max-restarts must be 0 to {MAX_RESTARTS}, got {request.max_restarts}")
    if request.placement not in get_args(Placement):
        raise InputError(f"--placement must be one of {', '.join(get_args(Placement))}, got {request.placement!r}")


def _started(request: RunRequest, policy: str) -> tuple[RunRequest, RunSettings]:
    """A new run: its inputs copied into its folder (it reads the copies from now on) and its settings."""
    folder = request.journal_path.parent
    files = {"trace": request.trace, "throughputs": request.throughputs, "config": request.config}
    names, params, digests = keep_inputs(folder, files, request.policy_params)
    settings = RunSettings(
        policy=policy,
        command=None if is_builtin(request.command) else request.command,
        **names,
        inputs=digests,
        gpus=request.gpus,
        cluster=request.cluster,
        round_seconds=request.round_seconds,
        time_scale=request.time_scale,
        placement=request.placement,  # type: ignore[arg-type]
        max_restarts=request.max_restarts,
        realloc_seconds=request.realloc_seconds,
        policy_params=params,
    )
    return _reading(request, settings, policy), settings


def _resumed(request: RunRequest, journal: Journal, policy: str) -> tuple[RunRequest, RunSettings]:
    """The journal's run, with the invocation's policy and command, which must be the run's: its data (the copied
    inputs, the cluster, the round length...) from the journal, checked."""
    journal.require_layout("run")
    if "service_jobs" in journal.settings():
        raise InputError(
            "the journal is a service's: resume it with `shockwave serve --resume`",
            path=journal.path,
            row=row("settings", "service_jobs"),
        )
    saved = journal.settings_as(RunSettings)
    require_same_program(saved.policy, saved.command, policy, request.command, journal.path)
    return _reading(request, saved, policy, journal.path), saved


def _reading(request: RunRequest, settings: RunSettings, policy: str, journal: Path | None = None) -> RunRequest:
    """The request as the settings say (their data, the inputs' copies in the folder), with the operator's policy."""
    names = {"trace": settings.trace, "throughputs": settings.throughputs, "config": settings.config}
    folder = request.journal_path.parent
    paths, params = read_inputs(folder, names, settings.policy_params, settings.inputs, journal)
    return dataclasses.replace(
        request,
        policy=policy,
        trace=paths["trace"] or request.trace,
        throughputs=paths["throughputs"],
        config=paths["config"],
        gpus=settings.gpus,
        cluster=settings.cluster,
        round_seconds=settings.round_seconds,
        time_scale=settings.time_scale,
        placement=settings.placement,
        max_restarts=settings.max_restarts,
        realloc_seconds=settings.realloc_seconds,
        policy_params=params,
    )


def _require_runnable(jobs: list[Job], tm: ThroughputModel, cluster: ClusterSpec, trace: Path) -> None:
    """Every GPU type of the cluster is one the throughput model knows jobs of the trace on, and every job can run
    on some type (the model knows its rate there and the type's pool fits its gang): else a type's GPUs would stay
    idle, or a job wait, for as the run lasts."""
    known = {t: [knows(tm, *_key(job), t) for job in jobs] for t in cluster.types}
    for gpu_type, knowing in known.items():
        if not any(knowing):
            raise InputError(
                f"--cluster {cluster.describe()}: {tm.name} knows no job of the trace on {gpu_type!r} GPUs, so none "
                f"could run there: give their rates on {gpu_type} with --throughputs, or leave the type out",
                path=trace,
            )
    fits = [[known[p.gpu_type][i] and p.gpus >= job.scale_factor for p in cluster.pools] for i, job in enumerate(jobs)]
    stuck = [i for i, types in enumerate(fits) if not any(types)]
    if stuck:
        job = jobs[stuck[0]]
        raise InputError(
            f"job {stuck[0]} ({job.model}, batch size {job.batch_size}, gang of {job.scale_factor}) can run on no GPU "
            f"type of the cluster {cluster.describe()}: {tm.name} has no rate for it on a type whose pool fits its "
            f"gang ({len(stuck)} such job(s))",
            path=trace,
        )


def _key(job: Job) -> tuple[str, int, int]:
    return job.model, job.batch_size, job.scale_factor


def run(
    request: RunRequest, backend: Callable[[RunRequest], Backend] | None = None, command: list[str] | None = None
) -> dict[str, Any]:
    """Run (or resume) the request's trace; `command` is recorded in the result's provenance. The run's folder (the
    journal's) is this process's alone while it runs (`FolderLock`)."""
    _check_flags(request)
    if backend is None:
        require_extra("ray", "cluster", "shockwave run")
    folder = private_folder(request.journal_path.parent, "run folder")
    ensure_writable(request.out)
    with contextlib.ExitStack() as locks:
        for held in dict.fromkeys((folder.resolve(), request.out.resolve())):
            locks.enter_context(FolderLock(held))
        return _run(request, backend, command)


def _run(
    request: RunRequest, backend: Callable[[RunRequest], Backend] | None, command: list[str] | None
) -> dict[str, Any]:
    exists = request.journal_path.exists()
    if request.resume and not exists:
        raise InputError("no journal to resume from", path=request.journal_path)
    if not request.resume and exists:
        raise InputError(
            "a journal already exists here: add --resume to continue that run, or choose another --journal / --out",
            path=request.journal_path,
        )
    info = policy_info(request.policy)  # the operator's: a file's class is loaded because they named it
    journal = Journal(request.journal_path) if request.resume else None
    if journal is not None:
        request, settings = _resumed(request, journal, info.name)
    else:
        request, settings = _started(request, info.name)
    cluster = request.cluster_spec
    request = dataclasses.replace(request, gpus=cluster.gpus)
    inputs = assemble(
        info, cluster, policy_params=request.policy_params, throughputs=request.throughputs, config=request.config
    )
    tm = inputs.throughputs
    lines = scale_trace(read_trace(request.trace, tm), request.time_scale)
    jobs = [line.job() for line in lines]
    require_gangs_fit(jobs, cluster.largest_pool, request.trace)
    _require_runnable(jobs, tm, cluster, request.trace)
    profiles = [build_profile(job, tm) for job in jobs]
    write_trace(lines, request.out / "trace.scaled.trace")
    policy = inputs.build(request.realloc_seconds if request.realloc_seconds is not None else request.round_seconds)
    if journal is not None:
        records = journal.jobs()
        snapshot = Snapshot.loads(journal.snapshot(), policy, jobs, profiles, request.journal_path)
    else:
        journal, records, snapshot = Journal(request.journal_path), {}, Snapshot(policy, {}, [])
    checkpoints = private_subfolder(request.journal_path.parent / CHECKPOINTS)
    require_resumable(records, jobs, checkpoints, journal.path)
    scheduler = RuntimeScheduler(
        jobs,
        profiles,
        tm,
        cluster,
        snapshot.policy,
        _backend(request, cluster, backend),
        journal,
        RuntimeSettings.of(request.round_seconds, request.max_restarts, request.command, checkpoints),
        settings.model_dump(exclude_none=True),
        records,
        snapshot.rounds,
        snapshot.jobs,
    )
    try:
        scheduler.run()
    finally:
        scheduler.backend.close()
    result = run_result(request, info.label, scheduler, tm, jobs, inputs.prices)
    if command is not None:
        with_command(result, command)
    write_atomically(request.out / "results.json", json.dumps([result], indent=1))
    return result


def _backend(request: RunRequest, cluster: ClusterSpec, backend: Callable[[RunRequest], Backend] | None) -> Backend:
    """The cluster's backend: Ray (started, or joined at `--address`), unless a test gives its own."""
    if backend is not None:
        return backend(request)
    from shockwave.runtime.ray_backend import RayBackend

    return RayBackend(cluster, request.address, request.placement)


def _realised_lower_bound(jobs: list[Job], records: dict[int, JobRecord], gpus: int) -> float:
    """The makespan no schedule could beat with the work as this run really did it: each job's training time (first
    step to last reported step of every lease) after its arrival, and all of it spread over every GPU. A bound from
    the throughput table would not be one: real rates differ from the table's (a 6-job run once finished in 0.56x of
    it). Only finished jobs count, as only they count in the makespan."""
    training = {i: r.train_seconds for i, r in records.items() if r.status == "done"}
    per_job = max((jobs[i].arrival + t for i, t in training.items() if t > 0), default=0.0)
    return max(per_job, sum(t * jobs[i].scale_factor for i, t in training.items()) / gpus)


def _busy(records: dict[int, JobRecord], jobs: list[Job], gpu_type: str | None = None) -> float:
    """GPU-seconds the run's leases held GPUs of `gpu_type` (None: of any type)."""
    return sum(
        (r.run_seconds if gpu_type is None else r.run_seconds_by_type.get(gpu_type, 0.0)) * jobs[i].scale_factor
        for i, r in records.items()
    )


def _missed_slo(job: Job, outcome: JobOutcome) -> bool:
    """The SLO factor times the trace's duration (else T_iso), against the job's JCT (`shockwave.core.slo`)."""
    return missed(job.slo, float(job.duration) if job.duration > 0 else outcome.t_isolated_s, outcome.jct_s)


def _within(busy: float, gpus: int, makespan: float, unfinished: bool) -> float:
    """`busy` GPU-seconds of `gpus` GPUs, as fit in the makespan. A finished job's leases end by its finish, so
    by the makespan; only an unfinished job's (given up, cancelled, or running when a service stopped) may run past
    the last finish, and then the cap leaves that time out (a bound, not the exact time: leases keep no end times)."""
    return min(busy, gpus * makespan) if unfinished else busy


@dataclass(frozen=True)
class Measured:
    """What a run's jobs really did, as its result and the service's rho read it: a rate table from the measured
    rates (completed across types), the batch size of each job's every epoch, and each finished job's outcome, its
    T_iso at those rates and batch sizes."""

    rates: Rates
    schedules: dict[int, list[int]]
    outcomes: list[JobOutcome]

    def rhos(self, gpus: int) -> dict[int, float]:
        """Each finished job's finish-time fairness, the metric's (`finish_time_fairness`, N the finished jobs)."""
        return {o.id: finish_time_fairness(o, len(self.outcomes), gpus) for o in self.outcomes}


def measured(
    records: Mapping[int, JobRecord],
    jobs: list[Job],
    tm: ThroughputModel,
    cluster: ClusterSpec,
    *,
    quiet: bool = False,
) -> Measured:
    """The run as measured so far (see `Measured`); `quiet`: rates nothing measured yet are not worth a warning (a
    service asks while jobs are still to run)."""
    schedules = {i: schedule_from_switches(jobs[i], r.switches) for i, r in records.items()}
    used = {(jobs[i].model, bs, jobs[i].scale_factor) for i, schedule in schedules.items() for bs in set(schedule)}
    # Profiles and a replay's trace check read rates on the default type, even where the cluster has none of it.
    types = [*cluster.types, *([DEFAULT_GPU_TYPE] if DEFAULT_GPU_TYPE not in cluster.types else [])]
    rates = _completed_rates(_measured_rates(jobs, records), used, types, tm, quiet)
    model = _Measured(rates, tm)
    try:
        profiles = [build_profile(job, model, schedules[i]) for i, job in enumerate(jobs)]
    except InputError:
        profiles = [build_profile(job, tm) for job in jobs]
    outcomes = [
        JobOutcome(
            i, jobs[i].arrival, r.finish_s or 0.0, isolated_time(jobs[i], profiles[i], model, cluster), len(r.switches)
        )
        for i, r in sorted(records.items())
        if r.status == "done"
    ]
    return Measured(rates, schedules, outcomes)


def run_result(
    request: RunRequest,
    policy: str,
    scheduler: RuntimeScheduler,
    tm: ThroughputModel,
    jobs: list[Job],
    prices: Prices | None = None,
) -> dict[str, Any]:
    """The `simulate --json` object of a finished (or stopped) run, with the runtime's own details; writes the
    measured throughputs and batch sizes a replay reads into `request.out`. A job cancelled by the service's
    operator is listed in `cancelled_jobs`, not among the unfinished. GPU-hours are priced in `prices` (default:
    Gavel's GCP prices)."""
    records = scheduler.records
    run = measured(records, jobs, tm, scheduler.cluster)
    decisions = [r.time_s for r in scheduler.rounds]
    rounds = _round_lengths(decisions, scheduler.run_settings.get("idle_s", 0.0), request.resume)
    replay = _measurements(records, jobs, run, scheduler.cluster.types, rounds)
    _write_replay_inputs(request.out, run, replay, request.throughputs)
    summary = _summary(request, scheduler, jobs, run, prices)
    unfinished = sorted(i for i, r in records.items() if r.status not in ("done", "cancelled"))
    cancelled = sorted(i for i, r in records.items() if r.status == "cancelled")
    startups = [t for r in records.values() for t in r.startups]
    result = {
        "policy": policy,
        **({"policy_spec": request.policy} if request.policy != policy else {}),  # a file's class
        "trace": str(request.trace),
        "gpus": request.gpus,
        "cluster": scheduler.cluster.describe(),
        "mechanics": "runtime",
        "round_seconds": request.round_seconds,
        "realloc_seconds": request.realloc_seconds or request.round_seconds,
        "throughputs": "measured",
        "time_scale": request.time_scale,
        **summary,
        "complete": not unfinished,
        "unfinished_jobs": unfinished,
        "failed_jobs": {str(i): r.reason for i, r in records.items() if r.status == "failed"},
        **({"cancelled_jobs": cancelled} if cancelled else {}),
        "wall_seconds": scheduler.elapsed(),
        "idle_s": scheduler.run_settings.get("idle_s", 0.0),
        "restart_overhead_s": fmean(startups) if startups else None,
        **scheduler.policy.summary(),
        "timeline": timeline(scheduler.rounds),
        "provenance": provenance(),
    }
    return Result.model_validate(result).to_json_dict()


def _write_replay_inputs(out: Path, run: Measured, replay: Measurements, planned: Path | None) -> None:
    """What `simulate --throughputs ... --batch-sizes ... --measurements ...` replays the run from: its measured
    rates, each job's batch sizes by epoch, the `replay` measurements (`_measurements`), and the `planned` table the
    run's scheduler planned with (none: the built-in model)."""
    if planned is not None:
        write_atomically(out / PLANNED_THROUGHPUTS, read_bytes(planned, "throughput file", THROUGHPUT_LIMIT))
    else:  # the built-in model: no other run's table in a reused folder
        (out / PLANNED_THROUGHPUTS).unlink(missing_ok=True)
    write_atomically(
        out / "measured_throughputs.json", json.dumps(TableThroughputs(run.rates, "measured").to_json(), indent=1)
    )
    write_atomically(out / "batch_sizes.json", json.dumps({str(i): s for i, s in sorted(run.schedules.items())}))
    write_atomically(out / MEASUREMENTS, json.dumps(replay.to_json()))


def _summary(
    request: RunRequest, scheduler: RuntimeScheduler, jobs: list[Job], run: Measured, prices: Prices | None
) -> dict[str, Any]:
    """The metrics a simulation reports (`shockwave.results.metrics`), of the measured outcomes, each finished job
    with what the runtime saw of it."""
    records, cluster = scheduler.records, scheduler.cluster
    makespan = max((o.finish_s for o in run.outcomes), default=0.0)
    not_done = any(r.status != "done" for r in records.values())
    busy = _within(_busy(records, jobs), request.gpus, makespan, not_done)
    summary = summarize_run(
        run.outcomes,
        gpus=request.gpus,
        makespan_s=makespan,
        gpu_busy_s=[busy / request.gpus] * request.gpus,
        num_rounds=scheduler.view.round_index,
        makespan_lower_bound_s=_realised_lower_bound(jobs, records, request.gpus),
    )
    busy_by_type = {t: _busy(records, jobs, t) for t in cluster.types}
    by_type = utilization_by_type(busy_by_type, cluster, makespan, capped=not_done)
    if by_type is not None:
        summary["utilization_by_type"] = by_type
    summary.update(cost_fields(busy_by_type, prices))
    summary.update(slo_fields(_missed_slo(jobs[o.id], o) for o in run.outcomes if jobs[o.id].slo > 0))
    for job in summary["jobs"]:
        record = records[job["id"]]
        job.update(
            preemptions=record.preemptions,
            restarts=record.restarts,
            measured_throughput=record.measured_throughput,
            starts=record.starts,
            gpu_types=record.gpu_types,
            batch_size_switches=record.switches,
            startup_s=record.startups,
            restore_s=record.restores,
            checkpoint_s=record.checkpoints_s,
            switch_s=record.switch_seconds,
        )
    return summary
