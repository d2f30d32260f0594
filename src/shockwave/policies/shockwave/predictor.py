"""How long each job still needs to run alone: the Bayesian forecast of its batch-size schedule (spec §4.2-4.3).

A job trains at one of a few batch sizes (its "modes"). After observing the batch sizes of epochs 0..p, a Dirichlet
posterior over the modes, with prior concentration E/|M| per mode, splits the E epochs among the modes; subtracting
the epochs already observed leaves r_b expected remaining epochs at batch size b, each taking the mode's epoch
duration d_b. So R_j = (Rem / Inf) * sum_b r_b d_b, where Rem = E - p and Inf >= Rem rescales when the posterior
counts more epochs than remain.

Where the reference peeks at its profile, this forecast uses what the job really did (spec §9 item 15):
- the observed batch sizes are the ones the job trained with, recorded as its epochs go by (the profile's planned
  schedule only supplies the set of modes and the prior);
- a mode's epoch duration is measured once the job has run at that batch size; other modes use the profile,
  rescaled when the job's measured speed at the batch sizes it did run differs from the profile's by more than 40%
  (the reference's calibration tolerance, applied like for like instead of across different batch sizes).

On a cluster of several GPU types (spec's reference: one type only) durations are kept per type: a type's epoch
duration is measured once the job has run there at that batch size, else it is the profile's (on the profile's
type) times the throughput table's ratio between the two types, calibrated per type as above. The forecast itself
is in equal-share seconds: an epoch's duration when the job's time is split over the types in proportion to their
sizes (1 / sum_t (n_t / G) / d_t, Gavel's proportional share), so a target or a rho means the same on any mix of
types, and one type gives exactly the homogeneous forecast.

A re-solve asks every active job for several of these numbers; at thousands of jobs that was most of the policy's
time (each question rescanned the job's epochs), so the per-mode epoch counts and the equal-share durations are
kept between questions, and dropped whenever the job reports something new (`observe`, `record`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from shockwave.core.kept import KeepsState
from shockwave.policies.solvers.exact import exact_dot
from shockwave.workload_model.profile import JobProfile
from shockwave.workload_model.throughput import DEFAULT_GPU_TYPE

CALIBRATION_TOLERANCE = 0.4
"""Relative disagreement between measured and profiled speed beyond which unmeasured modes are rescaled."""
PROFILE_TYPE = DEFAULT_GPU_TYPE
"""The GPU type a job's profile is timed on (`build_profile` asks the throughput model for its default type)."""


class JobForecast(KeepsState):
    kept = (
        "epochs",
        "dataset_size",
        "submit_s",
        "shares",
        "profiled_duration",
        "observed",
        "nominal_duration",
        "slowdown",
        "measured",
    )
    """Everything, the profile's part included, so a restored forecast needs no profile."""
    epochs: int
    dataset_size: int
    submit_s: float
    shares: dict[str, float]
    """Each GPU type's share of the cluster's GPUs (n_t / G), in the cluster's order."""
    profiled_duration: dict[int, float]
    """The profile's mean epoch duration at each batch size it plans, on the profile's type."""
    observed: list[int]
    """Batch size each epoch started so far trained with."""
    nominal_duration: dict[int, float]
    """Epoch duration at batch sizes the profile does not plan, from the scheduler's throughput."""
    slowdown: dict[str, float]
    """Seconds on each type per second on the profile's type, from the table's rates (inf: cannot run there)."""
    measured: dict[str, dict[int, list[float]]]
    """GPU type -> batch size -> [samples, seconds] measured while running at it there."""

    def __init__(
        self, profile: JobProfile, dataset_size: int, submit_s: float, shares: Mapping[str, float] | None = None
    ) -> None:
        self.epochs = profile.epochs
        self.dataset_size = dataset_size
        self.submit_s = submit_s
        self.shares = dict(shares) if shares else {PROFILE_TYPE: 1.0}
        planned = np.asarray(profile.batch_sizes)
        durations = np.asarray(profile.epoch_durations, dtype=float)
        self.profiled_duration = {int(b): float(durations[planned == b].mean()) for b in np.unique(planned)}
        self.observed = []
        self.nominal_duration = {}
        self.slowdown = dict.fromkeys(self.shares, 1.0)
        self.measured = {t: {} for t in self.shares}
        self._reset_caches()

    def _reset_caches(self) -> None:
        self._counts: dict[int, int] = {}
        """Epochs observed per batch size, over all of `observed`."""
        self._counted = 0
        """How many of `observed` `_counts` covers."""
        self._modes_seen: list[int] | None = None
        """`_modes()`, until a batch size is observed for the first time."""
        self._observed_array = np.zeros(0, dtype=np.int64)
        """The first entries of `observed`, as an array (extended when asked for more)."""
        self._invalidate()

    def _invalidate(self) -> None:
        """Forget what depends on the job's reports (called when it reports something new)."""
        self._durations: dict[int, float] | None = None
        """`equal_share_durations`."""
        self._forecasts: dict[int, float] = {}
        """`_forecast` by epoch."""

    def load_state_dict(self, state: Any) -> None:
        super().load_state_dict(state)
        self._reset_caches()

    def observe(self, progress: int, batch_size: int, rates: Mapping[str, float]) -> None:
        """The job is in epoch `progress`, at `batch_size` and `rates` (steps/s per GPU type it can run on) as far
        as the scheduler knows.

        Epochs first seen now are attributed to that batch size; a batch size the profile never planned gets its
        epoch duration from that speed until the job has run at it. The rates' ratios to the profile's type (or
        to the first type the job runs on, when the cluster lacks it) become each type's slowdown.
        """
        upto = min(progress, self.epochs - 1) + 1
        before = (len(self.observed), self.slowdown, self.nominal_duration.get(batch_size))
        self.observed.extend([batch_size] * (upto - len(self.observed)))
        base = rates.get(PROFILE_TYPE, 0.0) or next((r for r in rates.values() if r > 0), 0.0)
        if base > 0:
            self.slowdown = {t: base / r if (r := rates.get(t, 0.0)) > 0 else math.inf for t in self.shares}
            if batch_size not in self.profiled_duration:
                self.nominal_duration[batch_size] = self.dataset_size / batch_size / base
        if (len(self.observed), self.slowdown, self.nominal_duration.get(batch_size)) != before:
            self._invalidate()  # else every forecast cached since the job last reported still holds

    def record(self, steps: int, seconds: float, batch_size: int, gpu_type: str | None = None) -> None:
        """A round the job ran on `gpu_type` (default: the first): `steps` global minibatches of `batch_size`
        samples in `seconds`."""
        if seconds > 0 and steps > 0:
            self._invalidate()
            by_size = self.measured[gpu_type or next(iter(self.shares))]
            totals = by_size.setdefault(batch_size, [0.0, 0.0])
            totals[0] += steps * batch_size
            totals[1] += seconds

    def calibration(self, gpu_type: str | None = None) -> float:
        """Measured over profiled time for the same samples at the same batch sizes on `gpu_type` (default: the
        first), when they disagree."""
        gpu_type = gpu_type or next(iter(self.shares))
        measured = profiled = 0.0
        for bs, (samples, seconds) in self.measured[gpu_type].items():
            if bs in self.profiled_duration:
                measured += seconds
                profiled += samples / self.dataset_size * self.profiled_duration[bs]
        if profiled <= 0 or math.isinf(self.slowdown[gpu_type]):  # nothing to scale where it cannot run now
            return 1.0
        profiled *= self.slowdown[gpu_type]
        if abs(measured - profiled) / profiled <= CALIBRATION_TOLERANCE:
            return 1.0
        return measured / profiled

    def epoch_duration(self, batch_size: int, calibration: float, gpu_type: str | None = None) -> float:
        """Seconds per epoch at `batch_size` on `gpu_type` (default: the first), given that type's calibration."""
        gpu_type = gpu_type or next(iter(self.shares))
        samples, seconds = self.measured[gpu_type].get(batch_size, (0.0, 0.0))
        if samples > 0:
            return self.dataset_size * seconds / samples
        if batch_size in self.profiled_duration:
            return self.profiled_duration[batch_size] * self.slowdown[gpu_type] * calibration
        return self.nominal_duration[batch_size] * self.slowdown[gpu_type]

    def type_durations(self, batch_size: int) -> dict[str, float]:
        """Seconds per epoch at `batch_size` on every type (inf where the job cannot run)."""
        return dict(zip(self.shares, self._by_type(batch_size, self._calibrations()), strict=True))

    def equal_share_durations(self) -> dict[int, float]:
        """`equal_share_duration` at every batch size the job has trained or may train at."""
        if self._durations is None:
            calibrations = self._calibrations()
            self._durations = {bs: self._mixed(self._by_type(bs, calibrations)) for bs in self._modes()}
        return self._durations

    def _modes(self) -> list[int]:
        """Every batch size the profile plans or the job trained at, ascending."""
        counts = self._observed_counts()
        if self._modes_seen is None:
            self._modes_seen = sorted(set(self.profiled_duration) | set(counts))
        return self._modes_seen

    def _observed_counts(self, upto: int | None = None) -> dict[int, int]:
        """Epochs among the first `upto` observed (default: all) per batch size."""
        for bs in self.observed[self._counted :]:
            if bs not in self._counts:
                self._modes_seen = None
            self._counts[bs] = self._counts.get(bs, 0) + 1
        self._counted = len(self.observed)
        if upto is None or upto >= self._counted:
            return self._counts
        counts = dict(self._counts)
        for bs in self.observed[upto:]:
            counts[bs] -= 1
        return counts

    def equal_share_duration(self, batch_size: int) -> float:
        """Seconds per epoch with the job's time split over the types in proportion to their sizes (one type:
        that type's duration)."""
        return self._mixed(self._by_type(batch_size, self._calibrations()))

    def speeds(self, batch_size: int) -> np.ndarray:
        """Equal-share seconds of work one second on each type does, in the cluster's order (0: cannot run)."""
        by_type = self._by_type(batch_size, self._calibrations())
        share = self._mixed(by_type)
        return np.array([share / d for d in by_type])

    def _calibrations(self) -> dict[str, float]:
        return {t: self.calibration(t) for t in self.shares}

    def _by_type(self, batch_size: int, calibrations: dict[str, float]) -> list[float]:
        return [self.epoch_duration(batch_size, calibrations[t], t) for t in self.shares]

    def _mixed(self, by_type: list[float]) -> float:
        if len(by_type) == 1:
            return by_type[0]
        return 1.0 / sum(share / d for share, d in zip(self.shares.values(), by_type, strict=True))

    def elapsed(self, progress: float) -> float:
        """Equal-share time of the first `progress` epochs at the batch sizes they ran with."""
        durations = self.equal_share_durations()
        whole = int(progress)
        done = 0.0
        if whole:
            if len(self._observed_array) < whole:
                self._observed_array = np.array(self.observed, dtype=np.int64)
            modes = np.array(self._modes())
            per_epoch = np.array([durations[bs] for bs in modes])[np.searchsorted(modes, self._observed_array[:whole])]
            # The epochs' durations added one by one in order (np.cumsum adds sequentially, as sum() did).
            done = float(np.cumsum(per_epoch)[-1])
        if whole < len(self.observed):
            done += (progress - whole) * durations[self.observed[whole]]
        return done

    def remaining_runtime(self, progress: float) -> float:
        """Equal-share time still needed after `progress` epochs (fractional: the epoch in progress counts in part).

        The Dirichlet forecast covers the epochs after the one in progress (whose batch size is observed); the
        rest of the current epoch is added at its batch size. (The reference leaves it out, so a job in its last
        epoch looked finished.)
        """
        whole = int(progress)
        if whole >= self.epochs:
            return 0.0
        durations = self.equal_share_durations()
        current = durations[self.observed[whole]] * (1 - (progress - whole))
        return current + self._forecast(whole, durations)

    def after_current(self, progress: float) -> float:
        return self._forecast(int(progress), self.equal_share_durations()) if progress < self.epochs else 0.0

    def _forecast(self, progress: int, durations: dict[int, float]) -> float:
        """R_j: expected time of the epochs after epoch `progress` (spec §4.3), kept until the job reports."""
        if progress not in self._forecasts:
            self._forecasts[progress] = self._dirichlet(progress, durations)
        return self._forecasts[progress]

    def _dirichlet(self, progress: int, durations: dict[int, float]) -> float:
        remaining = self.epochs - progress
        modes = self._modes()
        counts = self._observed_counts(progress + 1)
        observed = np.array([counts.get(bs, 0) for bs in modes])
        posterior = self.epochs / len(modes) + observed
        expected = self.epochs * posterior / posterior.sum()
        # Take each observed epoch off its mode's share, but never below zero: the reference subtracts one at a time
        # while the share is at least 1. The shares then sum to the integer E - subtracted (the reference's
        # int(sum + 1), without its float rounding).
        subtracted = np.minimum(observed, np.floor(expected + 1e-9))
        expected -= subtracted
        inflated = max(self.epochs - int(subtracted.sum()) + 1, remaining)
        return remaining / inflated * exact_dot(expected, [durations[bs] for bs in modes])
