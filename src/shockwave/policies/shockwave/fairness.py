"""Finish-time-fairness targets (spec §4.4): when would each job finish on an equal share of the cluster?

Whenever the job set changes, every job's fair finish time is estimated afresh as
    FTE_j = submit_j + (isolated time of its finished epochs + R_j) / s,   s = min(1, G / n)
(n active jobs on G GPUs). A job's target is the average of its estimates, each weighted by the number of rounds
it was the current one, blended 0.9 : 0.1 with the latest, so a target follows the cluster's load without
jumping with every arrival.
"""

from __future__ import annotations

MOMENTUM = 0.9


def equal_share(gpus: int, jobs: int) -> float:
    """The egalitarian share s: jobs are counted, not their gang sizes (as in the reference)."""
    return min(1.0, gpus / jobs)


def fair_finish_estimate(submit_s: float, elapsed_s: float, remaining_s: float, share: float) -> float:
    return submit_s + (elapsed_s + remaining_s) / share


class FinishTimeTargets:
    def __init__(self) -> None:
        self.series: dict[int, list[tuple[int, float]]] = {}

    def reestimate(self, round_index: int, estimates: dict[int, float]) -> None:
        for job_id, value in estimates.items():
            series = self.series.setdefault(job_id, [])
            if series and series[-1][0] == round_index:
                series[-1] = (round_index, value)
            else:
                series.append((round_index, value))

    def forget(self, job_id: int) -> None:
        self.series.pop(job_id, None)

    def target(self, job_id: int, round_index: int) -> float:
        series = self.series[job_id]
        rounds = [r for r, _ in series] + [round_index]
        weights = [later - earlier for earlier, later in zip(rounds, rounds[1:])]
        total = sum(weights)
        latest = series[-1][1]
        if total == 0:
            return latest
        average = sum(w * value for w, (_, value) in zip(weights, series, strict=True)) / total
        return MOMENTUM * average + (1 - MOMENTUM) * latest
