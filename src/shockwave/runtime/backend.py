"""What the runtime scheduler asks of a cluster, whatever runs the jobs (Ray, or an in-process fake for tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from shockwave.core.clock import Clock
from shockwave.training.lease import steps_per_second
from shockwave.workload_model.throughput import DEFAULT_GPU_TYPE

SHARE = 0.5
"""What each job of a pair holds of every GPU it shares."""


def share_of(partner: int | None) -> float:
    """The fraction of each GPU of its gang a job holds: `SHARE` with a partner, all of it alone."""
    return SHARE if partner is not None else 1.0


@dataclass(frozen=True)
class Launch:
    job_id: int
    gang: int
    """GPUs (and processes) the job runs on."""
    command: list[str]
    deadline: float
    """When the lease ends unless extended, on the backend's clock."""
    total_steps: int
    batch_size: int
    checkpoint: bytes | None
    """The job's latest checkpoint, to resume from (None: start fresh)."""
    resume_step: int = 0
    """The job's progress at `batch_size` (differs from the checkpoint's step after a batch-size change)."""
    epoch_steps: int = 2**62
    """Steps per epoch at `batch_size`."""
    gpu_type: str = DEFAULT_GPU_TYPE
    """The type of GPU the round's plan puts the job on: the gang runs on GPUs of this type only."""
    partner: int | None = None
    """The job the plan pairs this one with (space sharing): both run at once on the same GPUs, each counted as
    holding `SHARE` of every GPU of the gang; the one started second joins the first's GPUs."""

    def joins(self, partner: Launch | None) -> bool:
        """Whether this launch joins the GPUs of `partner` (the running launch of the job it pairs with, if any):
        the partner runs there as its pair, naming this job back, on GPUs of the same type and gang."""
        return (
            partner is not None
            and partner.job_id == self.partner
            and partner.partner == self.job_id
            and (partner.gpu_type, partner.gang) == (self.gpu_type, self.gang)
        )


@dataclass(frozen=True)
class GangStatus:
    step: int | None
    """Global steps done, as last reported by the job (None before its first report)."""
    reported_at: float | None
    exited: bool
    """Every member of the gang has exited."""
    failure: str | None
    """Why the gang failed (a member exited with an error or died), if it did."""
    done: bool
    """The job reached its total step count."""
    requested_batch_size: int | None
    start_step: int | None = None
    """The step this lease started from."""
    first_step_at: float | None = None
    """When the lease's first step began (after the process started and loaded its checkpoint)."""
    process_started_at: float | None = None
    """When the job's process (rank 0) began its lease: from there to the first step it restored its checkpoint and
    met its gang."""

    def lease_rate(self) -> float | None:
        """Steps per second of this lease so far, start-up excluded."""
        return steps_per_second(self.step, self.start_step, self.first_step_at, self.reported_at)


class Backend(Protocol):
    clock: Clock
    """The time leases and reports are in; the scheduler keeps time on it too."""

    def start(self, launch: Launch) -> bool:
        """Place the gang and start it; False when its GPUs cannot be had now (it is not started). A launch with a
        partner joins the partner's GPUs when the partner runs there as its pair, else takes whole GPUs for both."""
        ...

    def granted_type(self, job_id: int) -> str:
        """The GPU type the started gang's GPUs are of, as the cluster granted them (the launch only asked for one):
        what its measured rates are kept under and what the journal says it ran on."""
        ...

    def extend(self, job_id: int, deadline: float) -> None:
        """Let a running job go on until `deadline` (a lease extension: it keeps its GPUs, no restart)."""
        ...

    def stop(self, job_id: int) -> None:
        """End the lease now: the job checkpoints and exits at its next step."""
        ...

    def status(self, job_id: int) -> GangStatus: ...

    def checkpoint(self, job_id: int, newer_than: int) -> tuple[int, bytes] | None:
        """The job's latest checkpoint (its step and bytes) if it is past `newer_than`."""
        ...

    def output(self, job_id: int) -> bytes:
        """What the running gang's first member printed since the last call (its stdout and stderr; b'' for a job
        not running): the service keeps each job's log from these."""
        ...

    def release(self, job_id: int) -> None:
        """Stop whatever is left of the gang and give its GPUs back, verified free before this returns."""
        ...

    def close(self) -> None: ...
