"""Serving the API from a background thread of the scheduler's process (uvicorn), on loopback by default.

`start_server` returns once the server listens (or has failed to), with the URL it is bound to: with port 0 the
system picks a free port, so two services (or two tests) never race for one.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

STARTUP_TIMEOUT_S = 30.0
GRACEFUL_S = 2.0
"""How long a stopping server waits for open requests: a dashboard's event stream never ends by itself."""


class _Server(uvicorn.Server):
    """uvicorn's server, telling another thread when its start-up is over (`started` says whether it worked)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.startup_over = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.startup_over.set()

    def run_until_stopped(self) -> None:
        try:
            self.run()
        finally:
            self.startup_over.set()  # it ended before or during start-up: nobody waits in vain


@dataclass
class RunningServer:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to finish its requests and stop, and wait (at most `timeout`) for it."""
        self.server.should_exit = True
        self.thread.join(timeout)


def start_server(
    app: FastAPI, host: str = "127.0.0.1", port: int = 0, timeout: float = STARTUP_TIMEOUT_S
) -> RunningServer:
    """Serve `app` on `host:port` from a daemon thread; RuntimeError when it does not listen within `timeout`.

    uvicorn leaves the process's logging alone (no log config, no access log) and its signal handlers are only
    installed from the main thread, so the scheduler keeps Ctrl-C."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=GRACEFUL_S,
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run_until_stopped, name="shockwave-api", daemon=True)
    thread.start()
    if not server.startup_over.wait(timeout) or not server.started:
        server.should_exit = True
        raise RuntimeError(f"the API server did not start listening on {host}:{port}")
    bound_host, bound_port = server.servers[0].sockets[0].getsockname()[:2]
    netloc = f"[{bound_host}]" if ":" in bound_host else bound_host  # an IPv6 address
    return RunningServer(f"http://{netloc}:{bound_port}", server, thread)
