"""The policy contract: read the scheduler's view, name the jobs that run next round.

Hooks tell a policy what happened (a job arrived, ran, failed, left) so it can keep its own bookkeeping; they never
touch the scheduler's state. The same calls come from the simulator and the Ray runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shockwave.cluster import ClusterSpec
from shockwave.core.state import JobState


@dataclass
class SchedulerView:
    now: float
    round_index: int
    round_seconds: float
    cluster: ClusterSpec
    jobs: dict[int, JobState]
    """Active jobs in arrival (= id) order."""


class Policy:
    """Base class: a policy overrides `plan` and whichever hooks it needs."""

    name = "policy"

    def plan(self, view: SchedulerView) -> list[int]:
        """Jobs to run next round, most deserving first; their gangs must fit on the cluster together."""
        raise NotImplementedError

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        """A job arrived."""

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        """A job completed or was given up."""

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int) -> None:
        """A job ran `steps` steps in `exec_s` seconds (after restart cost) at its current batch size."""

    def round_failed(self, view: SchedulerView, job: JobState) -> None:
        """A job's round made no progress."""

    def summary(self) -> dict[str, Any]:
        """Policy-specific additions to the run's result object."""
        return {}
