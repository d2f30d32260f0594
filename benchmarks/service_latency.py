"""How long `POST /jobs` takes while the scheduler is solving a round (issue 20's bar: under 200 ms); printed, never
asserted.

One `shockwave serve` in this process (the API's thread and the scheduler's, as in production) on an in-process fake
cluster of 64 GPUs running on the wall clock, with Shockwave planning a queue of a few hundred jobs: its solves take
a good part of each round. A client submits a job every SUBMIT_EVERY_S over HTTP with the token, as `shockwave
submit` does, and times each answer; the solves' start and end times are recorded, and submissions whose request
overlapped a solve are reported apart.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx2 as httpx
from rich.console import Console
from rich.table import Table

from shockwave.cluster import ClusterSpec
from shockwave.core.clock import WallClock
from shockwave.core.loop import SchedulingLoop
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.service.endpoint import read_endpoint
from shockwave.service.serve import ServeRequest, serve

SUBMIT_EVERY_S = 0.05
FAMILIES = ("ResNet-18", "LM", "ResNet-50", "Transformer")


def _solves() -> list[tuple[float, float]]:
    """Wrap the loop's planning step to record when each solve ran (monotonic seconds)."""
    windows: list[tuple[float, float]] = []
    plan = SchedulingLoop.next_plan

    def timed(self: SchedulingLoop) -> object:
        began = time.monotonic()
        try:
            return plan(self)
        finally:
            windows.append((began, time.monotonic()))

    SchedulingLoop.next_plan = timed  # type: ignore[method-assign]
    return windows


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return (float("nan"),) * 3
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return statistics.median(ordered), p95, ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, default=900, help="jobs queued before the measurement")
    parser.add_argument("--seconds", type=float, default=40.0, help="how long to keep submitting")
    args = parser.parse_args()
    windows = _solves()
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        request = ServeRequest(out=out, cluster="v100:64", policy="shockwave", round_seconds=3.0)

        def backend(cluster: ClusterSpec) -> FakeBackend:
            return FakeBackend({"v100": 64}, steps_per_s=20.0, clock=WallClock())

        service = threading.Thread(target=serve, args=(request, stop, backend), daemon=True)
        service.start()
        while not (out / "endpoint.json").exists():
            time.sleep(0.05)
        endpoint = read_endpoint(out)
        client = httpx.Client(
            base_url=endpoint.url, headers={"Authorization": f"Bearer {endpoint.token}"}, trust_env=False
        )

        def submit(i: int) -> tuple[float, float]:
            body = {
                "name": f"job-{i}",
                "family": FAMILIES[i % len(FAMILIES)],
                "gpus": 1 + i % 4 // 3,
                "steps": 3000 + 37 * i,
            }
            began = time.monotonic()
            answer = client.post("/jobs", json=body)
            ended = time.monotonic()
            assert answer.status_code == 201, answer.text
            return began, ended

        for i in range(args.queued):
            submit(i)
        timed: list[tuple[float, float]] = []
        until = time.monotonic() + args.seconds
        i = args.queued
        while time.monotonic() < until:
            timed.append(submit(i))
            i += 1
            time.sleep(SUBMIT_EVERY_S)
        stop.set()
        service.join(timeout=120)
    solves = [w for w in windows if w[0] >= timed[0][0]]
    during = [e - b for b, e in timed if any(b < s_end and e > s_start for s_start, s_end in solves)]
    overall = [e - b for b, e in timed]
    table = Table(title="POST /jobs latency while the scheduler runs (64 GPUs, Shockwave, 3 s rounds)")
    for header in ("submissions", "count", "p50 ms", "p95 ms", "max ms"):
        table.add_column(header, justify="right" if header != "submissions" else "left")
    for label, values in (("all", overall), ("overlapping a solve", during)):
        p50, p95, top = _quantiles(values)
        table.add_row(label, str(len(values)), f"{1000 * p50:.1f}", f"{1000 * p95:.1f}", f"{1000 * top:.1f}")
    s50, s95, smax = _quantiles([e - b for b, e in solves])
    table.caption = (
        f"{len(solves)} solves during the measurement: p50 {s50:.2f} s, p95 {s95:.2f} s, max {smax:.2f} s; "
        f"{args.queued} jobs queued first, then one every {SUBMIT_EVERY_S * 1000:.0f} ms. Bar: under 200 ms."
    )
    Console().print(table)


if __name__ == "__main__":
    main()
