"""An in-process stand-in for a cluster, for fast tests of the runtime scheduler: no Ray, no processes.

A started gang advances at a fixed rate (steps per second on the backend's clock) after `startup_s`, from where the
launch says until its deadline or its total, and exits `exit_s` after its deadline (the time a real job takes to
write its checkpoint) or `final_exit_s` after its last step; `fail(job)` makes it crash. Its "checkpoint" is the
step count. The clock is virtual unless one is given, so a run takes only its computation's time and does not
depend on the machine's load.

GPUs are one pool that takes a launch of any type (`gpus=4`), or pools by type (`gpus={"v100": 2, "k80": 2}`): a
launch then waits for room in its type's pool, as on Ray, and may train at its type's own rate. A launch with a
partner (a pair sharing GPUs) joins its partner's GPUs when the partner runs as its pair, else takes a whole gang for
both; each job of a pair trains at `pair_speed` of its rate alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shockwave.core.clock import Clock, VirtualClock
from shockwave.runtime.backend import GangStatus, Launch


@dataclass
class _Gang:
    launch: Launch
    start_step: int
    started: float
    deadline: float
    failed: str | None = None
    failed_at: int | None = None
    printed: int | None = None
    """The step its output last reported."""
    joined: bool = False
    """It runs on its partner's GPUs (they are counted with the partner's gang)."""


class FakeBackend:
    def __init__(
        self,
        gpus: int | Mapping[str, int],
        steps_per_s: float | Mapping[str, float] = 100.0,
        startup_s: float = 0.0,
        exit_s: float = 0.0,
        clock: Clock | None = None,
        final_exit_s: float = 0.0,
        pair_speed: float = 0.6,
    ) -> None:
        self.pools = dict(gpus) if isinstance(gpus, Mapping) else None
        """GPUs by type, or None: one pool, whatever type a launch names."""
        self.gpus = sum(self.pools.values()) if self.pools is not None else int(gpus)
        self.rates = steps_per_s
        self.startup_s, self.exit_s, self.final_exit_s = startup_s, exit_s, final_exit_s
        self.pair_speed = pair_speed
        self.clock: Clock = clock or VirtualClock()
        self.gangs: dict[int, _Gang] = {}
        self.launches: list[Launch] = []
        self.refused: list[Launch] = []
        """Launches there was no room for (a scheduler that plans within the pools never sees one)."""

    def rate(self, gang: _Gang) -> float:
        rates = self.rates
        alone = rates[gang.launch.gpu_type] if isinstance(rates, Mapping) else rates
        return alone * self.pair_speed if gang.launch.partner is not None else alone

    def _step(self, gang: _Gang, at: float) -> int:
        if gang.failed_at is not None:
            return gang.failed_at
        ran = max(0.0, min(at, gang.deadline) - gang.started - self.startup_s)
        return min(gang.launch.total_steps, gang.start_step + int(ran * self.rate(gang)))

    def start(self, launch: Launch) -> bool:
        if self.pools is not None and launch.gpu_type not in self.pools:
            raise ValueError(f"the fake cluster has no {launch.gpu_type!r} GPUs (it has {', '.join(self.pools)})")
        joins = self._joins(launch)
        if not joins and self._held(launch.gpu_type) + launch.gang > self._room(launch.gpu_type):
            self.refused.append(launch)
            return False
        start = launch.resume_step  # what a real job does after a batch-size change; else its checkpoint's step
        self.gangs[launch.job_id] = _Gang(launch, start, self.clock.now(), launch.deadline, joined=joins)
        self.launches.append(launch)
        return True

    def _joins(self, launch: Launch) -> bool:
        """The launch's partner runs as its pair on GPUs of its type: it takes no GPUs of its own."""
        partner = self.gangs.get(launch.partner) if launch.partner is not None else None
        return launch.joins(partner.launch if partner is not None else None)

    def _room(self, gpu_type: str) -> int:
        return self.gpus if self.pools is None else self.pools[gpu_type]

    def _held(self, gpu_type: str) -> int:
        """GPUs held in `gpu_type`'s pool (the one pool's, whatever the type, without pools)."""
        return sum(
            g.launch.gang
            for g in self.gangs.values()
            if not g.joined and (self.pools is None or g.launch.gpu_type == gpu_type)
        )

    def granted_type(self, job_id: int) -> str:
        return self.gangs[job_id].launch.gpu_type

    def extend(self, job_id: int, deadline: float) -> None:
        gang = self.gangs[job_id]
        if self.clock.now() < gang.deadline:  # a lease that has run out is over: the job is already checkpointing
            gang.deadline = deadline

    def stop(self, job_id: int) -> None:
        gang = self.gangs[job_id]
        gang.deadline = min(gang.deadline, self.clock.now())

    def fail(self, job_id: int, reason: str = "member 0 exited with code -9") -> None:
        gang = self.gangs[job_id]
        gang.failed_at = self._step(gang, self.clock.now())
        gang.failed = reason

    def status(self, job_id: int) -> GangStatus:
        gang, now = self.gangs[job_id], self.clock.now()
        step = self._step(gang, now)
        done = step >= gang.launch.total_steps
        first = gang.started + self.startup_s
        reported = min(now, gang.deadline)
        if done:  # like a real job, it last reported when it took its last step
            reported = min(reported, first + (gang.launch.total_steps - gang.start_step) / self.rate(gang))
        # it exits once it has written its checkpoint after its last step or its lease's end
        leaves = reported + self.final_exit_s if done else gang.deadline + self.exit_s
        exited = gang.failed is not None or now >= leaves
        first_step = first if reported > first else None
        return GangStatus(step, reported, exited, gang.failed, done, None, gang.start_step, first_step, gang.started)

    def checkpoint(self, job_id: int, newer_than: int) -> tuple[int, bytes] | None:
        step = self._step(self.gangs[job_id], self.clock.now())
        return (step, str(step).encode()) if step > newer_than else None

    def output(self, job_id: int) -> bytes:
        """A line for the step reached, when it moved since the last call (what a training script's log says)."""
        gang = self.gangs.get(job_id)
        if gang is None:
            return b""
        step = self._step(gang, self.clock.now())
        if step == gang.printed:
            return b""
        gang.printed = step
        return f"job {job_id} at step {step}\n".encode()

    def release(self, job_id: int) -> None:
        gang = self.gangs.pop(job_id)
        partner = self.gangs.get(gang.launch.partner) if gang.launch.partner is not None else None
        if partner is not None and partner.joined and not gang.joined:  # it joined these GPUs: it holds them now
            partner.joined = False

    def close(self) -> None:
        self.gangs.clear()
