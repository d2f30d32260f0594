"""What a re-solve reads of each active job, and the market's inputs built from it: one row per job, whether its
columns are GPU types (`policy.py`) or configurations (`elastic.py`), so both windows refresh their finish-time
targets and fill the market and the fairness view the same way."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shockwave.core.policy import SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.shockwave.fairness import FairnessView, FinishTimeTargets, equal_share, fair_finish_estimate
from shockwave.policies.shockwave.market import MarketInputs
from shockwave.policies.shockwave.predictor import JobForecast


@dataclass(frozen=True)
class WindowRow:
    """One job: progress and work in its own units (epochs), equal-share seconds, and its speed in each column."""

    epochs: float
    progress: float
    remaining_s: float
    epoch_s: float
    """Forecast seconds per remaining epoch (0 once every epoch is done)."""
    elapsed_s: float
    """Isolated time of the work done (a fair finish estimate counts it)."""
    after_current_s: float
    submit_s: float
    speeds: np.ndarray


def runnable_rates(view: SchedulerView, job: JobState) -> dict[str, float]:
    """A rigid job's steps/s on each type it can run on: a rate above zero and a pool that holds its gang."""
    return {t: rate for t, rate in job.rates.items() if rate > 0 and job.scale_factor <= view.cluster.pool(t).gpus}


def forecast_row(view: SchedulerView, job: JobState, forecast: JobForecast) -> WindowRow:
    """A rigid job as its forecast sees it now, its speeds per GPU type."""
    progress = min(job.steps_done / job.iterations_per_epoch, forecast.epochs)
    forecast.observe(int(progress), job.batch_size, runnable_rates(view, job))
    remaining = forecast.remaining_runtime(progress)
    left = forecast.epochs - progress
    return WindowRow(
        epochs=forecast.epochs,
        progress=progress,
        remaining_s=remaining,
        epoch_s=remaining / max(left, 1e-9) if progress < forecast.epochs else 0.0,
        elapsed_s=forecast.elapsed(progress),
        after_current_s=forecast.after_current(progress),
        submit_s=forecast.submit_s,
        speeds=forecast.speeds(job.batch_size),
    )


def window_inputs(
    view: SchedulerView,
    ids: list[int],
    rows: list[WindowRow],
    targets: FinishTimeTargets,
    *,
    rounds: int,
    refresh_targets: bool,
    speeds: np.ndarray | None = None,
    column_types: tuple[int, ...] = (),
    column_gpus: np.ndarray | None = None,
    paces: np.ndarray | None = None,
) -> tuple[MarketInputs, FairnessView]:
    """The market's inputs and the fairness view of the jobs `ids` (rows in that order), refreshing their finish-time
    targets when the job set changed. `speeds` replaces the rows' own (the elastic window's, restart-discounted);
    `column_types` and `column_gpus` make the columns configurations, `paces` count the makespan term in time
    (`MarketInputs`)."""
    share = equal_share(view.cluster.gpus, len(ids))
    if refresh_targets:
        targets.reestimate(
            view.round_index,
            {
                j: fair_finish_estimate(r.submit_s, r.elapsed_s, r.remaining_s, share)
                for j, r in zip(ids, rows, strict=True)
            },
        )
    remaining = np.array([r.remaining_s for r in rows])
    inputs = MarketInputs(
        scale_factors=np.array([view.jobs[j].scale_factor for j in ids]),
        epochs=np.array([r.epochs for r in rows]),
        progress=np.array([r.progress for r in rows]),
        remaining_s=remaining,
        epoch_s=np.array([r.epoch_s for r in rows]),
        gpus=view.cluster.gpus,
        rounds=rounds,
        round_s=view.round_seconds,
        gpus_by_type=tuple(pool.gpus for pool in view.cluster.pools),
        speeds=np.array([r.speeds for r in rows]) if speeds is None else speeds,
        column_types=column_types,
        column_gpus=column_gpus,
        paces=paces,
    )
    fairness = FairnessView(
        now_s=view.now,
        share=share,
        round_s=view.round_seconds,
        submit_s=np.array([r.submit_s for r in rows]),
        targets_s=np.array([targets.target(j, view.round_index) for j in ids]),
        remaining_s=remaining,
        after_current_s=np.array([r.after_current_s for r in rows]),
    )
    return inputs, fairness
