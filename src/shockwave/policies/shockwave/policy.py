"""Shockwave (NSDI'23): plan a window of rounds as a market, re-solved when the job set changes (spec §4).

Each re-solve: forecast every job's remaining runtime, refresh the fair-share finish-time targets if jobs came or
went, solve the window's market (with fairness constraints, or with priorities when they cannot all hold), lay the
rounds out and fill idle GPUs. The plan is replayed round by round until a job arrives or completes, the
re-solve period passes or the window runs out. A solver failure never stops the run: the previous plan's remainder,
filled, is used instead, and counted.

Where some job is goodput-adaptive (Sia's workloads), the market's columns are configurations, each job's type and
number of GPUs, and the window is solved every round (`elastic.py`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any

import numpy as np
from pydantic import ConfigDict

from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.elastic import Allocations, restart_seconds
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.elastic import first_round, observe_window
from shockwave.policies.shockwave.fairness import (
    FairnessView,
    FinishTimeTargets,
)
from shockwave.policies.shockwave.greedy import critical_floor, late_floor, solve_greedy
from shockwave.policies.shockwave.longest import longest_first
from shockwave.policies.shockwave.market import (
    Fairness,
    MarketInputs,
    MarketSolution,
    SolverFailure,
    solve_market,
)
from shockwave.policies.shockwave.packing import Placed, TypedRows, arrange, fill, fill_types, pack, pack_types
from shockwave.policies.shockwave.predictor import JobForecast
from shockwave.policies.shockwave.sizing import sized_by_goodput
from shockwave.policies.shockwave.typed_greedy import solve_typed_greedy
from shockwave.policies.shockwave.window import forecast_row, window_inputs

log = logging.getLogger(__name__)

LATE_IN_FULL = 2
"""On several GPU types, the most urgent late jobs whose whole window the late floor's budget always holds."""


@dataclass
class SolverStats:
    __pydantic_config__ = ConfigDict(extra="forbid")  # a journal's copy has no field it does not keep
    solves: int = 0
    """Re-solves of the window (each one or two HiGHS runs, more when the fairness constraints fail)."""
    fallbacks: int = 0
    """Re-solves where HiGHS gave nothing usable and the previous plan was kept."""
    infeasible: int = 0
    """Re-solves whose fairness constraints could not all hold (the priority-weighted market was solved)."""
    exact: int = 0
    """Re-solves whose round counts could not be laid out greedily and needed the per-round program."""
    node_limited: int = 0
    """Re-solves where HiGHS stopped on solver_max_nodes and its best plan so far was used (the same anywhere)."""
    greedy: int = 0
    """Windows solved by `greedy.py` instead of HiGHS (many active jobs on one type)."""
    latencies_s: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lat = np.asarray(self.latencies_s) if self.latencies_s else np.zeros(1)
        return {
            "solves": self.solves,
            "fallbacks": self.fallbacks,
            "infeasible": self.infeasible,
            "exact": self.exact,
            "node_limited": self.node_limited,
            "greedy": self.greedy,
            "p50_s": float(np.percentile(lat, 50)),
            "p95_s": float(np.percentile(lat, 95)),
            "max_s": float(lat.max()),
        }


class ShockwavePolicy(Policy):
    name = "shockwave"
    plans_gpu_types = True
    """On several GPU types the market plans each job's rounds per type, in equal-share time (`market.py`)."""
    adapts_jobs = True
    """Goodput-adaptive jobs get a type and a number of GPUs every round (`elastic.py`)."""
    kept = (
        "forecasts",
        "targets",
        "plan_start",
        "rounds",
        "last_counts",
        "last_run",
        "job_set_changed",
        "stats",
        "allocations",
    )
    forecasts: dict[int, JobForecast]
    targets: FinishTimeTargets
    plan_start: int
    """Round index the window's plan starts at."""
    rounds: list[list[tuple[int, str]]]
    """The window's rounds: (job id, GPU type) in the order they are planned."""
    last_counts: dict[int, list[int]]
    """Rounds per type each job got in the last solve (the next solve's warm start)."""
    last_run: dict[int, str]
    """The type each job of the last planned round runs on."""
    job_set_changed: bool
    stats: SolverStats
    allocations: Allocations
    """Goodput-adaptive runs: each job's configuration this round, its restarts and its restore."""

    def __init__(self, config: ShockwaveConfig | None = None) -> None:
        self.config = config or ShockwaveConfig()
        # a window over several types (`_config_for`), or over configurations (`_plan_elastic`), has its own
        # second-solve slack; over several types also its own greedy threshold
        self._typed = replace(
            self.config, welfare_slack=self.config.typed_welfare_slack, greedy_jobs=self.config.typed_greedy_jobs
        )
        self._elastic = replace(self.config, welfare_slack=self.config.elastic_welfare_slack)
        self.forecasts = {}
        self.targets = FinishTimeTargets()
        self.plan_start = 0
        self.rounds = []
        self.last_counts = {}
        self.last_run = {}
        self.job_set_changed = True
        self.stats = SolverStats()
        self.allocations = Allocations()

    # -- what happened ---------------------------------------------------------------------------------------------
    def job_added(self, view: SchedulerView, job: JobState) -> None:
        cluster = view.cluster
        shares = {pool.gpu_type: pool.gpus / cluster.gpus for pool in cluster.pools}
        if not job.spec.elastic:
            self.forecasts[job.id] = JobForecast(job.profile, job.family.dataset_size, view.now, shares)
        self.allocations.added()
        self.job_set_changed = True

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        self.forecasts.pop(job.id, None)
        self.targets.forget(job.id)
        self.allocations.forget(job)
        self.job_set_changed = True

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int | float) -> None:
        if job.id in self.forecasts:
            self.forecasts[job.id].record(steps, exec_s, job.batch_size, self.last_run.get(job.id))

    # -- deciding --------------------------------------------------------------------------------------------------
    def plan(self, view: SchedulerView) -> RoundPlan:
        if not view.jobs:
            return RoundPlan()
        if any(job.spec.elastic for job in view.jobs.values()):
            return self._plan_elastic(view)
        offset = view.round_index - self.plan_start
        if self.job_set_changed or offset >= min(self.config.resolve_every_rounds, len(self.rounds)):
            self._replan(view)
            offset = 0
        placed, whole = self._runnable(view, offset)
        if not whole:  # a job switched to a batch size it cannot run where planned: plan anew, targets kept
            self._replan(view)
            placed, _ = self._runnable(view, 0)
        self.last_run = dict(placed)
        return RoundPlan(tuple(Assignment((j,), t, view.jobs[j].scale_factor) for j, t in placed))

    def _plan_elastic(self, view: SchedulerView) -> RoundPlan:
        """The first round of the window over configurations (`elastic.py`), solved anew every round."""
        started = time.perf_counter()
        ids = sorted(view.jobs)
        restart_s = {j: restart_seconds(view.jobs[j]) for j in ids}
        stint = {j: self.config.elastic_min_stint * s for j, s in restart_s.items()}
        window = observe_window(
            view,
            ids,
            self.forecasts,
            self.targets,
            self.allocations.current,
            set(self.allocations.restoring(view.now, stint)),
            np.array([self.allocations.move_factor(view.jobs[j], view.now, restart_s[j]) for j in ids]),
            rounds=self.config.future_rounds,
            refresh_targets=self.job_set_changed,
        )
        try:
            counts = self._market(window.inputs, window.fairness, None, exact=False, config=self._elastic).by_type
        except SolverFailure as exc:
            log.warning("round %d: %s; no plan, idle GPUs filled", view.round_index, exc)
            self.stats.fallbacks += 1
            counts = np.zeros((len(ids), len(window.columns)), dtype=int)
        urgency = window.fairness.urgency(self.config.lam, self.config.rhomax)
        taken = first_round(counts, window, urgency)
        if len(view.cluster.pools) == 1:
            taken = sized_by_goodput(view, ids, window, counts, taken)
        chosen = {ids[r]: window.columns[c] for r, c in taken.items()}
        self.allocations.record(view, {j: (c.gpu_type, c.gpus) for j, c in chosen.items()})
        self.last_run = {j: c.gpu_type for j, c in chosen.items()}
        self.job_set_changed = False
        self.stats.solves += 1
        self.stats.latencies_s.append(time.perf_counter() - started)
        return RoundPlan(tuple(Assignment((j,), c.gpu_type, c.gpus) for j, c in sorted(chosen.items())))

    def _runnable(self, view: SchedulerView, offset: int) -> tuple[list[tuple[int, str]], bool]:
        """The plan's round `offset` for the active jobs, less any on a type it cannot run on, and whether none
        was."""
        planned = [(j, t) for j, t in self.rounds[offset] if j in view.jobs]
        placed = [(j, t) for j, t in planned if view.jobs[j].rates.get(t, 0.0) > 0]
        return placed, len(placed) == len(planned)

    def _replan(self, view: SchedulerView) -> None:
        started = time.perf_counter()
        ids = sorted(view.jobs)
        inputs, fairness_view = self._observe(view, ids)
        types = view.cluster.types
        rows, before = self._rows(inputs, fairness_view), self._before(ids, types)
        try:
            layout = self._solve(inputs, fairness_view, ids, types, rows, before)
        except SolverFailure as exc:
            log.warning("round %d: %s; keeping the previous plan", view.round_index, exc)
            self.stats.fallbacks += 1
            layout = self._previous_plan(view, ids)
        if len(types) == 1:
            rows = fill(
                [[r for r, _ in placed] for placed in layout], inputs.scale_factors, inputs.gpus, inputs.remaining_s
            )
            layout = [[(r, 0) for r in jobs] for jobs in rows]
        else:
            layout = fill_types(layout, rows, inputs.capacities, before)
        self.rounds = [[(ids[r], types[t]) for r, t in placed] for placed in layout]
        self.plan_start = view.round_index
        self.job_set_changed = False
        self.stats.solves += 1
        self.stats.latencies_s.append(time.perf_counter() - started)

    def _observe(self, view: SchedulerView, ids: list[int]) -> tuple[MarketInputs, FairnessView]:
        """Forecast every job and, when the job set changed, refresh the finish-time targets."""
        rows = [forecast_row(view, view.jobs[j], self.forecasts[j]) for j in ids]
        return window_inputs(
            view,
            ids,
            rows,
            self.targets,
            rounds=self.config.future_rounds,
            refresh_targets=self.job_set_changed,
        )

    def _solve(
        self,
        inputs: MarketInputs,
        view: FairnessView,
        ids: list[int],
        types: tuple[str, ...],
        rows: TypedRows,
        before: dict[int, int],
    ) -> list[list[Placed]]:
        """The window's market, laid out in rounds (`rows`: each job as the layout reads it; `before`: the type
        each job row ran on in the last planned round)."""
        cfg = self.config
        start = np.array([self.last_counts.get(j, [0] * len(types)) for j in ids])
        solution = self._market(inputs, view, start, exact=False)
        self.last_counts = dict(zip(ids, solution.by_type.tolist(), strict=True))
        urgency, late = rows.urgency, rows.late
        laid = cfg.resolve_every_rounds  # no later round of the window runs
        if len(types) > 1:
            return pack_types(solution.by_type, rows, inputs.capacities, inputs.rounds, before, laid=laid)
        running = set(before)
        layout = pack(solution.counts, inputs.scale_factors, inputs.gpus, inputs.rounds, urgency, late, running)
        if layout is None and self._greedy(inputs, exact=False):
            # The per-round program has a binary per job and round: thousands of jobs would take minutes. The
            # round-by-round layout never fails (a job that finds no room loses that round; the next solve gives
            # it again). On one type it keeps `pack`'s order: no job counts as critical or far behind.
            in_order = replace(rows, far_behind=np.zeros_like(late), critical=np.zeros_like(late))
            return pack_types(solution.by_type, in_order, inputs.capacities, inputs.rounds, before, laid=laid)
        if layout is None:
            layout = self._exact_layout(inputs, view, start, urgency, late, running)
        return [[(r, 0) for r in jobs] for jobs in layout]

    def _rows(self, inputs: MarketInputs, view: FairnessView) -> TypedRows:
        cfg = self.config
        return TypedRows(
            sizes=inputs.scale_factors,
            speeds=inputs.speed,
            work=inputs.remaining_s / inputs.round_s,
            urgency=view.urgency(cfg.lam, cfg.rhomax),
            late=view.late(cfg.rhomax),
            far_behind=view.far_behind(cfg.rhomax),
            critical=inputs.critical,
        )

    def _before(self, ids: list[int], types: tuple[str, ...]) -> dict[int, int]:
        """The type each job row ran on in the last planned round."""
        return {r: types.index(self.last_run[j]) for r, j in enumerate(ids) if j in self.last_run}

    def _exact_layout(
        self,
        inputs: MarketInputs,
        view: FairnessView,
        start: np.ndarray,
        urgency: np.ndarray,
        late: np.ndarray,
        running: set[int],
    ) -> list[list[int]]:
        """One type, when the counts cannot be laid out greedily: the per-round program's counts laid out, else its
        own rounds."""
        self.stats.exact += 1
        exact = self._market(inputs, view, start, exact=True)
        layout = pack(exact.counts, inputs.scale_factors, inputs.gpus, inputs.rounds, urgency, late, running)
        if layout is None and exact.rounds is not None:
            layout = arrange(exact.rounds, exact.counts, urgency)
        if layout is None:
            raise SolverFailure("the per-round market returned no layout")
        return layout

    def _market(
        self,
        inputs: MarketInputs,
        view: FairnessView,
        start: np.ndarray | None,
        *,
        exact: bool,
        config: ShockwaveConfig | None = None,
    ) -> MarketSolution:
        """The market with fairness constraints, or with priorities when the constraints cannot all hold (`config`:
        instead of the policy's for the window, `_config_for`)."""
        cfg = config or self._config_for(inputs)
        fairness = Fairness.constrained(view, inputs, cfg)
        solution = self._window(inputs, view, fairness, start, exact, cfg) if fairness is not None else None
        if solution is None:
            if not exact:
                self.stats.infeasible += 1
            gangs = inputs.scale_factors if len(inputs.capacities) > 1 else None
            solution = self._window(inputs, view, Fairness.relaxed_for(view, cfg, gangs), start, exact, cfg)
        if solution is None:
            raise SolverFailure("the market without fairness constraints is infeasible")
        self.stats.node_limited += solution.limited
        self.stats.greedy += self._greedy(inputs, exact)
        return solution

    def _config_for(self, inputs: MarketInputs) -> ShockwaveConfig:
        """The policy's config for a window of rigid jobs: on several types `typed_welfare_slack` and
        `typed_greedy_jobs` stand for `welfare_slack` and `greedy_jobs`."""
        return self._typed if len(inputs.capacities) > 1 else self.config

    def _greedy(self, inputs: MarketInputs, exact: bool) -> bool:
        """Whether the window is solved greedily (`greedy.py`, on several types `typed_greedy.py`): from
        `greedy_jobs` active jobs (`typed_greedy_jobs` on several types); never over configurations."""
        return not exact and not inputs.column_types and inputs.jobs >= self._config_for(inputs).greedy_jobs

    def _window(
        self,
        inputs: MarketInputs,
        view: FairnessView,
        fairness: Fairness,
        start: np.ndarray | None,
        exact: bool,
        cfg: ShockwaveConfig,
    ) -> MarketSolution | None:
        """HiGHS, or from `greedy_jobs` (`typed_greedy_jobs`) active jobs the greedy solution, critical jobs first."""
        if self._greedy(inputs, exact):
            late, urgency = view.late(cfg.rhomax), view.urgency(cfg.lam, cfg.rhomax)
            if len(inputs.capacities) > 1:
                return solve_typed_greedy(inputs, cfg, fairness, late, urgency)
            first = critical_floor(inputs, late, urgency, cfg.makespan_share, cfg.late_share)
            return solve_greedy(inputs, cfg, fairness, first)
        typed = len(inputs.capacities) > 1 and not inputs.column_types
        # The floors' budgets count all GPUs together: where a type cannot hold one, the window is solved again
        # without it (more solves, counted in the latencies): the longest jobs' progress goes first, then the late
        # jobs' floor. Neither over configurations (`_late_floor`).
        floors = [self._late_floor(inputs, view), None] if typed and fairness.relaxed else [None]
        progress = longest_first(inputs, cfg.longest_jobs, cfg.longest_share) if typed else None
        for floor, least in product(floors, [progress, None] if progress is not None else [None]):
            solution = solve_market(inputs, cfg, fairness, start=start, exact=exact, floor=floor, progress=least)
            if solution is not None:
                return solution
        return None

    def _late_floor(self, inputs: MarketInputs, view: FairnessView) -> np.ndarray:
        """On several types, when the priorities decide: the most urgent late jobs' rounds for the window, as the
        greedy market gives them (`late_floor`). Why: a long job far behind gains per round a twentieth of what a
        new job gains (the log's first segment is steep), so priorities rho^lambda alone left the worst job of a
        Gavel-style trace without a round for days. Not for windows over configurations, where any configuration,
        one GPU's too, would count as a round (measured on Sia's heterogeneous workloads, the floor's makespans
        against none: Saturn 2 and 3 1.059x and 1.077x Sia's against 1.025x and 1.057x, Philly 2 1.092x against
        1.145x, JCT and fairness alike).

        The budget, `late_share` of the window's GPU-rounds, always holds the whole window of the LATE_IN_FULL most
        urgent late jobs: an 8-GPU gang's window on 8:8:8 (160 GPU-rounds) is more than the budget (120), and a late
        gang given part of its window still ended behind (Gavel-style gang traces, seeds 4444 and 5444: worst rho
        1.47 and 1.45, 4.5% and 5.5% of jobs unfair; with it 0.85 and 0.73, none)."""
        cfg = self.config
        cap = inputs.type_cap.max(axis=1)
        sizes = inputs.scale_factors.astype(int)
        late, urgency = view.late(cfg.rhomax), view.urgency(cfg.lam, cfg.rhomax)
        budget = int(cfg.late_share * inputs.gpus * inputs.rounds)
        floor = np.zeros(inputs.jobs, dtype=int)
        return late_floor(floor, cap, sizes, late, urgency, budget, in_part=True, in_full=LATE_IN_FULL)

    def _previous_plan(self, view: SchedulerView, ids: list[int]) -> list[list[Placed]]:
        """What is left of the last plan, in rows of the current job list and indices of the cluster's types (on
        several types only the rounds before the next re-solve were laid out: the rest comes back empty, for the
        fill)."""
        row = {j: r for r, j in enumerate(ids)}
        types = view.cluster.types
        offset = view.round_index - self.plan_start
        rest = self.rounds[offset:] if 0 <= offset < len(self.rounds) else []
        layout = [[(row[j], types.index(t)) for j, t in placed if j in row] for placed in rest]
        return layout + [[] for _ in range(self.config.future_rounds - len(layout))]

    def summary(self) -> dict[str, Any]:
        found = {"solver": self.stats.summary(), "config": self.config.to_json()}
        if self.allocations.restarts_total:
            found["elastic"] = self.allocations.summary()
        return found
