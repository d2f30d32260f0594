"""Goodput-adaptive jobs of Sia's applications (Pollux's job model, as Sia's simulator runs it).

Such a job runs on whatever GPUs of one type the scheduler gives it, and picks its batch when they change and
after every stretch of training (an epoch's end, or the end of its time): before it has timed a step on the type,
the smallest it may run (the application's smallest batch, or the least per-GPU batch on every GPU); after, the
one its fitted step model (`fit.py`) and its last measured gradient noise say progresses fastest among 50 global
batches geometric from that smallest to the application's largest, each split into per-GPU batch and
accumulation steps (`split`).

It really progresses at gain(M, epoch) / ((step + k (step - sync)) x slowdown) per second: the profile's times at
its placement, the gain of the gradient noise its epoch has at its batch M. Every step it times on a shape (nodes,
GPUs, per-GPU batch) it has not timed before is added to what it measured there.

A policy's estimate uses the same fitted model and noise, its batch bounded by the workload line's and the
per-GPU batch by the type's range. Pointers: the artifact's `goodput.py` and `job.py`, aaf7a0d;
`benchmarks/sia_spec.md` §2-3.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from shockwave.workload_model.goodput import Advanced, Measurement, Training
from shockwave.workload_model.sia.fit import StepModel, fit
from shockwave.workload_model.sia.profiles import Application, packed, statistical_gain

BATCH_CANDIDATES = 50
MAX_ESTIMATES = 200_000
"""Estimates remembered at once (a job's noise changes every epoch, so old ones are rarely asked again)."""
MAX_LOCAL_BSZ = {("deepspeech2", "rtx"): 57.0}
"""Per-GPU batch limits the artifact sets in code rather than in the profile (memory on the 2080 Ti)."""


def split(batch: float, gpus: int, largest_local: float, init_batch: int) -> tuple[int, int]:
    """(per-GPU batch, accumulation steps) of a global batch on `gpus` GPUs whose per-GPU batch is at most
    `largest_local`: as few accumulation steps as fit, at least one on one GPU above the smallest batch."""
    local = batch / gpus
    accumulation = math.ceil(local / largest_local - 1e-8) - 1
    if gpus == 1 and local > init_batch + 1e-8:
        accumulation = max(accumulation, 1)
    return math.ceil(local / (accumulation + 1) - 1e-8), accumulation


@dataclass(frozen=True)
class Search:
    """One batch search: on `gpus` GPUs over `nodes` nodes, global batches up to `max_batch`, per-GPU batches in
    [low, high]."""

    nodes: int
    gpus: int
    max_batch: float
    low: float
    high: float


@dataclass
class SiaGoodput:
    """Progress of goodput-adaptive jobs by application, GPU type and placement (the `GoodputModel`)."""

    applications: dict[str, Application]
    gpus_per_node: dict[str, int]
    _estimates: dict[tuple, float] = field(default_factory=dict, repr=False)

    def local_range(self, app: Application, gpu_type: str) -> tuple[float, float]:
        """Smallest and largest per-GPU batch measured on a type."""
        low, high = app.types[gpu_type].local_bsz_range
        return low, min(high, MAX_LOCAL_BSZ.get((app.name, gpu_type), high))

    # -- running ---------------------------------------------------------------------------------------------------
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
        app = self.applications[model]
        ends, profile, gpus = app.epoch_ends, app.types[gpu_type], sum(placement)
        known = {m[:3]: m for m in measured}
        new: list[Measurement] = []
        if restarted or training is None or training.gpus != gpus:
            training = self._choose(app, gpu_type, placement, training, tuple(sorted(known.values())))
        trained = 0.0
        while training is not None and trained < seconds and done < ends[-1]:
            epoch = epoch_of(app, done)
            timed = profile.step(placement, training.local)
            if timed is None:
                break
            shape = (len(placement), gpus, float(training.local))
            if shape not in known:
                known[shape] = (*shape, *timed)
                new.append(known[shape])
            training = Training(gpus, training.local, training.accumulation, epoch)  # this step measures its noise
            rate = app.gain(training.batch, epoch) / self.step_seconds(app, timed, training)
            to_end = (ends[epoch] - done) / rate
            if trained + to_end > seconds:
                done, trained = done + rate * (seconds - trained), seconds
            else:
                done, trained = ends[epoch], min(seconds, trained + (round(to_end) if whole_second_epochs else to_end))
            if done < ends[-1]:
                training = self._choose(app, gpu_type, placement, training, tuple(sorted(known.values())))
        return Advanced(done, trained, training, tuple(new))

    def _choose(
        self,
        app: Application,
        gpu_type: str,
        placement: tuple[int, ...],
        before: Training | None,
        measured: tuple[Measurement, ...],
    ) -> Training | None:
        """The batch a job picks on a placement (None: it cannot run there); `before` is what it trained with last
        (its gradient noise), `measured` what it timed on this type."""
        search = self._search_on(app, gpu_type, placement)
        if search is None:  # no measurement of a shape this large
            return None
        epoch, noise = (0, 0) if before is None else (before.epoch, before.stepped_batch)
        best = None if before is None or not measured else self._search(app, fit(measured), before, search)
        local, accumulation = _first_pick(app, search) if best is None else (best[1], best[2])
        return _within_limits(app, gpu_type, Training(search.gpus, local, accumulation, epoch, noise))

    def _search_on(self, app: Application, gpu_type: str, placement: tuple[int, ...]) -> Search | None:
        """The batch search a job runs on a placement: per-GPU batches between the type's smallest and the largest
        measured at the placement (None: none fits)."""
        low, high = self.local_range(app, gpu_type)
        high = min(high, app.types[gpu_type].max_local_bsz(placement))
        return None if high < low else Search(len(placement), sum(placement), app.max_batch, low, high)

    def choices(self, model: str, gpu_type: str, placement: tuple[int, ...]) -> tuple[Training, ...]:
        """Everything a job may train with on a placement, whatever it measured: its first batch and each batch its
        search may pick (at epoch 0; none where it cannot run there). A bound on what any schedule gets from a job
        (`fairness_bound.py`) takes the best of them."""
        app = self.applications[model]
        search = self._search_on(app, gpu_type, placement)
        if search is None:
            return ()
        picks = {
            _within_limits(app, gpu_type, Training(search.gpus, *pick, 0))
            for pick in (_first_pick(app, search), *_candidates(app.init_batch, search))
        }
        return tuple(sorted(picks, key=lambda t: (t.local, t.accumulation)))

    @staticmethod
    def step_seconds(app: Application, timed: tuple[float, float], training: Training) -> float:
        """Seconds of one optimizer step (accumulation included, slowed as the application is calibrated) of a job
        training with `training` at a placement whose step takes `timed` (seconds, of which synchronisation)."""
        step, sync = timed
        return (step + training.accumulation * (step - sync)) * app.slowdown

    @staticmethod
    def _search(app: Application, steps: StepModel, noise: Training, s: Search) -> tuple[float, int, int] | None:
        """(progress per second, per-GPU batch, accumulation steps) of the batch the fitted model and the noise
        measured at the batch `noise` last stepped, in its epoch, say is best; None where no candidate fits
        [low, high]."""
        sqr, var = app.grad(noise.stepped_batch, noise.epoch)
        best: tuple[float, int, int] | None = None
        for effective, local, accumulation, seconds in _timed_candidates(app.init_batch, steps, s):
            rate = statistical_gain(sqr, var, effective / app.init_batch) / seconds
            if best is None or rate > best[0]:
                best = (rate, local, accumulation)
        return best

    # -- what a policy knows -----------------------------------------------------------------------------------------
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
        if training is None or not measured:
            return 0.0
        data = tuple(sorted(measured))
        nodes = len(packed(gpus, self.gpus_per_node[gpu_type])) if nodes is None else nodes
        key = (model, gpu_type, gpus, nodes, max_batch, training, data)
        if key not in self._estimates:
            if len(self._estimates) > MAX_ESTIMATES:
                self._estimates.clear()
            app = self.applications[model]
            low, high = self.local_range(app, gpu_type)
            best = self._search(app, fit(data), training, Search(nodes, gpus, max_batch, low, high))
            self._estimates[key] = 0.0 if best is None else best[0]
        return self._estimates[key]

    def max_batch(self, model: str) -> int:
        return self.applications[model].max_batch

    def largest_gang(self, model: str, gpu_type: str) -> int:
        app = self.applications[model]
        return max(1, int(app.max_batch // self.local_range(app, gpu_type)[0]))

    def one_gpu_throughput(self, model: str, gpu_type: str) -> float:
        return self.applications[model].types[gpu_type].one_gpu_throughput


@functools.lru_cache(maxsize=65536)
def _timed_candidates(init_batch: int, steps: StepModel, s: Search) -> tuple[tuple[int, int, int, float], ...]:
    """(global batch, per-GPU batch, accumulation steps, fitted seconds per step) of each candidate of a search
    whose per-GPU batch lies in [low, high]: 50 global batches geometric from the smallest the GPUs may run."""
    return tuple(
        (s.gpus * local * (accumulation + 1), local, accumulation, steps.step_s(s.nodes, s.gpus, local, accumulation))
        for local, accumulation in _candidates(init_batch, s)
    )


def _first_pick(app: Application, s: Search) -> tuple[int, int]:
    """(per-GPU batch, accumulation steps) a job trains with before it has timed a step: the smallest batch it may
    run."""
    return split(max(app.init_batch, s.low * s.gpus), s.gpus, s.high, app.init_batch)


def _candidates(init_batch: int, s: Search) -> tuple[tuple[int, int], ...]:
    """(per-GPU batch, accumulation steps) of each of a search's 50 global batches, geometric from the smallest the
    GPUs may run, whose per-GPU batch lies in [low, high]."""
    smallest = max(init_batch, s.low * s.gpus)
    ratio = max(smallest, s.max_batch) / smallest
    found = []
    for i in range(BATCH_CANDIDATES):
        local, accumulation = split(smallest * ratio ** (i / (BATCH_CANDIDATES - 1)), s.gpus, s.high, init_batch)
        if s.low <= local <= s.high:
            found.append((local, accumulation))
    return tuple(found)


def _within_limits(app: Application, gpu_type: str, training: Training) -> Training:
    """`training` with its per-GPU batch cut to what the type measured on that many GPUs and to the application's
    largest global batch (at least 1)."""
    gpus, local, accumulation = training.gpus, training.local, training.accumulation
    local = min(local, int(app.types[gpu_type].max_local_bsz_at(gpus) or local))
    local = min(local, int(app.max_batch / (gpus * (accumulation + 1))))
    return replace(training, local=max(local, 1))


def epoch_of(app: Application, done: float) -> int:
    """The epoch a job `done` into its work is in (the last one once it is done)."""
    ends = app.epoch_ends
    return min(bisect.bisect_right(ends, done), len(ends) - 1)
