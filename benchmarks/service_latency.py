"""How long `POST /jobs` takes while the scheduler is solving a round (issue 20's bar: under 200 ms); printed, never
asserted.

One `shockwave serve` in this process (the API's thread and the scheduler's, as in production) on an in-process fake
cluster of 64 GPUs running on the wall clock, with Shockwave planning a queue of a few hundred jobs: its solves take
a good part of each round. A client submits a job every SUBMIT_EVERY_S over HTTP with the token, as `shockwave
submit` does, and times each answer; the solves' start and end times are recorded, and submissions whose request
overlapped a solve are reported apart.

`--readers N` opens N slow dashboard streams (`/events`) once the queue is filled, as browsers on a slow link: each
reads READ_BYTES every READ_EVERY_S, so a snapshot of the whole queue takes it seconds. They must not hold
submissions up (issue 31: 30 of them on 1,680 queued jobs once took `POST /jobs` from 77 ms to 4.3 s at p95).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2 as httpx
from rich.console import Console
from rich.table import Table

from shockwave.core.clock import WallClock
from shockwave.core.cluster import ClusterSpec
from shockwave.core.loop import SchedulingLoop
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.service.endpoint import Endpoint, read_endpoint
from shockwave.service.serve import ServeRequest, serve

SUBMIT_EVERY_S = 0.05
FAMILIES = ("ResNet-18", "LM", "ResNet-50", "Transformer")
READ_BYTES = 16 << 10
READ_EVERY_S = 0.1
"""A slow reader's pace: 160 KiB/s, a few seconds per snapshot of a queue of 1,700 jobs."""


class SlowReaders:
    """N open `/events` streams, all read by one thread at READ_BYTES per stream every READ_EVERY_S (a thread per
    reader would take the interpreter's lock from the service that this process also runs)."""

    def __init__(self, url: str, token: str, count: int) -> None:
        address = urlsplit(url)
        host, port = address.hostname or "127.0.0.1", address.port or 80
        request = (
            f"GET /events HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        ).encode()
        self.sockets: list[socket.socket] = []
        for _ in range(count):
            reader = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, READ_BYTES)  # the kernel holds little for it
            reader.connect((host, port))
            reader.sendall(request)
            reader.setblocking(False)
            self.sockets.append(reader)
        self.heads = [b""] * count
        self.received = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, name="slow-readers", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stop.wait(READ_EVERY_S):
            for i, reader in enumerate(self.sockets):
                try:
                    data = reader.recv(READ_BYTES)
                except BlockingIOError:
                    continue
                self.received += len(data)
                if len(self.heads[i]) < 12:
                    self.heads[i] += data[:12]

    def close(self) -> str:
        """Stop reading and hang up; what the streams were answered and how much they read."""
        self.stop.set()
        self.thread.join()
        for reader in self.sockets:
            reader.close()
        answers = [head[9:12].decode() or "none" for head in self.heads]
        counts = ", ".join(f"{answers.count(code)} answered {code}" for code in sorted(set(answers)))
        return f"{len(self.sockets)} slow /events readers ({counts}) read {self.received / 1e6:.1f} MB"


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


def _start_service(out: Path, stop: threading.Event) -> tuple[threading.Thread, Endpoint]:
    """`shockwave serve` on the fake 64-GPU cluster, in a thread of this process; returns once it listens."""
    request = ServeRequest(out=out, cluster="v100:64", policy="shockwave", round_seconds=3.0)

    def backend(cluster: ClusterSpec) -> FakeBackend:
        return FakeBackend({"v100": 64}, steps_per_s=20.0, clock=WallClock())

    service = threading.Thread(target=serve, args=(request, stop, backend), daemon=True)
    service.start()
    while not (out / "endpoint.json").exists():
        time.sleep(0.05)
    return service, read_endpoint(out)


def _submit(client: httpx.Client, i: int) -> tuple[float, float]:
    """Submit the i-th job as `shockwave submit` would; when the request began and when its answer came."""
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


def _measure(client: httpx.Client, first: int, seconds: float) -> list[tuple[float, float]]:
    """A submission every SUBMIT_EVERY_S for `seconds`, numbered from `first`; each one's request times."""
    timed: list[tuple[float, float]] = []
    until = time.monotonic() + seconds
    i = first
    while time.monotonic() < until:
        timed.append(_submit(client, i))
        i += 1
        time.sleep(SUBMIT_EVERY_S)
    return timed


def _report(timed: list[tuple[float, float]], windows: list[tuple[float, float]], queued: int, watched: str) -> Table:
    """The latencies, all and those overlapping a solve, with the solves of the measurement in the caption."""
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
        f"{queued} jobs queued first, then one every {SUBMIT_EVERY_S * 1000:.0f} ms; {watched}. "
        "Bar: under 200 ms."
    )
    return table


def main() -> None:
    """Fill the queue, then time submissions for a while (with slow readers, if asked) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, default=900, help="jobs queued before the measurement")
    parser.add_argument("--seconds", type=float, default=40.0, help="how long to keep submitting")
    parser.add_argument("--readers", type=int, default=0, help="slow dashboard streams open while measuring")
    args = parser.parse_args()
    windows = _solves()
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as folder:
        service, endpoint = _start_service(Path(folder), stop)
        client = httpx.Client(
            base_url=endpoint.url, headers={"Authorization": f"Bearer {endpoint.token}"}, trust_env=False
        )
        for i in range(args.queued):
            _submit(client, i)
        readers = SlowReaders(endpoint.url, endpoint.token, args.readers) if args.readers else None
        timed = _measure(client, args.queued, args.seconds)
        watched = readers.close() if readers is not None else "no dashboard stream open"
        stop.set()
        service.join(timeout=120)
    Console().print(_report(timed, windows, args.queued, watched))


if __name__ == "__main__":
    main()
