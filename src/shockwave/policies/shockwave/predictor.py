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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shockwave.workload_model.profile import JobProfile

CALIBRATION_TOLERANCE = 0.4
"""Relative disagreement between measured and profiled speed beyond which unmeasured modes are rescaled."""


class JobForecast:
    def __init__(self, profile: JobProfile, dataset_size: int, submit_s: float) -> None:
        self.epochs = profile.epochs
        self.dataset_size = dataset_size
        self.submit_s = submit_s
        planned = np.asarray(profile.batch_sizes)
        durations = np.asarray(profile.epoch_durations, dtype=float)
        self.profiled_duration = {int(b): float(durations[planned == b].mean()) for b in np.unique(planned)}
        self.observed: list[int] = []
        """Batch size each epoch started so far trained with."""
        self.nominal_duration: dict[int, float] = {}
        """Epoch duration at batch sizes the profile does not plan, from the scheduler's throughput."""
        self.measured: dict[int, list[float]] = {}
        """Batch size -> [samples, seconds] measured while running at it."""

    def state_dict(self) -> dict[str, Any]:
        """Everything, the profile's part included, so a restored forecast needs no profile."""
        return {
            "epochs": self.epochs,
            "dataset_size": self.dataset_size,
            "submit_s": self.submit_s,
            "profiled_duration": {str(bs): d for bs, d in self.profiled_duration.items()},
            "observed": list(self.observed),
            "nominal_duration": {str(bs): d for bs, d in self.nominal_duration.items()},
            "measured": {str(bs): list(totals) for bs, totals in self.measured.items()},
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> JobForecast:
        forecast = cls.__new__(cls)
        forecast.epochs = int(state["epochs"])
        forecast.dataset_size = int(state["dataset_size"])
        forecast.submit_s = float(state["submit_s"])
        forecast.profiled_duration = {int(bs): float(d) for bs, d in state["profiled_duration"].items()}
        forecast.observed = [int(bs) for bs in state["observed"]]
        forecast.nominal_duration = {int(bs): float(d) for bs, d in state["nominal_duration"].items()}
        forecast.measured = {
            int(bs): [float(samples), float(seconds)] for bs, (samples, seconds) in state["measured"].items()
        }
        return forecast

    def observe(self, progress: int, batch_size: int, steps_per_s: float) -> None:
        """The job is in epoch `progress`, at `batch_size` and `steps_per_s` as far as the scheduler knows.

        Epochs first seen now are attributed to that batch size; a batch size the profile never planned gets its
        epoch duration from that speed until the job has run at it.
        """
        upto = min(progress, self.epochs - 1) + 1
        self.observed.extend([batch_size] * (upto - len(self.observed)))
        if batch_size not in self.profiled_duration and steps_per_s > 0:
            self.nominal_duration[batch_size] = self.dataset_size / batch_size / steps_per_s

    def record(self, steps: int, seconds: float, batch_size: int) -> None:
        """A round the job ran: `steps` global minibatches of `batch_size` samples in `seconds`."""
        if seconds > 0 and steps > 0:
            totals = self.measured.setdefault(batch_size, [0.0, 0.0])
            totals[0] += steps * batch_size
            totals[1] += seconds

    def calibration(self) -> float:
        """Measured over profiled time for the same samples at the same batch sizes, when they disagree."""
        measured = profiled = 0.0
        for bs, (samples, seconds) in self.measured.items():
            if bs in self.profiled_duration:
                measured += seconds
                profiled += samples / self.dataset_size * self.profiled_duration[bs]
        if profiled <= 0 or abs(measured - profiled) / profiled <= CALIBRATION_TOLERANCE:
            return 1.0
        return measured / profiled

    def epoch_duration(self, batch_size: int, calibration: float) -> float:
        samples, seconds = self.measured.get(batch_size, (0.0, 0.0))
        if samples > 0:
            return self.dataset_size * seconds / samples
        if batch_size in self.profiled_duration:
            return self.profiled_duration[batch_size] * calibration
        return self.nominal_duration[batch_size]

    def elapsed(self, progress: float) -> float:
        """Isolated time of the first `progress` epochs at the batch sizes they ran with."""
        calibration = self.calibration()
        whole = int(progress)
        done = sum(self.epoch_duration(bs, calibration) for bs in self.observed[:whole])
        if whole < len(self.observed):
            done += (progress - whole) * self.epoch_duration(self.observed[whole], calibration)
        return done

    def remaining_runtime(self, progress: float) -> float:
        """Isolated time still needed after `progress` epochs (fractional: the epoch in progress counts in part).

        The Dirichlet forecast covers the epochs after the one in progress (whose batch size is observed); the
        rest of the current epoch is added at its batch size. (The reference leaves it out, so a job in its last
        epoch looked finished.)
        """
        whole = int(progress)
        if whole >= self.epochs:
            return 0.0
        current = self.epoch_duration(self.observed[whole], self.calibration()) * (1 - (progress - whole))
        return current + self._forecast(whole)

    def after_current(self, progress: float) -> float:
        return self._forecast(int(progress)) if progress < self.epochs else 0.0

    def _forecast(self, progress: int) -> float:
        """R_j: expected time of the epochs after epoch `progress` (spec §4.3)."""
        remaining = self.epochs - progress
        modes = sorted(set(self.profiled_duration) | set(self.observed))
        index = {bs: i for i, bs in enumerate(modes)}
        observed = np.bincount([index[bs] for bs in self.observed[: progress + 1]], minlength=len(modes))
        posterior = self.epochs / len(modes) + observed
        expected = self.epochs * posterior / posterior.sum()
        # Take each observed epoch off its mode's share, but never below zero: the reference subtracts one at a time
        # while the share is at least 1. The shares then sum to the integer E - subtracted (the reference's
        # int(sum + 1), without its float rounding).
        subtracted = np.minimum(observed, np.floor(expected + 1e-9))
        expected -= subtracted
        inflated = max(self.epochs - int(subtracted.sum()) + 1, remaining)
        calibration = self.calibration()
        durations = np.array([self.epoch_duration(bs, calibration) for bs in modes])
        return float(remaining / inflated * (expected @ durations))
