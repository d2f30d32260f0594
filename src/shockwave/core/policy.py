"""The policy contract: read the scheduler's view, return the next round's plan (`RoundPlan`).

Hooks tell a policy what happened (a job arrived, ran, failed, left) so it can keep its own bookkeeping; they never
touch the scheduler's state. The same calls come from the simulator and the Ray runtime.

What a policy learns between rounds is plain data (`shockwave.core.kept`): the runtime journals it as JSON so a
resumed run decides as the killed one would have, and nothing read back from disk is ever code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.core.kept import KeepsState
from shockwave.core.plan import RoundPlan
from shockwave.core.state import JobState
from shockwave.workload_model.goodput import GoodputModel

Colocation = Callable[[JobState, JobState, str], tuple[float, float] | None]
"""Two jobs' steps/s while they share a gang of GPUs of a type (the first job's rate first), or None when unknown."""


class SchedulerView:
    """What a policy sees: the time (read-only: only the driver moves its clock), the cluster and the active jobs."""

    def __init__(
        self,
        time: Callable[[], float],
        round_seconds: float,
        cluster: ClusterSpec,
        jobs: dict[int, JobState] | None = None,
        round_index: int = 0,
        colocation: Colocation | None = None,
        goodput: GoodputModel | None = None,
    ) -> None:
        self._time = time
        self.goodput = goodput
        """What elastic jobs make of GPUs (`shockwave.workload_model.goodput`), where the driver models them."""
        self.round_seconds, self.cluster, self.round_index = round_seconds, cluster, round_index
        self.jobs: dict[int, JobState] = {} if jobs is None else jobs
        """Active jobs in arrival (= id) order."""
        self._colocation = colocation

    def colocated(self, job: JobState, other: JobState, gpu_type: str) -> tuple[float, float] | None:
        """Both jobs' steps/s while they share `job`'s gang of `gpu_type` GPUs (`job`'s first), or None when the
        driver's throughput model does not know the pair there: space-sharing policies never form such a pair."""
        if self._colocation is None or job.scale_factor != other.scale_factor:
            return None
        return self._colocation(job, other, gpu_type)

    @property
    def now(self) -> float:
        return self._time()

    @property
    def default_gpus(self) -> int:
        """GPUs of the default type: all a policy that knows one type may plan on."""
        return self.cluster.pools[0].gpus

    def plan_on_default_type(self, job_ids: Iterable[int]) -> RoundPlan:
        """Each job alone on its gang of the cluster's default type, in the given order."""
        return RoundPlan.on_type(job_ids, self.jobs, self.cluster.default_type)


class Policy(KeepsState):
    """Base class: a policy overrides `plan` and whichever hooks it needs, and names in `kept` the attributes that
    hold what it learns between rounds (`state_dict`/`load_state_dict` save and restore them from their types: the
    settings it is built with are not part of it, a resumed run builds the policy the same way first)."""

    name = "policy"
    plans_gpu_types = False
    """True for a policy that plans onto every GPU type of the cluster; the others schedule the cluster's default
    type only, and the loop refuses them a cluster of several types rather than leave GPUs idle unseen."""
    places_gangs_whole = False
    """True for a policy whose reference lays each gang on as few servers as it can (a placement of its own, as
    Sia's and Pollux's do): a simulation places its gangs so whatever the mechanics' own placement."""

    def plan(self, view: SchedulerView) -> RoundPlan:
        """The next round, most deserving first; `validate_plan` holds every driver to it."""
        raise NotImplementedError

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        """A job arrived."""

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        """A job completed or was given up."""

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int | float) -> None:
        """After a round a job ran in: it did `steps` steps in `exec_s` seconds of training (start-up excluded) at
        its current batch size. Once per round and job; a job that switched batch size during a (real) round
        reports the part before the switch separately, at its old batch size."""

    def round_failed(self, view: SchedulerView, job: JobState) -> None:
        """A job ran in a round but made no progress (it crashed, or never got to train)."""

    def cluster_emptied(self, view: SchedulerView) -> None:
        """No job is active and no round is planned until the next arrival (`Mechanics.realloc_when_cluster_empty`)."""

    def summary(self) -> dict[str, Any]:
        """Policy-specific additions to the run's result object."""
        return {}
