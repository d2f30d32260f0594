"""What the scheduler knows about each job, shared by the simulator and the runtime.

Progress is counted in steps (global minibatches) at the job's *current* batch size; a batch-size change rescales
both the total and the progress so the job's epoch count is preserved (spec §1.5b).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from shockwave.core.kept import KeepsState
from shockwave.workload_model.catalog import ModelFamily, family
from shockwave.workload_model.goodput import Measurement, Training
from shockwave.workload_model.job import Job
from shockwave.workload_model.profile import JobProfile


@dataclass
class JobState(KeepsState):
    kept = (
        "rates",
        "batch_size",
        "total_steps",
        "steps_done",
        "pending_batch_size",
        "batch_size_changes",
        "run_time_s",
        "failures",
        "last_finish_s",
        "training",
        "measured",
    )
    """The fields that change after admission: `restore` takes the rest from the trace."""

    id: int
    spec: Job
    family: ModelFamily
    profile: JobProfile
    rates: dict[str, float]
    """Steps per second on each GPU type the job can run on, at its current batch size."""
    initial_batch_size: int
    batch_size: int
    total_steps: int | float
    """Whole steps, except a Gavel-generated job's: its duration times its rate, a fraction of a step included."""
    steps_done: int | float = 0
    pending_batch_size: int | None = None
    batch_size_changes: int = 0
    run_time_s: float = 0.0
    failures: int = 0
    last_finish_s: float = 0.0
    """Finish time of the job's latest round; its completion time once it has left."""
    training: Training | None = None
    """An elastic job's batch on its current GPUs (None before it first ran)."""
    measured: dict[str, list[Measurement]] = field(default_factory=dict)
    """The steps an elastic job has timed, by GPU type."""

    @classmethod
    def admit(cls, job_id: int, spec: Job, profile: JobProfile, rates: dict[str, float]) -> JobState:
        model, bs = spec.model, spec.batch_size
        return cls(
            id=job_id,
            spec=spec,
            family=family(model),
            profile=profile,
            rates=rates,
            initial_batch_size=bs,
            batch_size=bs,
            total_steps=spec.total_steps,
        )

    @classmethod
    def restore(cls, job_id: int, spec: Job, profile: JobProfile, state: dict[str, Any]) -> JobState:
        """The job as `state_dict` left it, its trace line and profile given again."""
        job = cls.admit(job_id, spec, profile, rates={})
        job.load_state_dict(state)
        return job

    @property
    def arrival_s(self) -> float:
        return self.spec.arrival

    @property
    def scale_factor(self) -> int:
        return self.spec.scale_factor

    def rate(self, gpu_type: str) -> float:
        """Steps per second on `gpu_type` (0 where the job cannot run)."""
        return self.rates.get(gpu_type, 0.0)

    @property
    def remaining_steps(self) -> int | float:
        return self.total_steps - self.steps_done

    @property
    def iterations_per_epoch(self) -> int:
        return self.family.iterations_per_epoch(self.batch_size)

    @property
    def epochs_started(self) -> int:
        return math.ceil(self.steps_done / self.iterations_per_epoch)

    @property
    def epochs_completed(self) -> int:
        return int(self.steps_done // self.iterations_per_epoch)


def rescale_to_batch_size(job: JobState, new_bs: int, *, round_up_progress: bool) -> None:
    """Switch a job's batch size keeping its epoch count (spec §1.5b step 3-4).

    The reference rounds a partially done epoch up (free progress, spec §9 item 9); `round_up_progress=False`
    converts progress exactly instead (the `corrected` mechanics).
    """
    old_ipe = job.iterations_per_epoch
    new_ipe = job.family.iterations_per_epoch(new_bs)
    epochs = math.ceil(job.total_steps / old_ipe)
    new_total = math.ceil(job.total_steps * (1 / (new_bs / job.batch_size)))
    if math.ceil(new_total / new_ipe) != epochs:
        new_total = new_ipe * epochs
    if round_up_progress:
        new_done = math.ceil(job.steps_done / old_ipe) * new_ipe
    else:
        done_epochs, partial = divmod(job.steps_done, old_ipe)
        new_done = done_epochs * new_ipe + math.floor(partial / old_ipe * new_ipe)
    job.total_steps, job.steps_done, job.batch_size = new_total, new_done, new_bs
    job.batch_size_changes += 1
