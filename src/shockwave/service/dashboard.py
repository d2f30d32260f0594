"""The service's web dashboard: one page (`static/dashboard.html`, inline CSS and JS, nothing fetched from elsewhere:
a service's machine may have no internet) that the server-sent events of `/events` keep up to date.

A browser cannot put the token in a header (EventSource sends none), so `GET /?token=...` trades it for an HttpOnly,
SameSite=Strict cookie and redirects to `/`, which takes the token out of the address bar and the history. The
cookie holds a value derived from the token, not the token: it lets a browser read the dashboard, never submit or
cancel. The API (`make_app`) checks it, or the usual Bearer header, through `reader`.

Every open stream sends the same snapshots (jobs, recent rounds, the cluster's pools): one `SnapshotFeed` per app
polls the store's `version()` every POLL_S from a thread of its own and, when it moved, reads and serialises the
snapshot once for all of them. Thirty streams once each read and encoded the whole queue in the API's thread pool,
and submissions queued behind them for seconds (issue 31); now N streams cost one read per change, and never a
thread of the pool. At most MAX_STREAMS are open at once: one more is refused (503) at once.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from fastapi.sse import EventSourceResponse, format_sse_event
from pydantic_core import to_json
from starlette.exceptions import HTTPException

from shockwave.core.cluster import ClusterSpec
from shockwave.service.store import Job, Round, Store

POLL_S = 0.5
"""How often the feed asks the store whether anything changed, while a stream is open."""
MAX_STREAMS = 32
"""Streams open at once, at most: each costs the event loop a copy of every snapshot (a few people's browser tabs
fit; a runaway script does not)."""
ROUNDS_SHOWN = 240
"""Rounds each snapshot carries for the occupancy chart (eight hours of two-minute rounds)."""
RECONNECT_MS = 2000
"""How soon a browser reconnects after the stream dropped."""
KEEPALIVE_S = 15.0
"""A stream silent this long sends a comment, which keeps proxies from closing it."""
KEEPALIVE = b": keepalive\n\n"
PAGE = (files("shockwave.service") / "static" / "dashboard.html").read_text(encoding="utf-8")

logger = logging.getLogger(__name__)


def _hashes(tag: str) -> str:
    """CSP sources allowing exactly the page's own inline `<tag>` blocks, so that no other script or style runs."""
    blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", PAGE, flags=re.DOTALL)
    digests = (base64.b64encode(hashlib.sha256(block.encode()).digest()).decode() for block in blocks)
    return " ".join(f"'sha256-{digest}'" for digest in digests)


PAGE_HEADERS = {
    "Content-Security-Policy": (
        f"default-src 'none'; script-src {_hashes('script')}; style-src {_hashes('style')}; connect-src 'self'; "
        "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


def cookie_name(request: Request) -> str:
    """The dashboard's cookie, named after the port: browsers send a host's cookies to all its ports, and two
    services on one machine must not overwrite each other's."""
    return f"shockwave_dashboard_{request.url.port or 80}"


def job_row(job: Job) -> dict[str, Any]:
    """What the jobs table shows of a job: not its command, which the page does not need."""
    return {
        "id": job.id,
        "name": job.name,
        "tenant": job.tenant,
        "state": job.state,
        "gpu_type": job.gpu_type,
        "gpus": job.gpus,
        "requested_gpus": job.spec.gpus if job.spec is not None else None,  # None: an invalid (quarantined) row
        "requested_types": (job.spec.gpu_types if job.spec is not None else None) or [],
        "progress_steps": job.progress_steps,
        "total_steps": job.total_steps,
        "rho": job.rho,
        "batch_size": job.batch_size,
        "estimated_finish_s": job.estimated_finish_s,
        "reason": job.reason,
    }


def tenant_rows(jobs: list[Job]) -> list[dict[str, Any]]:
    """Per tenant (where the service has tenants): its jobs running and queued, and the GPUs it holds by type."""
    rows: dict[str, dict[str, Any]] = {}
    for job in jobs:
        if job.tenant is None:
            continue
        row = rows.setdefault(job.tenant, {"tenant": job.tenant, "running": 0, "queued": 0, "gpus": {}})
        if job.state in ("running", "queued"):
            row[job.state] += 1
        if job.state == "running" and job.gpu_type is not None and job.gpus:
            row["gpus"][job.gpu_type] = row["gpus"].get(job.gpu_type, 0) + job.gpus
    return sorted(rows.values(), key=lambda row: row["tenant"])


@dataclass(frozen=True)
class Snapshot:
    version: int
    """The store's version when it was read."""
    event: bytes
    """The `snapshot` event in the wire format, serialised once and sent as it is on every stream."""


class SnapshotFeed:
    """The snapshots of one app's streams: a thread polls the store while a stream is open and publishes a new
    snapshot once per change, which the streams (on the event loop) wait for. The thread starts with the first
    stream and ends soon after the last one."""

    def __init__(self, store: Store, cluster: ClusterSpec) -> None:
        self.store = store
        self.pools = {pool.gpu_type: pool.gpus for pool in cluster.pools}
        self.limit = MAX_STREAMS
        self._lock = threading.Lock()
        self._streams = 0
        self._producing = False
        self._latest: Snapshot | None = None
        self._failed = False
        self._waiters: dict[asyncio.Event, asyncio.AbstractEventLoop] = {}

    async def slot(self) -> AsyncIterator[None]:
        """A stream's place, held until its response ends (a dependency of scope "request"); refused at once when
        `limit` streams are open, so that a crowd of readers never slows the service down."""
        with self._lock:
            if self._streams >= self.limit:
                raise HTTPException(
                    503, f"{self.limit} dashboard streams are open, the most this service serves: try again later"
                )
            self._streams += 1
            if not self._producing:
                self._producing = True
                threading.Thread(target=self._produce, name="shockwave-dashboard", daemon=True).start()
        try:
            yield
        finally:
            with self._lock:
                self._streams -= 1

    async def after(self, seen: int | None) -> Snapshot | None:
        """The latest snapshot, once it is not version `seen`; None when the store cannot be read, which ends the
        stream (the browser reconnects)."""
        loop = asyncio.get_running_loop()
        while True:
            news = asyncio.Event()
            with self._lock:
                if self._failed:
                    return None
                if self._latest is not None and self._latest.version != seen:
                    return self._latest
                self._waiters[news] = loop
            try:
                await news.wait()
            finally:  # a stream that stopped waiting (its client went, or it is time for a keep-alive) is forgotten
                with self._lock:
                    self._waiters.pop(news, None)

    async def stream(self) -> AsyncIterator[bytes]:
        """One stream's events: the latest snapshot at once, then each new one, a comment after KEEPALIVE_S of
        silence; it ends when the store cannot be read."""
        seen = None
        while True:
            try:
                with anyio.fail_after(KEEPALIVE_S):
                    snapshot = await self.after(seen)
            except TimeoutError:
                yield KEEPALIVE
                continue
            if snapshot is None:
                return
            seen = snapshot.version
            yield snapshot.event

    def _produce(self) -> None:
        while True:
            with self._lock:
                if not self._streams:  # the last stream went: a later one starts afresh
                    self._producing, self._latest, self._failed = False, None, False
                    return
                latest, failed = self._latest, self._failed
            try:
                version = self.store.version()
                if latest is None or version != latest.version:
                    self._publish(self._read(version))
            except Exception:
                if not failed:
                    logger.exception("the dashboard cannot read the service's store; its streams end")
                self._publish(None)
            time.sleep(POLL_S)

    def _read(self, version: int) -> Snapshot:
        """The snapshot as of `version`, read after it: a change while reading is sent again, never missed."""
        jobs = self.store.jobs()
        data = {
            "version": version,
            "cluster": self.pools,
            "jobs": [job_row(job) for job in jobs],
            "tenants": tenant_rows(jobs),
            "rounds": self.store.rounds(ROUNDS_SHOWN),
        }
        text = to_json(data, inf_nan_mode="null").decode()
        return Snapshot(version, format_sse_event(data_str=text, event="snapshot", id=str(version), retry=RECONNECT_MS))

    def _publish(self, snapshot: Snapshot | None) -> None:
        with self._lock:
            self._latest, self._failed = snapshot, snapshot is None
            waiters, self._waiters = self._waiters, {}
        for news, loop in waiters.items():
            with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits there any more
                loop.call_soon_threadsafe(news.set)


def dashboard_router(
    store: Store, cluster: ClusterSpec, reader: Callable[[Request], None], sign_in: Callable[[str], str]
) -> APIRouter:
    """The page, its event stream and the rounds. `reader` refuses a request with neither the token's cookie nor
    its Bearer header; `sign_in` turns the token a browser showed into the cookie's value (or refuses it)."""
    router = APIRouter(tags=["dashboard"])
    feed = SnapshotFeed(store, cluster)

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page(request: Request, token: str | None = None) -> Response:
        """The dashboard; `?token=` signs the browser in and sends it back here without the token."""
        if token is not None:
            signed_in = RedirectResponse("/", status_code=303, headers={"Referrer-Policy": "no-referrer"})
            signed_in.set_cookie(cookie_name(request), sign_in(token), httponly=True, samesite="strict")
            return signed_in
        reader(request)
        return HTMLResponse(PAGE, headers=PAGE_HEADERS)

    @router.get(
        "/events",
        dependencies=[Depends(reader), Depends(feed.slot, scope="request")],
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "Server-sent `snapshot` events"}},
    )
    async def events() -> EventSourceResponse:
        """Server-sent `snapshot` events: the jobs, the recent rounds and the cluster's pools, sent at once and
        again whenever the store changes (503 when MAX_STREAMS are open). The stream ends when the client goes (the
        response is cancelled)."""
        return EventSourceResponse(feed.stream(), headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @router.get("/api/rounds", dependencies=[Depends(reader)])
    def rounds(limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> list[Round]:
        """The last `limit` rounds, oldest first: when each started, GPUs busy per type, and its plan."""
        return store.rounds(limit)

    return router
