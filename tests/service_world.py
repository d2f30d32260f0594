"""The service on the fake cluster in virtual time, for tests: things happen at given virtual seconds (a submission, a
cancellation, a stop), and the fake cluster notes when each lease was released."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from shockwave.core.clock import VirtualClock
from shockwave.core.cluster import ClusterSpec
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.service.serve import ServeRequest
from shockwave.service.spec import JobSpec

RATE = 100.0
"""Fake steps per second: a 1,000-step job needs 10 s of a GPU."""


class World(VirtualClock):
    """Virtual time in which things happen at given seconds (a submission, a cancellation, a stop), each when the
    scheduler's waiting first reaches it."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[float, Callable[[], None]]] = []

    def at(self, time_s: float, action: Callable[[], None]) -> None:
        self.events.append((time_s, action))
        self.events.sort(key=lambda event: event[0])

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        while self.events and self.events[0][0] <= self.time:
            self.events.pop(0)[1]()


def spec(name: str, steps: int = 1000, **fields: Any) -> JobSpec:
    return JobSpec.model_validate({"name": name, "family": "ResNet-18", "steps": steps, **fields})


def request(out: Path, **changes: Any) -> ServeRequest:
    fields: dict[str, Any] = {"cluster": "v100:2", "policy": "max_min_fairness", "round_seconds": 5.0}
    return ServeRequest(out=out, **(fields | changes))


class Releasing(FakeBackend):
    """The fake cluster, noting when each job's lease was released."""

    def __init__(self, pools: dict[str, int], clock: World) -> None:
        super().__init__(pools, steps_per_s=RATE, clock=clock)
        self.released: list[tuple[int, float]] = []

    def release(self, job_id: int) -> None:
        self.released.append((job_id, self.clock.now()))
        super().release(job_id)


def backend_on(world: World, fakes: list[Releasing]) -> Callable[[ClusterSpec], Releasing]:
    def make(cluster: ClusterSpec) -> Releasing:
        fakes.append(Releasing({pool.gpu_type: pool.gpus for pool in cluster.pools}, world))
        return fakes[-1]

    return make


def launched(fakes: list[Releasing], job_id: int) -> list[Any]:
    return [launch for fake in fakes for launch in fake.launches if launch.job_id == job_id]
