"""The service's web dashboard: one page (`static/dashboard.html`, inline CSS and JS, nothing fetched from elsewhere:
a service's machine may have no internet) that the server-sent events of `/events` keep up to date.

A browser cannot put the token in a header (EventSource sends none), so `GET /?token=...` trades it for an HttpOnly,
SameSite=Strict cookie and redirects to `/`, which takes the token out of the address bar and the history. The
cookie holds a value derived from the token, not the token: it lets a browser read the dashboard, never submit or
cancel. The API (`make_app`) checks it, or the usual Bearer header, through `reader`.

The stream polls the store's `version()` every POLL_S and sends a snapshot (jobs, recent rounds, the cluster's
pools) only when it moved; SQLite is read in a worker thread, never on the event loop.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from shockwave.cluster import ClusterSpec
from shockwave.service.store import Job, Round, Store

POLL_S = 0.5
"""How often each open stream asks the store whether anything changed."""
ROUNDS_SHOWN = 240
"""Rounds each snapshot carries for the occupancy chart (eight hours of two-minute rounds)."""
RECONNECT_MS = 2000
"""How soon a browser reconnects after the stream dropped."""
PAGE = (files("shockwave.service") / "static" / "dashboard.html").read_text(encoding="utf-8")


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
        "state": job.state,
        "gpu_type": job.gpu_type,
        "gpus": job.gpus,
        "requested_gpus": job.spec.gpus,
        "requested_types": job.spec.gpu_types or [],
        "progress_steps": job.progress_steps,
        "total_steps": job.total_steps,
        "rho": job.rho,
        "batch_size": job.batch_size,
        "estimated_finish_s": job.estimated_finish_s,
        "reason": job.reason,
    }


def dashboard_router(
    store: Store, cluster: ClusterSpec, reader: Callable[[Request], None], sign_in: Callable[[str], str]
) -> APIRouter:
    """The page, its event stream and the rounds. `reader` refuses a request with neither the token's cookie nor
    its Bearer header; `sign_in` turns the token a browser showed into the cookie's value (or refuses it)."""
    router = APIRouter(tags=["dashboard"])
    pools = {pool.gpu_type: pool.gpus for pool in cluster.pools}

    def snapshot() -> dict[str, Any]:
        version = store.version()  # read first: a change while reading is sent again, never missed
        return {
            "version": version,
            "cluster": pools,
            "jobs": [job_row(job) for job in store.jobs()],
            "rounds": [r.model_dump() for r in store.rounds(ROUNDS_SHOWN)],
        }

    @router.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page(request: Request, token: str | None = None) -> Response:
        """The dashboard; `?token=` signs the browser in and sends it back here without the token."""
        if token is not None:
            signed_in = RedirectResponse("/", status_code=303, headers={"Referrer-Policy": "no-referrer"})
            signed_in.set_cookie(cookie_name(request), sign_in(token), httponly=True, samesite="strict")
            return signed_in
        reader(request)
        return HTMLResponse(PAGE, headers=PAGE_HEADERS)

    @router.get("/events", response_class=EventSourceResponse, dependencies=[Depends(reader)])
    async def events() -> AsyncIterator[ServerSentEvent]:
        """Server-sent `snapshot` events: the jobs, the recent rounds and the cluster's pools, sent at once and
        again whenever the store changes. The stream ends when the client goes (the response is cancelled)."""
        seen = None
        while True:
            version = await run_in_threadpool(store.version)
            if version != seen:
                current = await run_in_threadpool(snapshot)
                seen = current["version"]
                yield ServerSentEvent(event="snapshot", id=str(seen), data=current, retry=RECONNECT_MS)
            await anyio.sleep(POLL_S)

    @router.get("/api/rounds", dependencies=[Depends(reader)])
    def rounds(limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> list[Round]:
        """The last `limit` rounds, oldest first: when each started, GPUs busy per type, and its plan."""
        return store.rounds(limit)

    return router
