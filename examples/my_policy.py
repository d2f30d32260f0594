from shockwave.core.plan import RoundPlan
from shockwave.core.policy import Policy, SchedulerView


class ShortestFirst(Policy):
    """Shortest remaining work first: the jobs nearest to done run, as fit; on a tie, the one run least."""

    name = "shortest_first"  # what results call it (default: the class name)
    kept = ("rounds_run",)  # what it learns between rounds: a resumed run gets it back
    rounds_run: dict[int, int]

    def __init__(self) -> None:
        self.rounds_run = {}

    def plan(self, view: SchedulerView) -> RoundPlan:
        gpu_type = view.cluster.default_type
        jobs = sorted(
            view.jobs.values(),
            key=lambda job: (job.remaining_steps / max(job.rate(gpu_type), 1e-9), self.rounds_run.get(job.id, 0)),
        )
        free, chosen = view.default_gpus, []
        for job in jobs:
            if job.scale_factor <= free:  # a job runs on its whole gang or not at all
                chosen.append(job.id)
                free -= job.scale_factor
                self.rounds_run[job.id] = self.rounds_run.get(job.id, 0) + 1
        return view.plan_on_default_type(chosen)
