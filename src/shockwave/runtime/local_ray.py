"""A Ray instance of our own on this machine (no --address): reachable from this machine only, and gone with us.

Loopback only. Ray has no public option for it on Linux: `ray.init(_node_ip_address="127.0.0.1")` is rewritten to
the machine's outbound address (`ray._private.services.resolve_ip_for_localhost`), and GCS, raylet, driver, workers
and agents then listen on every interface (checked with Ray 2.60). A single-node instance on 127.0.0.1 is what Ray
does on macOS and Windows, where `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER` is 0 by default: with it, every server binds to
127.0.0.1. Ray reads that variable once, when it is imported, so it is set for the time of `ray.init` both in the
environment the Ray processes inherit and in the driver's imported constant. `tests/runtime/test_ray_backend.py` checks
every listening socket of the instance.

Gone with us. When the driver is killed, Ray kills its GCS and raylet at once (a parent-death signal) and the
workers follow within seconds, but the dashboard and runtime-env agents stay about a minute (they report the raylet's
death to the dead GCS, with a 60 s timeout). A `Reaper` takes them and anything else the instance started (job
processes included).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from shockwave.runtime.lifetime import Reaper, descendants, environment_variable

log = logging.getLogger(__name__)
SINGLE_NODE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class LocalRay:
    """`ray.init(address="local", **options)`: always a new single-node instance on loopback, never one found on the
    machine (`ray start` leaves its address in /tmp/ray, where `ray.init()` would look); `close()` shuts it down."""

    def __init__(self, **options: Any) -> None:
        import ray

        self.reaper = Reaper()
        me = os.getpid()
        before = descendants([me])
        try:
            with self.reaper.marking(), _loopback_only():
                ray.init(address="local", **options)
        except BaseException:
            self.reaper.close()
            raise
        self.reaper.adopt(descendants([me]) - before)  # GCS, raylet, agents: running once ray.init returns

    def close(self) -> None:
        import ray

        ray.shutdown()
        self.reaper.close()


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    from ray._private import ray_constants

    if not hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        log.warning("this Ray version has no single-node switch: the local instance may listen on every interface")
    saved = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    ray_constants.ENABLE_RAY_CLUSTER = False  # what the driver read at import; the Ray processes read the variable
    try:
        with environment_variable(SINGLE_NODE, "0"):
            yield
    finally:
        if saved is None:
            del ray_constants.ENABLE_RAY_CLUSTER
        else:
            ray_constants.ENABLE_RAY_CLUSTER = saved
