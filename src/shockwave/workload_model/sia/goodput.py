"""Goodput-adaptive jobs of Sia's applications (Pollux's job model, as Sia's simulator runs it).

Such a job runs on whatever number of GPUs of one type the scheduler gives it and picks its own batch: on r GPUs
it tries 50 global batches M, geometric from max(smallest batch, r x smallest per-GPU batch) to a largest one,
splits each into per-GPU batch b and k gradient-accumulation steps (`split`), and keeps the one that makes the most
progress per second, gain(M, epoch) / (step + k (step - sync)), the profile's times at the packed placement times
the application's slowdown. Progress is counted in the application's units (iterations at its smallest batch) and
the job is done at its total; the gain changes with the epoch, so the choice is made again at every epoch's end.

Running, the job's largest batch is its application's; a scheduler estimating what a configuration is worth (Sia's
policy) bounds it by the batch the workload line asks for and the per-GPU batch by the type's range. Sia's policy
fits Pollux's throughput model to what each job has run and asks the fit; this model answers from the profile, the
fit's target (the policy's knowledge of which types a job has run on is the policy's own, see `policies/sia`).
Pointers: the artifact's `goodput.py` (batch optimiser) and `job.py` (progress), aaf7a0d; `benchmarks/sia_spec.md`.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from shockwave.workload_model.sia.profiles import Application, packed

BATCH_CANDIDATES = 50
MAX_LOCAL_BSZ = {("deepspeech2", "rtx"): 57.0}
"""Per-GPU batch limits the artifact sets in code rather than in the profile (memory on the 2080 Ti)."""


@dataclass(frozen=True)
class Choice:
    rate: float
    """Progress per second."""
    batch: int
    """Global batch: GPUs x per-GPU batch x (accumulation steps + 1)."""


def split(batch: float, gpus: int, largest_local: float, init_batch: int) -> tuple[int, int]:
    """(per-GPU batch, accumulation steps) of a global batch on `gpus` GPUs whose per-GPU batch is at most
    `largest_local`: as few accumulation steps as fit, at least one on one GPU above the smallest batch."""
    local = batch / gpus
    accumulation = math.ceil(local / largest_local - 1e-8) - 1
    if gpus == 1 and local > init_batch:
        accumulation = max(accumulation, 1)
    return math.ceil(local / (accumulation + 1) - 1e-8), accumulation


@dataclass
class SiaGoodput:
    """Progress rates of goodput-adaptive jobs by application, GPU type and GPU count (the `GoodputModel`)."""

    applications: dict[str, Application]
    gpus_per_node: dict[str, int]
    _choices: dict[tuple[str, str, tuple[int, ...], int, int, bool], Choice | None] = field(
        default_factory=dict, repr=False
    )

    def local_range(self, app: Application, gpu_type: str) -> tuple[float, float]:
        """Smallest and largest per-GPU batch measured on a type."""
        low, high = app.types[gpu_type].local_bsz_range
        return low, min(high, MAX_LOCAL_BSZ.get((app.name, gpu_type), high))

    def best(
        self, model: str, gpu_type: str, placement: tuple[int, ...], epoch: int, max_batch: int, *, running: bool
    ) -> Choice | None:
        """The batch that makes the most progress per second in `epoch` on a placement (GPUs per node) of a type
        (None: none fits the profile). `running`: the per-GPU batch is bounded by what the placement measured (the
        job runs); else by the type's range (a scheduler's estimate)."""
        key = (model, gpu_type, placement, epoch, max_batch, running)
        if key not in self._choices:
            self._choices[key] = self._best(self.applications[model], gpu_type, placement, epoch, max_batch, running)
        return self._choices[key]

    def _best(
        self, app: Application, gpu_type: str, placement: tuple[int, ...], epoch: int, max_batch: int, running: bool
    ) -> Choice | None:
        profile, gpus = app.types[gpu_type], sum(placement)
        low, high = self.local_range(app, gpu_type)
        if running:
            high = min(high, profile.max_local_bsz(placement))
        if high < low:  # no measurement of a shape this large
            return None
        smallest = max(app.init_batch, low * gpus)
        best: Choice | None = None
        for batch in np.geomspace(smallest, max(smallest, max_batch), BATCH_CANDIDATES):
            local, accumulation = split(float(batch), gpus, high, app.init_batch)
            if not low <= local <= high:
                continue
            timed = profile.step(placement, local)
            if timed is None:
                continue
            step, sync = timed
            effective = gpus * local * (accumulation + 1)
            rate = app.gain(effective, epoch) / ((step + accumulation * (step - sync)) * app.slowdown)
            if best is None or rate > best.rate:
                best = Choice(rate, effective)
        return best

    def goodput(self, model: str, gpu_type: str, gpus: int, done: float, max_batch: int) -> float:
        """A scheduler's estimate: progress per second of a job `done` into its work on `gpus` GPUs packed on
        whole nodes, its batch at most `max_batch`; 0 where the profile has no configuration for it."""
        app = self.applications[model]
        placement = packed(gpus, self.gpus_per_node[gpu_type])
        choice = self.best(model, gpu_type, placement, epoch_of(app, done), max_batch, running=False)
        return 0.0 if choice is None else choice.rate

    def advance(
        self, model: str, gpu_type: str, placement: tuple[int, ...], done: float, seconds: float
    ) -> tuple[float, float]:
        """(progress after, seconds trained) of a job `done` into its work that trains `seconds` on a placement
        (GPUs per node) of a type, re-choosing its batch at each epoch's end; it stops early when its work is
        done, or at once where the profile has no configuration for it."""
        app = self.applications[model]
        ends = app.epoch_ends
        trained = 0.0
        while trained < seconds and done < ends[-1]:
            epoch = epoch_of(app, done)
            choice = self.best(model, gpu_type, placement, epoch, app.max_batch, running=True)
            if choice is None:
                break
            to_end = (ends[epoch] - done) / choice.rate
            if trained + to_end > seconds:
                return done + choice.rate * (seconds - trained), seconds
            done, trained = ends[epoch], trained + to_end
        return done, trained

    def total(self, model: str) -> float:
        return self.applications[model].total_progress

    def largest_gang(self, model: str, gpu_type: str) -> int:
        """Most GPUs a job can use on a type: its largest batch at the smallest per-GPU batch (and at least one)."""
        app = self.applications[model]
        return max(1, int(app.max_batch // self.local_range(app, gpu_type)[0]))

    def one_gpu_throughput(self, model: str, gpu_type: str) -> float:
        """Samples per second on one GPU as Sia projects between types: the largest per-GPU batch over the largest
        step time among the one-GPU measurements (the two maxima taken apart, as the artifact does)."""
        return self.applications[model].types[gpu_type].one_gpu_throughput


def epoch_of(app: Application, done: float) -> int:
    """The epoch a job `done` into its work is in (the last one once it is done)."""
    ends = app.epoch_ends
    return min(bisect.bisect_right(ends, done), len(ends) - 1)
