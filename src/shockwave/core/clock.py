"""Time for the scheduling loop: the wall clock for real jobs, a virtual clock for the simulator and for tests on the
runtime's fake backend.

The simulator's virtual clock moves only when the simulator moves it; policies read time through their view and cannot
move it. On the runtime, a backend owns its clock, because lease deadlines and the times jobs report are read on it
(a real job compares its deadline with time.time()); the scheduler reads the same clock. On a virtual clock `sleep`
moves time forward at once, so a fake-backend run takes as its computation, and its outcome does not depend
on the machine's load.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since an arbitrary epoch (Unix time on the wall clock)."""
        ...

    def sleep(self, seconds: float) -> None: ...


class WallClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class VirtualClock:
    """Time that moves only when its owner moves it: a sleep moves it at once, and the simulator sets it at each
    round boundary. Share one between runtime runs that follow each other (a resume)."""

    def __init__(self, start: float = 0.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.time += max(0.0, seconds)

    def move_to(self, time_s: float) -> None:
        self.time = time_s


class Elapsed:
    """Seconds since a run started, on its backend's clock: the time a runtime policy sees."""

    def __init__(self, clock: Clock, start: float) -> None:
        self.clock, self.start = clock, start

    def now(self) -> float:
        return self.clock.now() - self.start
