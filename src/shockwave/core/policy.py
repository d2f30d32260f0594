"""The policy contract: read the scheduler's view, name the jobs that run next round.

Hooks tell a policy what happened (a job arrived, ran, failed, left) so it can keep its own bookkeeping; they never
touch the scheduler's state. The same calls come from the simulator and the Ray runtime.

What a policy learns between rounds is plain data (`state_dict`/`load_state_dict`): the runtime journals it as
JSON so a resumed run decides as the killed one would have, and nothing read back from disk is ever code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from shockwave.cluster import ClusterSpec
from shockwave.core.state import JobState

T = TypeVar("T")


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

    def state_dict(self) -> dict[str, Any]:
        """Everything the policy has learnt since it was built, as JSON-ready data (string keys, lists, numbers).

        Settings given at construction are not part of it: a resumed run builds the policy the same way first. A
        change to what a policy keeps must bump `shockwave.runtime.memory.FORMAT`, so old journals are refused.
        """
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take up `state` (from `state_dict`, through JSON) so the policy decides as the one that saved it would.

        Raises LookupError, TypeError or ValueError when `state` does not have the shape `state_dict` gives.
        """
        raise NotImplementedError


def json_ids(values: Mapping[int, T]) -> dict[str, T]:
    """A job-id-keyed mapping with JSON's string keys."""
    return {str(job_id): value for job_id, value in values.items()}


def int_ids(values: Mapping[str, Any], kind: Callable[[Any], T]) -> dict[int, T]:
    """The inverse of `json_ids`, each value converted by `kind` (which also checks it)."""
    return {int(job_id): kind(value) for job_id, value in values.items()}
