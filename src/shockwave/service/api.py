"""The service's HTTP API (FastAPI), which the CLI's `submit`, `status`, `cancel` and `logs` call.

Every route but `/healthz` and the read-only OpenAPI docs asks for `Authorization: Bearer <token>` (the token in
`DIR/endpoint.json`); the dashboard's (`/`, `/events`, `/api/*`: `shockwave.service.dashboard`) also take the cookie
a browser gets by opening `/?token=<token>`, which grants reading only. A request only reads or writes the store
(`shockwave.service.store`) and returns: it never waits on the scheduler, so a submission is answered while a round
is being solved. Routes are plain functions, which FastAPI runs in its thread pool, so SQLite's blocking calls never
stall the event loop (the dashboard's streams share one snapshot, read in a thread of their own, never in that pool).

Errors are `{"detail": message, "field": field}` with the field to fix: 400 (a body that cannot be parsed), 401 (no
or wrong token, field `Authorization`; `Cookie` or `token` for the dashboard's), 404 (no such job), 409 (a name in
use, a job already over), 413 (a body over MAX_BODY_BYTES, field `body`), 422 (a spec that is not valid, or that the
cluster can never run), 503 (the store could not be used, or the dashboard has as many streams open as it serves).

No `from __future__ import annotations` here: FastAPI reads the route functions' annotations at run time, and
those of functions defined inside `make_app`'s helpers name their local variables.
"""

import hashlib
import hmac
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from fastapi.telemetry import TelemetryConfig
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from pydantic import BaseModel
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shockwave import __version__
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.service.dashboard import cookie_name, dashboard_router
from shockwave.service.spec import JobSpec, describe
from shockwave.service.store import Job, JobConflict, Store, UnknownJob
from shockwave.service.tenancy import Caller, Refused, TenantBook
from shockwave.workload_model.tenants import Tenant

MAX_BODY_BYTES = 1 << 20
"""A spec is a few hundred bytes; its longest command (256 arguments of 1024 characters) fits."""
TOO_LARGE = f"the request's body is over {MAX_BODY_BYTES} bytes, the most this service reads"
NO_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}
"""FastAPI would otherwise hand requests (headers with the token, bodies, errors) to whatever OpenTelemetry providers
the process has configured; /metrics is the service's own account."""
LOG_FOLDER = "logs"
LOG_TAIL_BYTES = 1 << 20
"""At most the last MiB of a log is read, however long the job has been writing."""


@dataclass(frozen=True)
class SchedulerMetrics:
    """What the scheduler loop reports for /metrics, as of its last round."""

    gpu_utilisation: dict[str, float] = field(default_factory=dict)
    """GPU type -> busy fraction of its GPUs in the last round (0 to 1)."""
    solve_seconds: float | None = None
    """How long the policy took to plan the last round."""
    round_seconds: float | None = None
    """How long the last round lasted."""
    tenant_gpus: dict[tuple[str, str], int] = field(default_factory=dict)
    """(tenant, GPU type) -> GPUs its jobs held in the last round (where the service has tenants)."""


class ApiError(BaseModel):
    """Every error's body."""

    detail: str
    field: str | None = None


class RequestRefused(Exception):
    """An error answer: status, message and the field (or header) to fix."""

    def __init__(self, status_code: int, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.status_code, self.detail, self.field = status_code, detail, field


def _answer(status_code: int, detail: str, field: str | None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(ApiError(detail=detail, field=field).model_dump(), status_code=status_code, headers=headers)


class _QueueCollector:
    """Prometheus gauges, read when scraped: jobs by state from the store, the rest from the scheduler."""

    def __init__(self, store: Store, source: Callable[[], SchedulerMetrics] | None, tenanted: bool) -> None:
        self.store, self.source, self.tenanted = store, source, tenanted

    def collect(self) -> Iterable[Metric]:
        if self.tenanted:
            jobs = GaugeMetricFamily(
                "shockwave_jobs", "Jobs in the service's queue, by state and tenant.", labels=["state", "tenant"]
            )
            for (state, tenant), count in self.store.counts_by_tenant().items():
                jobs.add_metric([state, tenant], count)
        else:
            jobs = GaugeMetricFamily("shockwave_jobs", "Jobs in the service's queue, by state.", labels=["state"])
            for state, count in self.store.counts().items():
                jobs.add_metric([state], count)
        yield jobs
        if self.source is None:
            return
        now = self.source()
        busy = GaugeMetricFamily(
            "shockwave_gpu_utilisation_ratio", "Busy fraction of each GPU type in the last round.", labels=["gpu_type"]
        )
        for gpu_type, ratio in now.gpu_utilisation.items():
            busy.add_metric([gpu_type], ratio)
        yield busy
        if now.tenant_gpus:
            held = GaugeMetricFamily(
                "shockwave_tenant_gpus", "GPUs each tenant held in the last round.", labels=["tenant", "gpu_type"]
            )
            for (tenant, gpu_type), gpus in sorted(now.tenant_gpus.items()):
                held.add_metric([tenant, gpu_type], gpus)
            yield held
        if now.solve_seconds is not None:
            yield GaugeMetricFamily(
                "shockwave_solve_seconds", "Time the policy took to plan the last round.", now.solve_seconds
            )
        if now.round_seconds is not None:
            yield GaugeMetricFamily("shockwave_round_seconds", "Length of the last round.", now.round_seconds)


class _BodyLimit:
    """Refuses a body over MAX_BODY_BYTES with the API's JSON error (413, field `body`), before reading it when its
    Content-Length says so, else once the bytes read pass the limit. FastAPI's own `max_body_size` answers in plain
    text, and puts that text in place of any answer to a request whose Content-Length is over the limit."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length", "")
        if length.isdigit() and int(length) > MAX_BODY_BYTES:
            await _answer(413, TOO_LARGE, "body")(scope, receive, send)
            return
        read = 0

        async def limited() -> Message:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > MAX_BODY_BYTES:
                raise HTTPException(413, TOO_LARGE)  # FastAPI passes an HTTPException on, to `_http` below
            return message

        await self.app(scope, limited, send)


def tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a text file (of its last LOG_TAIL_BYTES), or '' when it does not exist yet."""
    try:
        with path.open("rb") as f:
            start = max(0, f.seek(0, os.SEEK_END) - LOG_TAIL_BYTES)
            f.seek(start)
            text = f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    if start > 0:
        text = text.partition("\n")[2]  # the first line read is cut
    return "".join(text.splitlines(keepends=True)[-lines:])


def _refusals(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of a route (or router): each in the API's one error shape."""
    return {code: {"model": ApiError} for code in codes}


@dataclass(frozen=True)
class _Guards:
    """The API's checks of a caller, all derived from the admin's token and the tenants' (`TenantBook`)."""

    authenticated: Callable[..., Caller]
    """The Bearer header (a FastAPI dependency): every route but /healthz and the dashboard's; who sent it."""
    admin: Callable[..., None]
    """The admin's Bearer token only (a tenant's is refused, 403): /metrics, reloading the tenants."""
    reader: Callable[[Request], None]
    """The dashboard's readers: the Bearer header or the dashboard's cookie."""
    sign_in: Callable[[str], str]
    """The dashboard's cookie for a browser that opened `/?token=<token>`."""


def _guards(token: str, book: TenantBook | None) -> _Guards:
    """The checks for `token` (and the tenants' tokens): kept apart from the routes so that every route group shares
    the same ones."""
    expected = token.encode()
    bearer = HTTPBearer(
        auto_error=False,
        description="The admin's token in DIR/endpoint.json, or a tenant's in DIR/tenants/NAME.token, written by "
        "`shockwave serve`.",
    )
    # The dashboard cookie's value: derived from the token, so that a leaked cookie cannot submit or cancel.
    session = hmac.new(expected, b"shockwave dashboard", hashlib.sha256).hexdigest()

    def authenticated(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Caller:
        if credentials is None:
            raise RequestRefused(401, "missing token: send the header 'Authorization: Bearer <token>'", "Authorization")
        given = credentials.credentials
        is_admin = secrets.compare_digest(given.encode(), expected)
        tenant = book.caller(given) if book is not None else None  # compared whether or not the admin's matched
        if is_admin:
            return Caller()
        if tenant is None:
            raise RequestRefused(401, "wrong token in the 'Authorization' header", "Authorization")
        return tenant

    def admin(caller: Annotated[Caller, Depends(authenticated)]) -> None:
        if not caller.admin:
            raise RequestRefused(403, f"tenant {caller.tenant}'s token may not: only the admin's", "Authorization")

    def reader(request: Request) -> None:
        """The dashboard's readers: the Bearer header, or the cookie of `/?token=` (EventSource sends no header)."""
        scheme, credentials = get_authorization_scheme_param(request.headers.get("Authorization"))
        if scheme.lower() == "bearer":
            if not authenticated(HTTPAuthorizationCredentials(scheme=scheme, credentials=credentials)).admin:
                raise RequestRefused(403, "the dashboard shows every tenant's jobs: open it with the admin's token")
            return
        cookie = request.cookies.get(cookie_name(request))
        if cookie is None:
            raise RequestRefused(
                401,
                "not signed in: open the dashboard as /?token=<token> (the token in DIR/endpoint.json), "
                "or send the header 'Authorization: Bearer <token>'",
                "Authorization",
            )
        if not secrets.compare_digest(cookie.encode(), session.encode()):
            raise RequestRefused(
                401, "the dashboard's cookie is not this service's: open /?token=<token> again", "Cookie"
            )

    def sign_in(candidate: str) -> str:
        """The cookie's value for a browser that opened `/?token=<candidate>`, when that is the token."""
        if not secrets.compare_digest(candidate.encode(), expected):
            raise RequestRefused(401, "wrong token in the dashboard's address (?token=)", "token")
        return session

    return _Guards(authenticated, admin, reader, sign_in)


def _add_error_handlers(app: FastAPI) -> None:
    """Answer every refusal, the app's own and FastAPI's, in the one error shape with the field to fix."""

    @app.exception_handler(RequestRefused)
    def _refused(request: Request, exc: RequestRefused) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return _answer(exc.status_code, exc.detail, exc.field, headers)

    @app.exception_handler(HTTPException)
    def _http(request: Request, exc: HTTPException) -> JSONResponse:
        """FastAPI's own refusals (a body it cannot parse, a route that does not exist), the body limit's and the
        dashboard's (too many streams) in the same shape."""
        field = "body" if exc.status_code in (400, 413) else None
        return _answer(exc.status_code, str(exc.detail), field, exc.headers)

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        field, message = describe(exc.errors()[0])
        return _answer(422, message, field)

    @app.exception_handler(Refused)
    def _refused_to_tenant(request: Request, exc: Refused) -> JSONResponse:
        return _answer(403, exc.detail, exc.field)

    @app.exception_handler(UnknownJob)
    def _unknown(request: Request, exc: UnknownJob) -> JSONResponse:
        return _answer(404, exc.reason, exc.field)

    @app.exception_handler(JobConflict)
    def _conflict(request: Request, exc: JobConflict) -> JSONResponse:
        return _answer(409, exc.reason, exc.field)

    @app.exception_handler(InputError)
    def _cannot_run(request: Request, exc: InputError) -> JSONResponse:
        return _answer(422, exc.reason, exc.field)

    @app.exception_handler(sqlite3.Error)
    def _store_down(request: Request, exc: sqlite3.Error) -> JSONResponse:
        return _answer(503, f"the service's store cannot be used now: {exc}", None)


def _add_job_routes(
    jobs: APIRouter,
    store: Store,
    cluster: ClusterSpec,
    admissible: Callable[[JobSpec], None] | None,
    guards: _Guards,
    book: TenantBook | None,
) -> None:
    """The queue's routes (submit, list, read, cancel, a job's log): what the CLI's commands call. A tenant's token
    sees and touches its own jobs only: another's is 404 to it, as a job that does not exist."""
    Who = Annotated[Caller, Depends(guards.authenticated)]

    def own(name: str, caller: Caller) -> Job:
        job = store.get(name)  # an unknown name never becomes a path
        if not caller.sees(job):  # answered as a job that does not exist: a tenant learns nothing of another's
            raise UnknownJob(f"no job named {name!r}", field="name")
        return job

    @jobs.post("/jobs", status_code=status.HTTP_201_CREATED, responses=_refusals(403, 409, 422))
    def submit_job(spec: JobSpec, response: Response, caller: Who) -> Job:
        """Queue a job; the scheduler admits it at its next round. A tenant's token submits in that tenant; the
        admin's names the job's `tenant` where the service has tenants."""
        spec.check(cluster)
        if book is not None:
            spec = book.admitted(spec, caller)
        elif spec.tenant is not None:
            raise InputError("this service has no tenants (`serve --tenants FILE`)", field="tenant")
        if admissible is not None:
            admissible(spec)
        job = store.submit(spec)
        response.headers["Location"] = f"/jobs/{job.name}"
        return job

    @jobs.get("/jobs")
    def list_jobs(caller: Who) -> list[Job]:
        """Every job the caller may see (a tenant: its own), in submission order."""
        return [job for job in store.jobs() if caller.sees(job)]

    @jobs.get("/jobs/{name}", responses=_refusals(404))
    def get_job(name: str, caller: Who) -> Job:
        """One job."""
        return own(name, caller)

    @jobs.delete("/jobs/{name}", responses=_refusals(404, 409))
    def cancel_job(name: str, caller: Who) -> Job:
        """Cancel a queued or running job; again on a cancelled job changes nothing; a finished job is refused."""
        return store.cancel(own(name, caller).name)

    @jobs.post("/jobs/{name}/cancel", responses=_refusals(404, 409))
    def cancel_job_by_post(name: str, caller: Who) -> Job:
        """The same as `DELETE /jobs/{name}`, for clients that send no DELETE."""
        return store.cancel(own(name, caller).name)

    @jobs.get("/jobs/{name}/logs", response_class=PlainTextResponse, responses=_refusals(404))
    def job_logs(name: str, caller: Who, lines: Annotated[int, Query(ge=1, le=100_000)] = 200) -> str:
        """The end of the job's output (DIR/logs/NAME.log); empty before it has written any."""
        job = own(name, caller)
        return tail(store.folder / LOG_FOLDER / f"{job.name}.log", lines)


def _add_tenant_routes(router: APIRouter, book: TenantBook | None, guards: _Guards) -> None:
    """The tenants as the service holds them now, and reloading their file (the admin's; SIGHUP does the same)."""

    @router.get("/tenants", responses=_refusals(404))
    def list_tenants(caller: Annotated[Caller, Depends(guards.authenticated)]) -> list[TenantView]:
        """Every tenant (a tenant's token: its own) with its weight, cap and guarantees."""
        if book is None:
            raise RequestRefused(404, "this service has no tenants (`serve --tenants FILE`)")
        return [TenantView.of(t) for t in book.current().tenants.values() if caller.admin or t.name == caller.tenant]

    @router.post("/tenants/reload", dependencies=[Depends(guards.admin)], responses=_refusals(403, 404, 422))
    def reload_tenants() -> list[TenantView]:
        """Read the tenants file again: taken at the next round when valid, else refused and the old kept."""
        if book is None:
            raise RequestRefused(404, "this service has no tenants (`serve --tenants FILE`)")
        return [TenantView.of(t) for t in book.reload().tenants.values()]


class TenantView(BaseModel):
    """A tenant as the API shows it."""

    name: str
    weight: float
    max_gpus: int | None
    guarantee: dict[str, int]

    @classmethod
    def of(cls, tenant: Tenant) -> "TenantView":
        return cls(name=tenant.name, weight=tenant.weight, max_gpus=tenant.max_gpus, guarantee=dict(tenant.guarantees))


def _add_metrics_route(
    router: APIRouter,
    store: Store,
    metrics_source: Callable[[], SchedulerMetrics] | None,
    guards: _Guards,
    tenanted: bool,
) -> None:
    """`/metrics`, with a registry of the service's own: each app's gauges read its own store and scheduler."""
    registry = CollectorRegistry()
    registry.register(_QueueCollector(store, metrics_source, tenanted))

    @router.get(
        "/metrics", response_class=PlainTextResponse, dependencies=[Depends(guards.admin)], responses=_refusals(403)
    )
    def metrics() -> Response:
        """Prometheus text format (the admin's token: it counts every tenant's jobs): jobs by state and tenant; GPU
        utilisation per type, GPUs held per tenant, solve time and round length once the scheduler reports them."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def make_app(
    store: Store,
    cluster: ClusterSpec,
    token: str,
    metrics_source: Callable[[], SchedulerMetrics] | None = None,
    admissible: Callable[[JobSpec], None] | None = None,
    book: TenantBook | None = None,
) -> FastAPI:
    """The API of one service: its queue, the cluster submissions are checked against, the admin's token, (once
    the scheduler runs) where its metrics come from, what else a spec must satisfy (`admissible` raises an
    InputError naming the field: the service's policy's own needs) and, where it is shared, its tenants."""
    if not token:
        raise ValueError("the API needs a token")
    guards = _guards(token, book)
    app = FastAPI(
        title="shockwave scheduler service",
        version=__version__,
        responses=_refusals(413, 503),
        telemetry=NO_TELEMETRY,
    )
    app.add_middleware(_BodyLimit)
    _add_error_handlers(app)

    @app.get("/healthz", tags=["service"])
    def healthz() -> dict[str, str]:
        """Whether the service answers (no token needed)."""
        return {"status": "ok"}

    jobs = APIRouter(dependencies=[Depends(guards.authenticated)], responses=_refusals(401))
    _add_job_routes(jobs, store, cluster, admissible, guards, book)
    _add_tenant_routes(jobs, book, guards)
    _add_metrics_route(jobs, store, metrics_source, guards, book is not None)
    app.include_router(jobs)
    app.include_router(dashboard_router(store, cluster, guards.reader, guards.sign_in))
    return app
