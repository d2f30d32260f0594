"""What a driver and a policy need of goodput-adaptive jobs (`Job.elastic`): how far a job gets on a number of
GPUs of a type, and what a policy may estimate it is worth there. Progress is in the model's own units (for Sia's
applications, iterations at the smallest batch), and the job picks its batch itself.

A throughput model that knows such jobs exposes one as its `goodput` attribute (`goodput_of`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class GoodputModel(Protocol):
    def advance(
        self, model: str, gpu_type: str, placement: tuple[int, ...], done: float, seconds: float
    ) -> tuple[float, float]:
        """(progress after, seconds trained) of a job `done` into its work given `seconds` on a placement of a type
        (its GPUs on each server it spans): it stops early when done, or at once where it cannot run there."""
        ...

    def goodput(self, model: str, gpu_type: str, gpus: int, done: float, max_batch: int) -> float:
        """A policy's estimate of a job's progress per second on `gpus` GPUs of a type on as few servers as hold
        them, its batch at most `max_batch` (0: cannot run there)."""
        ...

    def total(self, model: str) -> float:
        """A job's whole work, in units of progress."""
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
