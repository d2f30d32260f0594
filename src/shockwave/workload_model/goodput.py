"""What a driver and a policy need of goodput-adaptive jobs (`Job.elastic`): how far a job gets on GPUs of a
type, and what a policy may estimate it is worth elsewhere from what the job has measured. Progress is in the
model's own units (for Sia's applications, iterations at the smallest batch).

Such a job learns as it runs (Pollux's co-adaptation): it keeps the step times it measured on each GPU type and
the batch it trains with (`Training`), picks its batch from a model fitted to those measurements whenever its GPUs
change and after every stretch of training, and a policy estimates its goodput from the same measurements, never
from the truth. The job's learning is plain data in its state (`JobState.training`, `JobState.measured`), saved
like the rest.

A throughput model that knows such jobs exposes one as its `goodput` attribute (`goodput_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

Measurement = tuple[int, int, float, float, float]
"""A step the job timed: (nodes, GPUs, per-GPU batch, seconds, of which gradient synchronisation)."""


@dataclass(frozen=True)
class Training:
    """What an elastic job trains with on its current GPUs, and the epoch and global batch of its last step (whose
    gradient noise it has measured: a batch just picked has not been stepped yet, so its noise is not known)."""

    gpus: int
    local: int
    """Per-GPU batch."""
    accumulation: int
    """Extra forward-backward passes per optimizer step."""
    epoch: int
    stepped_batch: int = 0
    """The global batch of the last step, whose gradient noise the job knows (left out: this one's own batch)."""

    def __post_init__(self) -> None:
        if not self.stepped_batch:
            object.__setattr__(self, "stepped_batch", self.batch)

    @property
    def batch(self) -> int:
        return self.gpus * self.local * (self.accumulation + 1)


@dataclass(frozen=True)
class Advanced:
    """A job's round: its progress after it, the seconds it trained, what it trains with at the end, and the steps
    it timed for the first time."""

    done: float
    trained_s: float
    training: Training | None
    measured: tuple[Measurement, ...]


@runtime_checkable
class GoodputModel(Protocol):
    def advance(
        self,
        model: str,
        gpu_type: str,
        placement: tuple[int, ...],
        done: float,
        seconds: float,
        *,
        training: Training | None,
        measured: Sequence[Measurement],
        restarted: bool,
        whole_second_epochs: bool = False,
    ) -> Advanced:
        """A job `done` into its work given `seconds` on a placement of a type (its GPUs on each server it spans),
        having measured `measured` there; `restarted`: it starts on these GPUs and picks its batch anew. It stops
        early when done, or at once where it cannot run there. `whole_second_epochs`: each epoch end it reaches
        takes a whole number of seconds from where it stood (`Mechanics.whole_second_epochs`)."""
        ...

    def goodput(
        self,
        model: str,
        gpu_type: str,
        gpus: int,
        max_batch: int,
        *,
        training: Training | None,
        measured: Sequence[Measurement],
        nodes: int | None = None,
    ) -> float:
        """A policy's estimate of a job's progress per second on `gpus` GPUs of a type on as few servers as hold
        them (or on `nodes` servers), its batch at most `max_batch`, from `measured` (what it timed on that type;
        0: nothing measured yet, or it cannot run there)."""
        ...

    def max_batch(self, model: str) -> int:
        """The largest global batch a job may train at."""
        ...

    def largest_gang(self, model: str, gpu_type: str) -> int:
        """Most GPUs of a type a job can use (its largest batch at the smallest per-GPU batch)."""
        ...

    def one_gpu_throughput(self, model: str, gpu_type: str) -> float:
        """Samples per second on one GPU of a type, for projecting what a job does on one type from another."""
        ...


def goodput_of(throughputs: object) -> GoodputModel | None:
    """The goodput model a throughput model carries for elastic jobs, or None."""
    model = getattr(throughputs, "goodput", None)
    return model if isinstance(model, GoodputModel) else None
