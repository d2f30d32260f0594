"""`shockwave serve`: a long-running scheduler that operators submit jobs to, and that comes back after a crash.

One process: the HTTP API (a uvicorn thread, loopback only) writes submissions and cancellations to the queue
(`DIR/service.sqlite`); the main thread runs the same scheduling loop and policies as `shockwave run`
(`ServiceScheduler`), journaled in `DIR/journal.sqlite` with checkpoints in `DIR/checkpoints`. `DIR/endpoint.json`
(the URL and token, owner-only) is written once both are ready and removed when the service stops.

Stopping (SIGTERM, Ctrl-C: the caller sets `stop`) ends the round at once: running jobs checkpoint and exit, the
journal is written, and `DIR/results.json` describes the run so far, as `shockwave run` writes it (`report` and the
simulator's replay read it). `serve --resume` continues from the journal, a crash (kill -9) included: every queued
and running job, from its last checkpoint, and whatever was submitted or cancelled while the service was down.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from shockwave.cluster import ClusterSpec
from shockwave.core.loop import SchedulingLoop
from shockwave.errors import InputError, require_extra
from shockwave.io.atomic import ensure_writable
from shockwave.provenance import with_command
from shockwave.runtime.backend import Backend
from shockwave.runtime.journal import Journal
from shockwave.runtime.run import DEFAULT_COMMAND, RunRequest, run_result
from shockwave.runtime.scheduler import RuntimeSettings
from shockwave.runtime.snapshot import Snapshot
from shockwave.service.api import LOG_FOLDER, make_app
from shockwave.service.endpoint import ENDPOINT_FILE, Endpoint, new_token, read_endpoint, write_endpoint
from shockwave.service.scheduler import QueueLink, ServiceScheduler
from shockwave.service.server import start_server
from shockwave.service.spec import JobSpec
from shockwave.service.store import Store
from shockwave.workload_model.entities import Entities, read_entities
from shockwave.workload_model.profile import build_profile
from shockwave.workload_model.throughput import ThroughputModel, knows, load_throughputs
from shockwave.workload_model.trace import write_trace

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
    command: str = DEFAULT_COMMAND
    """The command of a job whose spec names none (a built-in workload): {family}, {batch_size}, {mode} and
    {job_id} are filled in."""
    realloc_seconds: float | None = None
    policy_params: tuple[str, ...] = ()
    """The policy's own parameters as KEY=VALUE (`--policy-param`); `entities=FILE` shares the cluster between the
    entities FILE weighs, each job in its spec's `entity`."""
    resume: bool = False
    port: int = 0
    """The API's port on 127.0.0.1 (0: any free one; endpoint.json says which)."""


PER_INVOCATION = ("out", "resume", "address", "port")
"""What belongs to this invocation, not to the service a journal records."""
PATH_FIELDS = ("config", "throughputs")


def _journaled(request: ServeRequest) -> dict[str, Any]:
    fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request) if f.name not in PER_INVOCATION}
    fields["policy_params"] = list(request.policy_params)
    return {k: str(v) if k in PATH_FIELDS and v is not None else v for k, v in fields.items()}


def _resumed(request: ServeRequest, saved: dict[str, Any], journal: Path) -> ServeRequest:
    """The journal's service, not the flags (a resumed service is the one that crashed)."""
    if "service_jobs" not in saved:
        raise InputError("the journal holds no service to resume (was it written by `shockwave run`?)", path=journal)
    values = {
        f.name: Path(saved[f.name]) if f.name in PATH_FIELDS and saved.get(f.name) is not None else saved[f.name]
        for f in dataclasses.fields(request)
        if f.name not in PER_INVOCATION and f.name in saved
    }
    values["policy_params"] = tuple(saved.get("policy_params", ()))
    return dataclasses.replace(request, **values)


def _check(request: ServeRequest) -> None:
    journal = request.out / JOURNAL_FILE
    if request.resume and not journal.exists():
        raise InputError("no journal to resume from: start the service without --resume", path=journal)
    if not request.resume and journal.exists():
        raise InputError("a service has run here: add --resume to continue it, or choose another --out", path=journal)
    if not request.resume and request.cluster is None:
        raise InputError("--cluster (e.g. v100:8,k80:4) or --gpus is required to start a service")
    if not (math.isfinite(request.round_seconds) and request.round_seconds > 0):
        raise InputError(f"--round-seconds must be a finite number > 0, got {request.round_seconds}")
    if not 0 <= request.port <= 65535:
        raise InputError(f"--port must be 0 (any free port) to 65535, got {request.port}")


FILE_PARAMS = ("entities", "prices")
"""Policy parameters that name a file: journaled as absolute paths, so a resume from elsewhere finds them."""


def _absolute(text: str) -> str:
    key, sep, value = (part.strip() for part in text.partition("="))
    return (
        f"{key}={Path(value).resolve()}"
        if sep and key in FILE_PARAMS and value.lower() not in ("none", "null")
        else text
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
    own: the CLI installs its handlers there)."""
    from shockwave.policies.registry import parse_policy_params, policy_info
    from shockwave.policies.shockwave.config import ShockwaveConfig

    ensure_writable(request.out)
    _check(request)
    journal = Journal(request.out / JOURNAL_FILE)
    if request.resume:
        request = _resumed(request, journal.settings(), journal.path)
    store = Store(request.out)
    if not request.resume and store.jobs():
        raise InputError("this folder's queue has jobs but no journal: choose another --out", path=store.path)
    assert request.cluster is not None  # checked, or journaled
    cluster = ClusterSpec.parse(request.cluster)
    info = policy_info(request.policy)
    request = dataclasses.replace(request, policy=info.name)
    request = dataclasses.replace(request, policy_params=tuple(_absolute(text) for text in request.policy_params))
    params = parse_policy_params(info.name, request.policy_params)
    entities = read_entities(params["entities"]) if params.get("entities") is not None else None
    params = {**params, **({"entities": entities} if entities is not None else {})}
    config = ShockwaveConfig.from_json(request.config) if request.config else None
    tm = load_throughputs(request.throughputs)
    interval = request.realloc_seconds if request.realloc_seconds is not None else request.round_seconds
    policy = info.offered(params, min_realloc_interval_s=interval, config=config)
    SchedulingLoop(policy, cluster, request.round_seconds, lambda: 0.0)  # its refusals, before a Ray instance starts
    saved = journal.settings()
    link = QueueLink.restored(store, saved.get("service_jobs", []), entities)
    jobs = [spec.trace_job(arrival) for spec, arrival in zip(link.specs, link.arrivals, strict=True)]
    profiles = [build_profile(job, tm) for job in jobs]
    snapshot = (
        Snapshot.loads(journal.snapshot(), policy, jobs, profiles, journal.path)
        if request.resume
        else Snapshot(policy, {}, [])
    )
    token = _token(request.out, request.resume)
    (request.out / ENDPOINT_FILE).unlink(missing_ok=True)  # a killed service's: clients wait for the new one
    if backend is None:
        require_extra("ray", "cluster", "shockwave serve")
        from shockwave.runtime.ray_backend import RayBackend

        cluster_backend: Backend = RayBackend(cluster, request.address, request.placement)
    else:
        cluster_backend = backend(cluster)
    store.clock = cluster_backend.clock.now
    settings = RuntimeSettings(
        round_seconds=request.round_seconds,
        hold_seconds=max(1.0, request.round_seconds / 2),
        max_restarts=request.max_restarts,
        command=shlex.split(request.command),
        checkpoints=request.out / "checkpoints",
    )
    scheduler = ServiceScheduler(
        link,
        request.out / LOG_FOLDER,
        jobs=jobs,
        profiles=profiles,
        throughputs=tm,
        cluster=cluster,
        policy=snapshot.policy,
        backend=cluster_backend,
        journal=journal,
        settings=settings,
        run_settings={**saved, **_journaled(request)},
        records=journal.jobs(),
        rounds=snapshot.rounds,
        admitted=snapshot.jobs,
        stop=stop,
    )
    server = None
    try:
        app = make_app(store, cluster, token, lambda: link.metrics, partial(_admissible, tm, cluster, entities))
        server = start_server(app, port=request.port)
        write_endpoint(request.out, Endpoint(server.url, token))
        if ready is not None:
            ready(server.url)
        log.info("serving %s on %s; jobs, logs and journal in %s", cluster.describe(), server.url, request.out)
        scheduler.run()
    finally:
        (request.out / ENDPOINT_FILE).unlink(missing_ok=True)
        if server is not None:
            server.stop()
        cluster_backend.close()
    write_trace(scheduler.jobs, request.out / TRACE_FILE)
    as_run = RunRequest(
        trace=request.out / TRACE_FILE,
        policy=request.policy,
        gpus=cluster.gpus,
        out=request.out,
        round_seconds=request.round_seconds,
        cluster=cluster.describe(),
        realloc_seconds=request.realloc_seconds,
    )
    result = run_result(as_run, info.label, scheduler, tm, scheduler.jobs)
    result["job_names"] = [spec.name for spec in link.specs]
    if command is not None:
        with_command(result, command)
    (request.out / "results.json").write_text(json.dumps([result], indent=1))
    return result
