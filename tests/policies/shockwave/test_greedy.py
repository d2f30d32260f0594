"""The market at scale: the greedy window (`greedy.py`) against the exact program and brute force on small
instances, its limits and determinism, and the caches that make forecasts, targets and placement cheap at thousands
of jobs (each checked against the plain computation it replaces)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from test_market import instance as market_instance

from shockwave.core.cluster import ClusterSpec, Pool
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.fairness import MOMENTUM, FinishTimeTargets
from shockwave.policies.shockwave.greedy import Greedy, critical_floor, late_floor, leveled, solve_greedy
from shockwave.policies.shockwave.market import Fairness, MarketInputs, log_segments, solve_market
from shockwave.policies.shockwave.packing import first_fit
from shockwave.policies.shockwave.predictor import JobForecast
from shockwave.simulator.mechanics import preset
from shockwave.simulator.placement import _Servers
from shockwave.simulator.run import simulate
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.profile import JobProfile
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import write_trace

EXACT = ShockwaveConfig(k=1e-3, solver_rel_gap=1e-9, welfare_slack=0.3)
"""The canonical weight of the makespan term: welfare and makespan both matter."""
MAKESPAN_FIRST = ShockwaveConfig(k=1e5, solver_rel_gap=1e-9, welfare_slack=0.3)
"""The 256-GPU configuration's weight: the makespan term decides."""


def instance(seed: int, jobs: int, rounds: int, gpus: int, bounded: bool = False) -> tuple[MarketInputs, Fairness]:
    """The exact market tests' random window; `bounded`: finish-time bounds instead of priorities."""
    inputs, fairness = market_instance(seed, jobs, rounds, gpus)
    if bounded:
        slack = np.random.default_rng(seed).integers(0, 3, jobs)
        return inputs, Fairness(np.floor(0.9 * inputs.remaining_rounds) + slack, np.ones(jobs))
    return inputs, fairness


def objective(inputs: MarketInputs, fairness: Fairness, config: ShockwaveConfig, counts: np.ndarray) -> float | None:
    """The exact program's objective for whole counts (None when they break a row)."""
    n, h, t = inputs.jobs, inputs.rounds, inputs.round_s
    if (counts < 0).any() or (counts > inputs.round_cap).any() or counts @ inputs.scale_factors > inputs.gpus * h:
        return None
    leftover = np.maximum(0, inputs.remaining_rounds - counts)
    if (leftover > fairness.leftover_ub + 1e-9).any():
        return None
    epochs_per_round = np.divide(t, inputs.epoch_s, out=np.zeros(n), where=inputs.epoch_s > 0)
    y = np.minimum(1.0, (inputs.progress + counts * epochs_per_round) / inputs.epochs)
    slopes, intercepts = log_segments(config.log_approximation_bases)
    u = np.min(np.outer(y, slopes) + intercepts, axis=1)
    return float(fairness.weights @ u / (n * h)) - config.k * t * float(leftover.max())


def optimum(inputs: MarketInputs, fairness: Fairness, config: ShockwaveConfig) -> float | None:
    values = [
        v
        for counts in itertools.product(*(range(c + 1) for c in inputs.round_cap))
        if (v := objective(inputs, fairness, config, np.array(counts))) is not None
    ]
    return max(values) if values else None


def largest_item(greedy: Greedy) -> float:
    return float(greedy.gain.max(initial=0.0))


@pytest.mark.parametrize("config", [EXACT, MAKESPAN_FIRST], ids=["k=1e-3", "k=1e5"])
@pytest.mark.parametrize("seed", range(10))
def test_greedy_is_within_one_item_of_brute_force(seed: int, config: ShockwaveConfig) -> None:
    inputs, fairness = instance(seed, jobs=5, rounds=4, gpus=4, bounded=seed % 2 == 1)
    best = optimum(inputs, fairness, config)
    solution = solve_greedy(inputs, config, fairness)
    if best is None:
        assert solution is None
        return
    assert solution is not None
    counts = solution.counts
    first = objective(inputs, fairness, config, counts)
    assert first is not None, "the plan breaks a row of the exact program"
    greedy = Greedy.of(inputs, config, fairness)
    assert greedy is not None
    assert greedy.relaxed(greedy.best_makespan()) >= best - 1e-9, "the LP value bounds the optimum"
    assert solution.objective >= best - largest_item(greedy) - 1e-9
    assert solution.objective <= best + 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_greedy_matches_highs_on_larger_windows(seed: int) -> None:
    """40 jobs, 20 rounds, 16 GPUs: the first solve's objective within one item of HiGHS's, the makespan term
    equal, and the second solve keeps its guards."""
    inputs, fairness = instance(50 + seed, jobs=40, rounds=20, gpus=16)
    exact = solve_market(inputs, MAKESPAN_FIRST, fairness)
    fast = solve_greedy(inputs, MAKESPAN_FIRST, fairness)
    assert exact is not None and fast is not None
    greedy = Greedy.of(inputs, MAKESPAN_FIRST, fairness)
    assert greedy is not None
    assert fast.objective >= exact.objective - largest_item(greedy) - 1e-6
    first_makespan = greedy.objective(greedy.take(greedy.by_density, greedy.best_makespan())[0])[1]
    assert greedy.objective(fast.counts)[1] <= first_makespan
    assert greedy.objective(exact.counts)[1] == first_makespan
    assert objective(inputs, fairness, MAKESPAN_FIRST, fast.counts) is not None


def test_second_solve_keeps_the_welfare_it_promises() -> None:
    inputs, fairness = instance(3, jobs=60, rounds=20, gpus=16)
    config = dataclasses.replace(EXACT, welfare_slack=0.3)
    greedy = Greedy.of(inputs, config, fairness)
    assert greedy is not None
    first, welfare = greedy.take(greedy.by_density, greedy.best_makespan())
    final = solve_greedy(inputs, config, fairness)
    assert final is not None
    final_welfare = greedy.objective(final.counts)[0] + greedy.makespan_cost * greedy.objective(final.counts)[1]
    assert final_welfare >= welfare - 0.3 * abs(welfare) - 1e-9
    assert greedy.objective(final.counts)[1] <= greedy.objective(first)[1]
    completion = 1.0 / inputs.round_cap.astype(float) ** 2
    assert final.counts @ completion >= first @ completion - 1e-9


def test_infeasible_bounds_give_none_as_the_exact_program() -> None:
    inputs, _ = instance(7, jobs=6, rounds=3, gpus=2)
    fairness = Fairness(np.zeros(6), np.ones(6))
    assert solve_market(inputs, EXACT, fairness) is None
    assert solve_greedy(inputs, EXACT, fairness) is None


def test_greedy_is_deterministic() -> None:
    inputs, fairness = instance(11, jobs=300, rounds=20, gpus=64)
    first = solve_greedy(inputs, MAKESPAN_FIRST, fairness)
    again = solve_greedy(dataclasses.replace(inputs), MAKESPAN_FIRST, fairness)
    assert first is not None and again is not None
    assert first.counts.tobytes() == again.counts.tobytes() and first.objective == again.objective


def critical_instance(seed: int) -> tuple[MarketInputs, np.ndarray]:
    """40 jobs of 1-59 rounds on 128 GPUs and a 10-round window: the longest are on the critical path."""
    rng = np.random.default_rng(seed)
    rem = rng.integers(1, 60, 40)
    inputs = MarketInputs(
        scale_factors=rng.choice([1, 2, 4], 40),
        epochs=rem.astype(float),
        progress=np.zeros(40),
        remaining_s=rem * 120.0,
        epoch_s=np.full(40, 120.0),
        gpus=128,
        rounds=10,
        round_s=120.0,
    )
    return inputs, rng.uniform(size=40) < 0.5


@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("seed", range(3))
def test_leveling_is_one_level_as_low_as_its_share_allows(seed: int, share: float) -> None:
    """raised_j = clip(rem_j - level, 0, cap_j) for one level: at least the projected remaining rounds minus the
    window, and the lowest whose GPU-rounds fit the share."""
    inputs, _ = critical_instance(seed)
    rem, cap, sizes = inputs.remaining_rounds, inputs.round_cap, inputs.scale_factors
    window = inputs.gpus * inputs.rounds
    raised = leveled(rem, cap, sizes, inputs.gpus, inputs.rounds, share * window)

    def at(level: int) -> np.ndarray:
        return np.clip(rem - level, 0, cap)

    levels = [level for level in range(int(rem.max()) + 1) if (at(level) == raised).all()]
    assert levels, "not one common level"
    level = levels[0]
    assert sizes @ raised <= share * window
    lowest = max(0, math.ceil(sizes @ rem / inputs.gpus - inputs.rounds))
    assert level <= lowest or sizes @ at(level - 1) > share * window
    assert (raised == 0).all() if share == 0.0 else (raised > 0).any()


def test_leveling_forces_nothing_while_the_cluster_has_more_work_than_any_job() -> None:
    rem = np.array([10, 12, 8, 9])
    assert (leveled(rem, np.minimum(rem, 5), np.ones(4), 1, 5, 5.0) == 0).all(), (
        "39 rounds of work on one GPU: no job is critical in a 5-round window"
    )
    raised = leveled(np.array([30, 2]), np.array([5, 2]), np.ones(2), 4, 5, 20.0)
    assert raised.tolist() == [5, 0], "the 30-round job alone decides the end: it runs every round"


@pytest.mark.parametrize("seed", range(3))
def test_critical_floor_levels_then_gives_late_jobs_their_rounds_most_urgent_first(seed: int) -> None:
    inputs, late = critical_instance(seed)
    rem, cap, sizes = inputs.remaining_rounds, inputs.round_cap, inputs.scale_factors
    window = inputs.gpus * inputs.rounds
    urgency = np.random.default_rng(seed).uniform(0, 3, 40)
    floor = critical_floor(inputs, late, urgency, 0.5, 0.05)
    level = leveled(rem, cap, sizes, inputs.gpus, inputs.rounds, 0.5 * window)
    candidates = late & (level < cap)
    assert (candidates & (level > 0)).any(), "a late job is levelled too: it needs only the rounds on top"
    assert sizes[candidates] @ (cap - level)[candidates] > 0.05 * window, "not every late job fits: the order matters"
    assert (floor >= level).all() and (floor <= cap).all()
    rescued = floor > level
    assert (late[rescued]).all() and (floor[rescued] == cap[rescued]).all()
    assert sizes @ (floor - level) <= 0.05 * window
    expected, left = [], int(0.05 * window)
    for j in sorted(np.flatnonzero(candidates), key=lambda j: (-urgency[j], j)):
        if sizes[j] * (cap[j] - level[j]) <= left:
            expected.append(j)
            left -= sizes[j] * (cap[j] - level[j])
    assert expected and sorted(expected) == np.flatnonzero(rescued).tolist()
    solution = solve_greedy(inputs, MAKESPAN_FIRST, Fairness(np.full(40, np.inf), np.ones(40)), floor)
    assert solution is not None
    assert (solution.counts >= floor).all() and solution.counts @ sizes <= window


def test_late_floor_in_part_gives_a_gang_what_fits_where_whole_skips_it() -> None:
    # Budget 100 GPU-rounds; the most urgent late job is an 8-GPU gang wanting 20 rounds (160), then a 1-GPU job
    # wanting 20. Whole: the gang does not fit and the small job takes 20. In part: the gang takes 12 rounds (96),
    # the small job the 4 left.
    floor, cap = np.zeros(2, dtype=int), np.array([20, 20])
    sizes, late, urgency = np.array([8, 1]), np.array([True, True]), np.array([9.0, 1.0])
    assert late_floor(floor, cap, sizes, late, urgency, 100).tolist() == [0, 20]
    assert late_floor(floor, cap, sizes, late, urgency, 100, in_part=True).tolist() == [12, 4]
    # Jobs on track get nothing, and the floor passed in is kept (not changed in place).
    on_track = late_floor(np.array([3, 0]), cap, sizes, np.array([False, True]), urgency, 100, in_part=True)
    assert on_track.tolist() == [3, 20]


@pytest.mark.parametrize("seed", range(20))
def test_first_fit_picks_what_a_sequential_pass_picks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 4, 8], int(rng.integers(0, 60)))
    budget = int(rng.integers(0, 80))
    picked, free = [], budget
    for position, size in enumerate(sizes):
        if size <= free:
            picked.append(position)
            free -= size
    assert first_fit(sizes, budget).tolist() == picked


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "small.trace"
    write_trace(
        generate(GeneratorParams(jobs=30, min_hours=0.1, max_hours=0.5, lam=20.0, seed=5), load_throughputs(None)), path
    )
    return path


def test_policy_on_the_greedy_path_finishes_every_job_the_same_way_twice(small_trace: Path) -> None:
    config = ShockwaveConfig(greedy_jobs=1)

    def run() -> dict:
        result, _ = simulate(small_trace, "shockwave", ClusterSpec.of(8), preset("corrected"), None, config)
        return result

    first, second = run(), run()
    assert first["complete"] and first["solver"]["greedy"] == first["solver"]["solves"] > 0
    for key in ("makespan_s", "avg_jct_s", "worst_ftf", "jobs"):
        assert first[key] == second[key]


# -- caches: the same numbers as the plain computation -------------------------------------------------------------
def test_cached_forecast_equals_a_fresh_one() -> None:
    profile = JobProfile(40, ((32, 10, 10.0), (64, 20, 6.0), (128, 10, 4.0)))
    forecast = JobForecast(profile, 3200, 0.0)
    rng = np.random.default_rng(0)
    batch = 32
    for epoch in range(0, 39, 3):
        batch = int(rng.choice([32, 64, 128, 256]))
        forecast.observe(epoch, batch, {"v100": 2.0})
        forecast.record(int(rng.integers(1, 50)), float(rng.uniform(10, 120)), batch)
        fresh = JobForecast.from_state_dict(forecast.state_dict())
        for progress in (epoch, epoch + 0.5, max(epoch - 2, 0)):
            assert forecast.remaining_runtime(progress) == fresh.remaining_runtime(progress)
            assert forecast.after_current(progress) == fresh.after_current(progress)
            observed = fresh.observed[: int(progress)]
            durations = fresh.equal_share_durations()
            plain = sum(durations[bs] for bs in observed)
            if int(progress) < len(fresh.observed):
                plain += (progress - int(progress)) * durations[fresh.observed[int(progress)]]
            assert forecast.elapsed(progress) == plain


def test_incremental_targets_equal_the_weighted_average() -> None:
    targets = FinishTimeTargets()
    rng = np.random.default_rng(1)
    series: list[tuple[int, float]] = []
    for round_index in sorted(rng.integers(0, 200, 60).tolist()):
        value = float(rng.uniform(1e3, 1e5))
        targets.reestimate(round_index, {7: value})
        if series and series[-1][0] == round_index:
            series[-1] = (round_index, value)
        else:
            series.append((round_index, value))
        now = round_index + int(rng.integers(0, 5))
        rounds = [r for r, _ in series] + [now]
        weights = [b - a for a, b in itertools.pairwise(rounds)]
        if sum(weights) == 0:
            expected = series[-1][1]
        else:
            average = sum(w * v for w, (_, v) in zip(weights, series, strict=True)) / sum(weights)
            expected = MOMENTUM * average + (1 - MOMENTUM) * series[-1][1]
        assert targets.target(7, now) == expected


def _fullest_fitting_by_scan(size: int, taken: set[int], per: int, gpu_ids: range) -> tuple[int, ...] | None:
    """The plain rule: scan every server, keep the first with the fewest free GPUs that still holds the gang."""
    best: list[int] | None = None
    for first in range(gpu_ids.start, gpu_ids.stop, per):
        free = [g for g in range(first, first + per) if g not in taken]
        if len(free) >= size and (best is None or len(free) < len(best)):
            best = free
    return tuple(best[:size]) if best is not None and size <= per else None


@pytest.mark.parametrize("per", [1, 2, 4, 8])
def test_server_index_picks_what_a_scan_picks(per: int) -> None:
    rng = np.random.default_rng(per)
    gpu_ids = range(16, 16 + 64)
    servers = _Servers(Pool("v100", 64, per), gpu_ids)
    taken: set[int] = set()
    for _ in range(80):
        size = int(rng.choice([1, 2, 4, 8]))
        expected = _fullest_fitting_by_scan(size, taken, per, gpu_ids)
        assert servers.fullest_fitting(size, taken) == expected
        if expected is not None:
            taken.update(expected)
            servers.take(expected)


def test_greedy_windows_never_reach_the_per_round_program(small_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the counts cannot be laid out greedily, thousands of jobs must not fall to a binary per job and round:
    the round-by-round layout is used, and every job still finishes."""
    from shockwave.policies.shockwave import policy

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the per-round program was solved")

    monkeypatch.setattr(policy, "pack", lambda *args, **kwargs: None)
    monkeypatch.setattr(policy.ShockwavePolicy, "_exact_layout", refuse)
    result, _ = simulate(
        small_trace, "shockwave", ClusterSpec.of(8), preset("corrected"), None, ShockwaveConfig(greedy_jobs=1)
    )
    assert result["complete"] and result["solver"]["exact"] == 0
    # On one type this path keeps `pack`'s order: the numbers of cf6537e, before the layout on several types
    # changed (fastest type, work done, far behind first, the first rounds only).
    assert (result["makespan_s"], result["avg_jct_s"]) == (4832.075401398451, 2192.627831213214)
