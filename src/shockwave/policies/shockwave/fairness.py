"""Finish-time fairness for the market (spec §4.4-4.5): targets, how far behind each job is, and its priority.

Whenever the job set changes, every job's fair finish time is estimated afresh as
    FTE_j = submit_j + (isolated time of its finished epochs + R_j) / s,   s = min(1, G / n)
(n active jobs on G GPUs). A job's target FT*_j is the average of its estimates, each weighted by the number of
rounds it was the current one, blended 0.9 : 0.1 with the latest, so a target follows the cluster's load without
jumping with every arrival.

At a re-solve, a job's projected ratio is rho_j = (now + R_j / s - submit_j) / (FT*_j - submit_j): the job's
duration if it ran at the fair share from now on, over its fair duration. Both are counted from submission, as the
fairness metric is (the reference divides absolute times, which dilutes the ratio of every job that arrived late).
A job behind (rho_j > rhomax) gets priority pi_j = rho_j^lambda, or rho_j^100 when under a round of work is left
after its current epoch; a job on track gets 1.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from shockwave.core.kept import KeepsState

MOMENTUM = 0.9
NEARLY_DONE_EXPONENT = 100.0
PRIORITY_CAP = 1e6
"""Priorities beyond this only hurt the solver's numerics; the layout still orders by the uncapped value."""
FAR_BEHIND = 1.5
"""On several GPU types the layout puts a late job whose projected ratio passes this (times rhomax) before the
jobs that need every remaining round of the window (`packing.pack_types`)."""


def equal_share(gpus: int, jobs: int) -> float:
    """The egalitarian share s: jobs are counted, not their gang sizes (as in the reference)."""
    return min(1.0, gpus / jobs)


def fair_finish_estimate(submit_s: float, elapsed_s: float, remaining_s: float, share: float) -> float:
    return submit_s + (elapsed_s + remaining_s) / share


class FinishTimeTargets(KeepsState):
    """Each job's series of (round index, estimate). The weighted sum of all but the last estimate is kept as the
    series grows (added in the same order as a full rescan would, so the same bits), because a job re-estimated at
    every arrival collects hundreds of entries and every re-solve asks every job for its target."""

    kept = ("series",)
    series: dict[int, list[tuple[int, float]]]

    def __init__(self) -> None:
        self.series = {}
        self._settled: dict[int, tuple[int, float]] = {}
        """Per job: how many of its estimates are settled (all but the last) and sum_i w_i v_i over them."""

    def reestimate(self, round_index: int, estimates: dict[int, float]) -> None:
        for job_id, value in estimates.items():
            series = self.series.setdefault(job_id, [])
            if series and series[-1][0] == round_index:
                series[-1] = (round_index, value)
            else:
                series.append((round_index, value))

    def forget(self, job_id: int) -> None:
        self.series.pop(job_id, None)
        self._settled.pop(job_id, None)

    def load_state_dict(self, state: Any) -> None:
        super().load_state_dict(state)
        self._settled = {}  # rebuilt from the series, to the same bits

    def target(self, job_id: int, round_index: int) -> float:
        series = self.series[job_id]
        settled, weighted = self._settled.get(job_id, (0, 0))
        for (earlier, value), (later, _) in pairwise(series[settled:]):
            weighted += (later - earlier) * value
        settled = len(series) - 1
        self._settled[job_id] = (settled, weighted)
        last_round, latest = series[-1]
        total = round_index - series[0][0]
        if total == 0:
            return latest
        average = (weighted + (round_index - last_round) * latest) / total
        return MOMENTUM * average + (1 - MOMENTUM) * latest


@dataclass(frozen=True)
class FairnessView:
    """Where every active job stands against its target at one re-solve (one row per job)."""

    now_s: float
    share: float
    round_s: float
    submit_s: np.ndarray
    targets_s: np.ndarray
    remaining_s: np.ndarray
    after_current_s: np.ndarray
    """Forecast time of the epochs after the one in progress (the reference's R_j)."""

    def deadline_s(self, rhomax: float) -> np.ndarray:
        """Submission plus rhomax times the fair job duration."""
        return self.submit_s + rhomax * (self.targets_s - self.submit_s)

    def projected_ratio(self) -> np.ndarray:
        return self._ratio

    @functools.cached_property
    def _ratio(self) -> np.ndarray:
        """Worked out once per view: urgency, lateness and the priorities all read it."""
        return (self.now_s + self.remaining_s / self.share - self.submit_s) / (self.targets_s - self.submit_s)

    def urgency(self, lam: float, rhomax: float) -> np.ndarray:
        """log pi_j, uncapped and defined for every job (jobs on track get lambda log rho_j <= 0)."""
        ratio = self.projected_ratio()
        exponent = np.where(self.nearly_done(rhomax), NEARLY_DONE_EXPONENT, lam)
        # rho^0 = 1 even where rho is infinite (a target at the submission): 0 x log(inf) would be NaN.
        return np.multiply(exponent, np.log(ratio), out=np.zeros(len(ratio)), where=exponent != 0)

    def nearly_done(self, rhomax: float) -> np.ndarray:
        """Jobs behind with under a round of work left after their current epoch."""
        return (self.after_current_s < self.round_s) & (self.projected_ratio() > rhomax)

    def priorities(self, lam: float, rhomax: float) -> np.ndarray:
        behind = self.projected_ratio() > rhomax
        return np.where(behind, np.minimum(np.exp(np.minimum(self.urgency(lam, rhomax), 700.0)), PRIORITY_CAP), 1.0)

    def gang_priorities(self, lam: float, rhomax: float, sizes: np.ndarray) -> np.ndarray:
        """The priorities on several GPU types: for jobs behind, rho_j^lambda times the gang size, lambda scaled
        down for all of them at once so the largest is PRIORITY_CAP (nearly done jobs get the largest); 1 for
        jobs on track.

        Why: a fixed cap made every job past rho = PRIORITY_CAP^(1/lambda) equal, and the market prices welfare
        per GPU-round, so among equals an 8-GPU gang was worth an eighth of a 1-GPU job; fair shares count jobs,
        not GPUs (a job is owed a 1/n share of its gang's time). On a Gavel-style trace on 8:8:8 GPUs its 4- and
        8-GPU jobs waited until the end (worst rho 12.9). Lambda 0 (no priority by rho: rho^0 = 1) leaves the gang
        size alone (nearly done jobs still get the cap)."""
        cap = math.log(PRIORITY_CAP)
        ratio = self.projected_ratio()
        behind, done = ratio > rhomax, self.nearly_done(rhomax)
        if lam == 0:
            return np.where(behind, np.where(done, PRIORITY_CAP, np.minimum(np.maximum(sizes, 1), PRIORITY_CAP)), 1.0)
        rho = np.log(np.minimum(ratio, 1e300)) + np.log(np.maximum(sizes, 1)) / lam
        regular = behind & ~done
        top = float(rho[regular].max(initial=0.0))
        scale = lam if top * lam <= cap else cap / top
        log_weight = np.where(done, cap, np.minimum(scale * rho, cap))
        return np.where(behind, np.exp(np.maximum(log_weight, 0.0)), 1.0)

    def far_behind(self, rhomax: float) -> np.ndarray:
        """Late jobs whose projected ratio passes FAR_BEHIND x rhomax."""
        return self.late(rhomax) & (self.projected_ratio() > FAR_BEHIND * rhomax)

    def late(self, rhomax: float) -> np.ndarray:
        """Jobs that miss their deadline even if they run alone from now on."""
        return self.deadline_s(rhomax) < self.now_s + self.remaining_s

    def leftover_bound(self, rhomax: float, window_end_s: float) -> np.ndarray:
        """Largest runtime (in rounds) a job may have left after the window and still meet its deadline at share s."""
        return self.share * (self.deadline_s(rhomax) - window_end_s) / self.round_s
