"""Shockwave (NSDI'23): plan a window of rounds as a market, re-solved when the job set changes (spec §4).

Each re-solve: forecast every job's remaining runtime, refresh the fair-share finish-time targets if jobs came or
went, solve the window's market (with fairness constraints, or with priorities when they cannot all hold), lay the
rounds out and fill idle GPUs. The plan is replayed round by round until a job arrives or completes, the
re-solve period passes or the window runs out. A solver failure never stops the run: the previous plan's remainder,
filled, is used instead, and counted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.fairness import FinishTimeTargets, equal_share, fair_finish_estimate
from shockwave.policies.shockwave.market import Fairness, MarketInputs, SolverFailure, solve_market
from shockwave.policies.shockwave.packing import arrange, fill, pack
from shockwave.policies.shockwave.predictor import JobForecast

log = logging.getLogger(__name__)


@dataclass
class SolverStats:
    solves: int = 0
    fallbacks: int = 0
    infeasible: int = 0
    exact: int = 0
    """Re-solves whose round counts could not be laid out greedily and needed the per-round program."""
    latencies_s: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lat = np.asarray(self.latencies_s) if self.latencies_s else np.zeros(1)
        return {"solves": self.solves, "fallbacks": self.fallbacks, "infeasible": self.infeasible,
                "exact": self.exact, "p50_s": float(np.percentile(lat, 50)), "p95_s": float(np.percentile(lat, 95)),
                "max_s": float(lat.max())}


class ShockwavePolicy(Policy):
    name = "shockwave"

    def __init__(self, config: ShockwaveConfig | None = None) -> None:
        self.config = config or ShockwaveConfig()
        self.forecasts: dict[int, JobForecast] = {}
        self.targets = FinishTimeTargets()
        self.plan_start = 0
        self.rounds: list[list[int]] = []
        self.last_counts: dict[int, int] = {}
        self.job_set_changed = True
        self.stats = SolverStats()
        self.last_run: set[int] = set()

    # -- what happened ---------------------------------------------------------------------------------------------
    def job_added(self, view: SchedulerView, job: JobState) -> None:
        self.forecasts[job.id] = JobForecast(job.profile, job.family.dataset_size, submit_s=view.now)
        self.job_set_changed = True

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        del self.forecasts[job.id]
        self.targets.forget(job.id)
        self.job_set_changed = True

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int) -> None:
        self.forecasts[job.id].record(steps, exec_s, job.batch_size)

    # -- deciding --------------------------------------------------------------------------------------------------
    def plan(self, view: SchedulerView) -> list[int]:
        if not view.jobs:
            return []
        offset = view.round_index - self.plan_start
        if self.job_set_changed or offset >= min(self.config.resolve_every_rounds, len(self.rounds)):
            self._replan(view)
            offset = 0
        self.last_run = set(self.rounds[offset])
        return [j for j in self.rounds[offset] if j in view.jobs]

    def _replan(self, view: SchedulerView) -> None:
        started = time.perf_counter()
        ids = sorted(view.jobs)
        inputs = self._market_inputs(view, ids)
        try:
            layout = self._solve(inputs, ids)
        except SolverFailure as exc:
            log.warning("round %d: %s; keeping the previous plan", view.round_index, exc)
            self.stats.fallbacks += 1
            layout = self._previous_plan(view, ids)
        rows = fill(layout, inputs.scale_factors, inputs.gpus, inputs.remaining_s)
        self.rounds = [[ids[r] for r in jobs] for jobs in rows]
        self.plan_start = view.round_index
        self.job_set_changed = False
        self.stats.solves += 1
        self.stats.latencies_s.append(time.perf_counter() - started)

    def _market_inputs(self, view: SchedulerView, ids: list[int]) -> MarketInputs:
        jobs, cfg = view.jobs, self.config
        forecasts = [self.forecasts[j] for j in ids]
        progress = np.array([min(jobs[j].steps_done / jobs[j].iterations_per_epoch, f.epochs)
                             for j, f in zip(ids, forecasts, strict=True)])
        for j, f, p in zip(ids, forecasts, progress, strict=True):
            f.observe(int(p), jobs[j].batch_size, jobs[j].throughput)
        remaining = np.array([f.remaining_runtime(p) for f, p in zip(forecasts, progress, strict=True)])
        epochs = np.array([f.epochs for f in forecasts])
        share = equal_share(view.cluster.gpus, len(ids))
        if self.job_set_changed:
            self.targets.reestimate(view.round_index, {
                j: fair_finish_estimate(f.submit_s, f.elapsed(p), r, share)
                for j, f, p, r in zip(ids, forecasts, progress, remaining, strict=True)
            })
        return MarketInputs(
            scale_factors=np.array([jobs[j].scale_factor for j in ids]),
            epochs=epochs,
            progress=np.floor(progress) if __import__("os").environ.get("SWWHOLE") else progress,
            remaining_s=remaining,
            after_current_s=np.array([f.after_current(p) for f, p in zip(forecasts, progress, strict=True)]),
            epoch_s=(np.array([f.elapsed(p + 1) / (p + 1) for f, p in zip(forecasts, np.minimum(progress // 1, epochs - 1), strict=True)]) if __import__("os").environ.get("SWD") else np.where(progress < epochs, remaining / np.maximum(epochs - progress, 1e-9), 0.0)),
            targets_s=np.array([self.targets.target(j, view.round_index) for j in ids]),
            submit_s=np.array([f.submit_s for f in forecasts]),
            gpus=view.cluster.gpus,
            rounds=cfg.future_rounds,
            round_s=view.round_seconds,
            now_s=view.now,
            share=share,
        )

    def _solve(self, inputs: MarketInputs, ids: list[int]) -> list[list[int]]:
        cfg = self.config
        start = np.array([self.last_counts.get(j, 0) for j in ids])
        fairness = Fairness.constrained(inputs, cfg)
        solution = solve_market(inputs, cfg, fairness, start=start) if fairness is not None else None
        if solution is None:
            self.stats.infeasible += 1
            solution = solve_market(inputs, cfg, Fairness.relaxed_for(inputs, cfg), start=start)
        if solution is None:
            raise SolverFailure("the market without fairness constraints is infeasible")
        self.last_counts = dict(zip(ids, solution.counts.tolist(), strict=True))
        urgency = inputs.urgency(cfg)
        layout = pack(solution.counts, inputs.scale_factors, inputs.gpus, inputs.rounds, urgency)
        if layout is None:
            self.stats.exact += 1
            exact = solve_market(inputs, cfg, solution.fairness, exact=True)
            if exact is None or exact.rounds is None:
                raise SolverFailure("the per-round market is infeasible although its aggregate was not")
            layout = pack(exact.counts, inputs.scale_factors, inputs.gpus, inputs.rounds, urgency)
            if layout is None:
                layout = arrange(exact.rounds, exact.counts, urgency)
        return layout

    def _previous_plan(self, view: SchedulerView, ids: list[int]) -> list[list[int]]:
        """What is left of the last plan, in rows of the current job list."""
        row = {j: r for r, j in enumerate(ids)}
        offset = view.round_index - self.plan_start
        rest = self.rounds[offset:] if 0 <= offset < len(self.rounds) else []
        rest = [[row[j] for j in jobs if j in row] for jobs in rest]
        return rest + [[] for _ in range(self.config.future_rounds - len(rest))]

    def summary(self) -> dict[str, Any]:
        return {"solver": self.stats.summary(), "config": self.config.to_json()}
