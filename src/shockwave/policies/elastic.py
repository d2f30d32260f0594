"""What a policy of goodput-adaptive jobs (Sia, Pollux, elastic Shockwave) keeps about them: the configuration (GPU
type, GPUs) each runs in this round, how often each has restarted, which both discount a move by (a job's first
start is not a restart; resuming after a pause is), and until when a job that moved restores its checkpoint (Sia
and Shockwave keep such a job where it is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shockwave.core.kept import KeepsState
from shockwave.core.policy import SchedulerView
from shockwave.core.state import JobState
from shockwave.workload_model.sia.profiles import DEFAULT_RESTART_S


class Allocations(KeepsState):
    kept = ("current", "restarts", "jobs_seen", "restarts_total", "restoring_until")
    current: dict[int, tuple[str, int]]
    restarts: dict[int, int]
    jobs_seen: int
    restarts_total: int
    restoring_until: dict[int, float]
    """When each job that started in a new configuration is done restoring its checkpoint."""

    def __init__(self) -> None:
        self.current, self.restarts, self.restoring_until = {}, {}, {}
        self.jobs_seen = self.restarts_total = 0

    def record(self, view: SchedulerView, chosen: dict[int, tuple[str, int]]) -> None:
        """The next round's configurations."""
        moved = [j for j, config in chosen.items() if self.current.get(j) != config]
        for j in moved:
            if view.jobs[j].run_time_s > 0:
                self.restarts[j] = self.restarts.get(j, 0) + 1
                self.restarts_total += 1
            self.restoring_until[j] = view.now + restart_seconds(view.jobs[j])
        self.current = dict(chosen)

    def restoring(self, now: float, then_train_s: Mapping[int, float] | None = None) -> dict[int, tuple[str, int]]:
        """The configuration of each running job still restoring its checkpoint, or, given `then_train_s`, that has
        not yet trained that many seconds since (a job that moves again so soon wastes the restart it just paid)."""
        after = then_train_s or {}
        return {
            j: self.current[j]
            for j, until in self.restoring_until.items()
            if j in self.current and until + after.get(j, 0.0) > now
        }

    def restarts_of(self, job: JobState) -> int:
        return self.restarts.get(job.id, 0)

    def move_factor(self, job: JobState, now: float, penalty_s: float) -> float:
        """Share of its life a running job keeps if it moves once more (`restart_factor`), 1 while it is younger
        than one penalty (Sia's rule)."""
        age = now - job.arrival_s
        return 1.0 if age < penalty_s else restart_factor(age, self.restarts_of(job), penalty_s)

    def added(self) -> None:
        self.jobs_seen += 1

    def forget(self, job: JobState) -> None:
        self.current.pop(job.id, None)
        self.restarts.pop(job.id, None)
        self.restoring_until.pop(job.id, None)

    def summary(self) -> dict[str, Any]:
        per_job = self.restarts_total / self.jobs_seen if self.jobs_seen else 0.0
        return {"restarts": self.restarts_total, "restarts_per_job": per_job}


def restart_factor(age_s: float, restarts: int, penalty_s: float) -> float:
    """Share of a job's life left to it if it restarts once more: (age - restarts x penalty) / (age + penalty), at
    least 0 (Pollux's discount of a move; Sia's too, which spares jobs younger than one penalty)."""
    return max(age_s - restarts * penalty_s, 0.0) / (age_s + penalty_s)


def restart_seconds(job: JobState) -> float:
    """What starting in a new configuration costs a job: its application's restart, else Sia's default."""
    return DEFAULT_RESTART_S if job.spec.restart_s is None else job.spec.restart_s
