"""What a driver needs to know of a job, whoever describes it: a trace line, a service submission or a generator.

A trace line also holds how the reference launches the job (command, folder, step flag); only `write_trace` reads
those, so the scheduling loop, the simulator, the runtime and the service work on this description alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from shockwave.workload_model.catalog import family


@dataclass(frozen=True)
class Job:
    model: str
    batch_size: int
    """The batch size the job starts at."""
    scale_factor: int
    """GPUs in the job's gang."""
    total_steps: int | float
    """Whole steps, but a static job's may hold a fraction of a step (Gavel's generated jobs: run time x rate)."""
    arrival: float
    mode: str = "static"
    priority_weight: float = 1.0
    slo: float = -1.0
    """SLO factor: the job should finish within this many times its duration (else its isolated time); -1: none."""
    duration: int = 0
    """The run time the trace's generator drew, in seconds (0 where it states none)."""
    restart_s: float | None = None
    """Seconds a restart costs this job (its application's checkpoint and restore, as Sia's profiles give it);
    it wins over the mechanics' costs (`--restart-seconds`, `--restart-seconds-by-gang`). None: the mechanics'
    cost for its gang."""
    continuous: bool = False
    """Progress counts fractions of a step (a profile's continuous progress, as Sia's simulator counts it: a step
    slower than a round still advances the job); else each round does whole steps."""
    elastic: bool = False
    """Goodput-adaptive (`shockwave.workload_model.goodput`): a policy that adapts jobs gives it any number of GPUs
    of one type each round, it picks its own batch, and `total_steps` is its work in its throughput model's units
    of progress; `batch_size` and `scale_factor` are what it asked for, which its finish-time fairness is measured
    against."""
    tenant: str | None = None
    """The team the job belongs to (`shockwave.workload_model.tenants`), where the cluster is shared between tenants."""

    @property
    def job_type(self) -> str:
        return family(self.model).job_type(self.batch_size)
