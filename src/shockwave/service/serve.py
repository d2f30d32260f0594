"""`shockwave serve`: a long-running scheduler that operators submit jobs to, and that comes back after a crash.

One process: the HTTP API (a uvicorn thread, loopback only) writes submissions and cancellations to the queue
(`DIR/service.sqlite`); the main thread runs the same scheduler, loop and policies as `shockwave run`
(`RuntimeScheduler`), its jobs from the queue (`QueueSource`) and its news told to it (`StoreObserver`), journaled in
`DIR/journal.sqlite` with checkpoints in `DIR/checkpoints`. `DIR/endpoint.json` (the URL and token, owner-only) is
written once both are ready and removed when the service stops.

Stopping (SIGTERM, Ctrl-C: the caller sets `stop`) ends the round at once: running jobs checkpoint and exit, the
journal is written, and `DIR/results.json` describes the run so far, as `shockwave run` writes it (`report` and the
simulator's replay read it). `serve --resume` continues from the journal, a crash (kill -9) included: every queued
and running job, from its last checkpoint, and whatever was submitted or cancelled while the service was down.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, field_validator

from shockwave.assembly.inputs import RunInputs, assemble
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError, require_extra
from shockwave.core.policy import Policy
from shockwave.io.atomic import write_atomically
from shockwave.io.lock import FolderLock
from shockwave.io.private import private_folder, private_subfolder
from shockwave.policies.registry import policy_info
from shockwave.results.provenance import with_command
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
from shockwave.runtime.journal import LAYOUT, MAX_SECONDS, SETTLED, JobRecord, Journal, row
from shockwave.runtime.run import MAX_RESTARTS, Placement, RoundSeconds, RunRequest, require_round_seconds, run_result
from shockwave.runtime.scheduler import RuntimeScheduler, RuntimeSettings
from shockwave.runtime.snapshot import Snapshot
from shockwave.service.api import LOG_FOLDER, make_app
from shockwave.service.endpoint import ENDPOINT_FILE, Endpoint, new_token, read_endpoint, write_endpoint
from shockwave.service.scheduler import QueueLink, QueueSource, StoreObserver, TakenIn
from shockwave.service.server import start_server
from shockwave.service.spec import JobSpec
from shockwave.service.store import Store
from shockwave.service.tenancy import TenantBook
from shockwave.workload_model.entities import Entities
from shockwave.workload_model.job import Job
from shockwave.workload_model.profile import JobProfile, build_profile
from shockwave.workload_model.throughput import ThroughputModel, knows
from shockwave.workload_model.trace import catalog_line, write_trace

log = logging.getLogger(__name__)
JOURNAL_FILE = "journal.sqlite"
TRACE_FILE = "trace.scaled.trace"
"""The jobs as the service took them in (arrivals in seconds from its start): what a replay simulates."""


@dataclass(frozen=True)
class ServeRequest:
    out: Path
    cluster: str | None = None
    """The GPUs by type (`v100:8,k80:4`); required unless resuming."""
    policy: str = "shockwave"
    round_seconds: float = 30.0
    config: Path | None = None
    throughputs: Path | None = None
    address: str | None = None
    placement: str = "PACK"
    max_restarts: int = 3
    command: str | None = None
    """The command of a job whose spec names none: {family}, {batch_size}, {mode} and {job_id} are filled in; None:
    the built-in workload's."""
    realloc_seconds: float | None = None
    policy_params: tuple[str, ...] = ()
    """The policy's own parameters as KEY=VALUE (`--policy-param`); `entities=FILE` shares the cluster between the
    entities FILE weighs, each job in its spec's `entity`."""
    resume: bool = False
    port: int = 0
    """The API's port on 127.0.0.1 (0: any free one; endpoint.json says which)."""
    tenants: Path | None = None
    """The tenants file the cluster is shared between (read again on SIGHUP or `shockwave tenants reload`); None:
    the one the service started with, if any."""


class ServiceSettings(BaseModel):
    """What a service's journal records of it, read back strictly on `--resume`: the data a resumed service repeats,
    the policy and job command it is only compared with, and the jobs it took in."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

    layout: Literal[2] = LAYOUT
    policy: Annotated[str, Field(min_length=1, max_length=4096)]
    command: Annotated[str, Field(max_length=65_536)] | None = None
    cluster: Annotated[str, Field(min_length=1, max_length=4096)]
    round_seconds: RoundSeconds
    config: KeptName | None = None
    throughputs: KeptName | None = None
    inputs: Digests = Field(default_factory=dict)
    placement: Placement = "PACK"
    max_restarts: Annotated[int, Field(ge=0, le=MAX_RESTARTS)] = 3
    realloc_seconds: Annotated[float, Field(ge=0, le=1e9)] | None = None
    policy_params: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list)
    tenants: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    """The tenants file's absolute path: the operator's own, which they edit while serving (never copied)."""
    start_wall: Annotated[float, Field(ge=-1e12, le=1e12)] | None = None
    rounds: Annotated[int, Field(ge=0)] = 0
    idle_s: Annotated[float, Field(ge=0, le=MAX_SECONDS)] = 0.0
    """Seconds the cluster waited idle for jobs between two rounds' decisions."""
    service_jobs: list[TakenIn] = Field(default_factory=list)
    """Every job taken in, in the order the service took them: by queue row, oldest first."""

    @field_validator("service_jobs")
    @classmethod
    def _in_queue_order(cls, taken: list[TakenIn]) -> list[TakenIn]:
        rows = [job.store_id for job in taken]
        if any(later <= earlier for earlier, later in itertools.pairwise(rows)):
            raise ValueError(f"jobs are taken in in the queue's order, once each: queue rows {rows} are not")
        return taken


def _check(request: ServeRequest) -> None:
    """The invocation's numbers, before anything is created or started."""
    if not request.resume and request.cluster is None:
        raise InputError("--cluster (e.g. v100:8,k80:4) or --gpus is required to start a service")
    require_round_seconds(request.round_seconds)
    if not 0 <= request.port <= 65535:
        raise InputError(f"--port must be 0 (any free port) to 65535, got {request.port}")
    if not 0 <= request.max_restarts <= MAX_RESTARTS:
        raise InputError(f"--max-restarts must be 0 to {MAX_RESTARTS}, got {request.max_restarts}")


def _started(request: ServeRequest, policy: str) -> tuple[ServeRequest, ServiceSettings]:
    """A new service: its input files copied into its folder (it reads the copies from now on) and its settings."""
    assert request.cluster is not None  # checked
    files = {"config": request.config, "throughputs": request.throughputs}
    names, params, digests = keep_inputs(request.out, files, request.policy_params)
    settings = ServiceSettings(
        policy=policy,
        command=None if is_builtin(request.command) else request.command,
        cluster=request.cluster,
        round_seconds=request.round_seconds,
        **names,
        inputs=digests,
        placement=request.placement,  # type: ignore[arg-type]
        max_restarts=request.max_restarts,
        realloc_seconds=request.realloc_seconds,
        policy_params=params,
        tenants=None if request.tenants is None else str(request.tenants.resolve()),
    )
    return _reading(request, settings, policy), settings


def _resumed(request: ServeRequest, journal: Journal, policy: str) -> tuple[ServeRequest, ServiceSettings]:
    """The journal's service (a resumed service is the one that stopped), with the invocation's policy and command,
    which must be the service's."""
    journal.require_layout("service")
    if "service_jobs" not in journal.settings():
        raise InputError(
            "no service's jobs are journaled: is it a run's journal (resume that with `shockwave run --resume`)?",
            path=journal.path,
            row=row("settings", "service_jobs"),
        )
    saved = journal.settings_as(ServiceSettings)
    require_same_program(saved.policy, saved.command, policy, request.command, journal.path)
    return _reading(request, saved, policy, journal.path), saved


def _reading(
    request: ServeRequest, settings: ServiceSettings, policy: str, journal: Path | None = None
) -> ServeRequest:
    """The request as the settings say (their data, the inputs' copies in the folder), with the operator's policy."""
    names = {"config": settings.config, "throughputs": settings.throughputs}
    paths, params = read_inputs(request.out, names, settings.policy_params, settings.inputs, journal)
    return dataclasses.replace(
        request,
        policy=policy,
        cluster=settings.cluster,
        round_seconds=settings.round_seconds,
        config=paths["config"],
        throughputs=paths["throughputs"],
        placement=settings.placement,
        max_restarts=settings.max_restarts,
        realloc_seconds=settings.realloc_seconds,
        policy_params=params,
        tenants=request.tenants or (None if settings.tenants is None else Path(settings.tenants)),
    )


def _admissible(tm: ThroughputModel, cluster: ClusterSpec, entities: Entities | None, spec: JobSpec) -> None:
    """What the service's policy needs of a spec beyond `JobSpec.check`: a rate for the job on a GPU type it may
    use whose pool fits its gang (else it would wait forever), and, with entities, one of them."""
    pools = [cluster.pool(t) for t in spec.gpu_types or cluster.types]
    key = (spec.family, spec.initial_batch_size, spec.gpus)
    if not any(pool.gpus >= spec.gpus and knows(tm, *key, pool.gpu_type) for pool in pools):
        raise InputError(
            f"{tm.name} has no rate for {spec.family} at batch size {spec.initial_batch_size} on {spec.gpus} GPU(s) "
            f"of a type the job may use ({', '.join(p.gpu_type for p in pools)}): it could never be planned",
            field="family",
        )
    if entities is None:
        return
    names = ", ".join(entities.entities)
    if spec.entity is None and entities.default is None:
        raise InputError(f"this service shares the cluster between entities: name the job's ({names})", field="entity")
    if spec.entity is not None and spec.entity not in entities.entities:
        raise InputError(f"{spec.entity!r} is not an entity of this service ({names})", field="entity")


def _token(out: Path, resume: bool) -> str:
    """A resumed service keeps its token (clients and dashboards go on working); a new one gets a fresh one."""
    if resume and (out / ENDPOINT_FILE).exists():
        try:
            return read_endpoint(out).token
        except InputError:
            log.warning("the old endpoint file cannot be read: the service gets a new token")
    return new_token()


def serve(
    request: ServeRequest,
    stop: threading.Event,
    backend: Callable[[ClusterSpec], Backend] | None = None,
    command: list[str] | None = None,
    ready: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the service until `stop` is set; returns the run's result (also written to DIR/results.json).
    `backend` makes the cluster's backend (default: Ray); `command` is recorded in the result's provenance; `ready`
    is called with the URL once the service listens (after Ray has started, which installs signal handlers of its
    own: the CLI installs its handlers there). The folder is this process's alone while it serves (`FolderLock`)."""
    _check(request)
    if backend is None:
        require_extra("ray", "cluster", "shockwave serve")
    with FolderLock(private_folder(request.out, "service folder")):
        return _serve(request, stop, backend, command, ready)


def _serve(
    request: ServeRequest,
    stop: threading.Event,
    backend: Callable[[ClusterSpec], Backend] | None,
    command: list[str] | None,
    ready: Callable[[str], None] | None,
) -> dict[str, Any]:
    """`serve` in its locked folder: the queue and the journal checked, the scheduler built, then run beside the API."""
    journal_path = request.out / JOURNAL_FILE
    store = _queue(request, journal_path)
    info = policy_info(request.policy)  # the operator's: a file's class is loaded because they named it
    journal = Journal(journal_path) if request.resume else None
    if journal is not None:
        request, settings = _resumed(request, journal, info.name)
    else:
        request, settings = _started(request, info.name)
    assert request.cluster is not None
    cluster = ClusterSpec.parse(request.cluster)
    book = None if request.tenants is None else TenantBook(request.tenants, request.out, cluster, store)
    inputs = assemble(
        info,
        cluster,
        policy_params=request.policy_params,
        throughputs=request.throughputs,
        config=request.config,
        tenants=None if book is None else book.current,
    )
    tm, entities = inputs.throughputs, inputs.entities
    policy = inputs.build(request.realloc_seconds if request.realloc_seconds is not None else request.round_seconds)
    link = (
        QueueLink.restored(store, settings.service_jobs, entities)
        if journal is not None
        else QueueLink(store, entities)
    )
    jobs = link.jobs()
    profiles = [build_profile(job, tm) for job in jobs]
    journal, records, snapshot = _journaled(journal, journal_path, policy, jobs, profiles)
    checkpoints = private_subfolder(request.out / CHECKPOINTS)
    require_resumable(records, jobs, checkpoints, journal.path)
    token = _token(request.out, request.resume)
    (request.out / ENDPOINT_FILE).unlink(missing_ok=True)  # a killed service's: clients wait for the new one
    cluster_backend = backend(cluster) if backend is not None else _ray(cluster, request)
    store.clock = cluster_backend.clock.now
    scheduler = RuntimeScheduler(
        jobs=jobs,
        profiles=profiles,
        throughputs=tm,
        cluster=cluster,
        policy=snapshot.policy,
        backend=cluster_backend,
        journal=journal,
        settings=RuntimeSettings.of(request.round_seconds, request.max_restarts, request.command, checkpoints),
        run_settings=settings.model_dump(mode="json", exclude_none=True),
        records=records,
        rounds=snapshot.rounds,
        admitted=snapshot.jobs,
        stop=stop,
        source=QueueSource(link),
        observer=StoreObserver(link, private_subfolder(request.out / LOG_FOLDER)),
    )
    _give_up_invalid(scheduler, link)
    api = partial(
        make_app, store, cluster, token, lambda: link.metrics, partial(_admissible, tm, cluster, entities), book
    )
    with _reloading_on_sighup(book):
        _run_serving(request, token, api, scheduler, cluster_backend, ready)
    return _result(request, info.label, scheduler, link, inputs, command)


def _queue(request: ServeRequest, journal_path: Path) -> Store:
    """The folder's queue, once the folder is what the invocation expects: a journal exactly when resuming, and no
    queued jobs without one (they would never be run)."""
    if request.resume and not journal_path.exists():
        raise InputError("no journal to resume from: start the service without --resume", path=journal_path)
    if not request.resume and journal_path.exists():
        raise InputError(
            "a service has run here: add --resume to continue it, or choose another --out", path=journal_path
        )
    store = Store(request.out)
    if not request.resume and store.jobs():
        raise InputError("this folder's queue has jobs but no journal: choose another --out", path=store.path)
    return store


def _journaled(
    journal: Journal | None, journal_path: Path, policy: Policy, jobs: list[Job], profiles: list[JobProfile]
) -> tuple[Journal, dict[int, JobRecord], Snapshot]:
    """The journal with what it holds of the jobs and the scheduler (a resumed service goes on from there), or a new
    journal and an empty start."""
    if journal is None:
        return Journal(journal_path), {}, Snapshot(policy, {}, [])
    records = journal.jobs()
    return journal, records, Snapshot.loads(journal.snapshot(), policy, jobs, profiles, journal.path)


def _give_up_invalid(scheduler: RuntimeScheduler, link: QueueLink) -> None:
    """Fail the jobs whose queue row is corrupt or gone, so they never run again (and the operator is told)."""
    given_up = [job_id for job_id in link.invalid if scheduler.records[job_id].status not in SETTLED]
    for job_id in given_up:
        why = link.invalid[job_id]
        scheduler.end(job_id, "failed", why)
        log.warning("job %d (%s) is given up: %s", job_id, link.name(job_id), why)
    if given_up:
        scheduler.save()  # the queue hears of it now, not at the next round a job runs in


def _run_serving(
    request: ServeRequest,
    token: str,
    api: Callable[[], FastAPI],
    scheduler: RuntimeScheduler,
    backend: Backend,
    ready: Callable[[str], None] | None,
) -> None:
    """Serve the API while the scheduler runs; however the run ends, clients are told first that the service is gone
    (the endpoint file), then the server stops and the cluster's backend closes."""
    server = None
    try:
        server = start_server(api(), port=request.port)
        write_endpoint(request.out, Endpoint(server.url, token))
        if ready is not None:
            ready(server.url)
        log.info(
            "serving %s on %s; jobs, logs and journal in %s", scheduler.cluster.describe(), server.url, request.out
        )
        scheduler.run()
    finally:
        (request.out / ENDPOINT_FILE).unlink(missing_ok=True)
        if server is not None:
            server.stop()
        backend.close()


@contextlib.contextmanager
def _reloading_on_sighup(book: TenantBook | None) -> Iterator[None]:
    """SIGHUP reads the tenants file again (in a thread of its own: a signal handler must not wait on a lock),
    where the service has tenants and runs in the main thread; the old handler is back once it stops."""
    if book is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGHUP, lambda signum, frame: threading.Thread(target=book.reload_quietly).start())
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, previous)


def _ray(cluster: ClusterSpec, request: ServeRequest) -> Backend:
    from shockwave.runtime.ray_backend import RayBackend

    return RayBackend(cluster, request.address, request.placement)


def _result(
    request: ServeRequest,
    label: str,
    scheduler: RuntimeScheduler,
    link: QueueLink,
    inputs: RunInputs,
    command: list[str] | None,
) -> dict[str, Any]:
    """The run so far, as `shockwave run` reports one (DIR/results.json), with the jobs' names."""
    write_trace([catalog_line(job) for job in scheduler.jobs], request.out / TRACE_FILE)
    as_run = RunRequest(
        trace=request.out / TRACE_FILE,
        policy=request.policy,
        gpus=scheduler.cluster.gpus,
        out=request.out,
        round_seconds=request.round_seconds,
        cluster=scheduler.cluster.describe(),
        realloc_seconds=request.realloc_seconds,
        throughputs=request.throughputs,
        resume=request.resume,
    )
    result = run_result(as_run, label, scheduler, inputs.throughputs, scheduler.jobs, inputs.prices)
    result["job_names"] = [link.name(i) for i in range(len(scheduler.jobs))]
    if command is not None:
        with_command(result, command)
    write_atomically(request.out / "results.json", json.dumps([result], indent=1))
    return result
