from typing import Any

from shockwave.core.plan import RoundPlan
from shockwave.core.policy import Policy, SchedulerView


class ShortestFirst(Policy):
    """Shortest remaining work first: the jobs nearest to done run, as fit."""

    name = "shortest_first"  # what results call it (default: the class name)

    def plan(self, view: SchedulerView) -> RoundPlan:
        gpu_type = view.cluster.default_type
        jobs = sorted(view.jobs.values(), key=lambda job: job.remaining_steps / max(job.rate(gpu_type), 1e-9))
        free, chosen = view.default_gpus, []
        for job in jobs:
            if job.scale_factor <= free:  # a job runs on its whole gang or not at all
                chosen.append(job.id)
                free -= job.scale_factor
        return view.plan_on_default_type(chosen)

    def state_dict(self) -> dict[str, Any]:
        return {}  # nothing learnt between rounds: a resumed run needs nothing back

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
