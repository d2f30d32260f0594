"""The market MILP (spec §4.5) against brute-force enumeration on tiny instances.

For a given number of rounds c_j per job, the best continuous part is closed-form: progress y_j as the
rounds allow (the objective only gains from it), u_j the piecewise-linear log of y_j, L_j the leftover runtime
in whole rounds and M their maximum. So enumerating every count vector (or every per-round 0/1 layout) gives the
true optimum.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from shockwave.policies.shockwave import market
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.market import (
    Fairness,
    MarketInputs,
    SolverFailure,
    log_segments,
    solve_market,
)

CONFIG = ShockwaveConfig(k=1e-3, solver_rel_gap=1e-9, welfare_slack=0.3)


def instance(seed: int, jobs: int, rounds: int, gpus: int) -> tuple[MarketInputs, Fairness]:
    rng = np.random.default_rng(seed)
    epochs = rng.integers(4, 30, jobs).astype(float)
    progress = np.floor(rng.uniform(0, 0.8, jobs) * epochs * 4) / 4
    epoch_s = rng.uniform(20, 200, jobs)
    inputs = MarketInputs(
        scale_factors=rng.choice([1, 2, 4], jobs, p=[0.5, 0.3, 0.2]).clip(max=gpus),
        epochs=epochs,
        progress=progress,
        remaining_s=(epochs - progress) * epoch_s,
        epoch_s=epoch_s,
        gpus=gpus,
        rounds=rounds,
        round_s=120.0,
    )
    return inputs, Fairness(np.full(jobs, np.inf), rng.uniform(1, 5, jobs))


def evaluate(
    inputs: MarketInputs, fairness: Fairness, config: ShockwaveConfig, counts: np.ndarray
) -> tuple[float, float, float] | None:
    """(welfare W, makespan term M in rounds, objective) of the best plan with these counts; None if infeasible."""
    t, n, h = inputs.round_s, inputs.jobs, inputs.rounds
    epochs_per_round = np.divide(t, inputs.epoch_s, out=np.zeros(n), where=inputs.epoch_s > 0)
    y = np.minimum(1.0, (inputs.progress + counts * epochs_per_round) / inputs.epochs)
    slopes, intercepts = log_segments(config.log_approximation_bases)
    u = np.min(np.outer(y, slopes) + intercepts, axis=1)
    leftover = np.maximum(0, inputs.remaining_rounds - counts).astype(float)
    if (leftover > fairness.leftover_ub + 1e-9).any():
        return None
    welfare = float(fairness.weights @ u / (n * h))
    makespan = float(leftover.max())
    return welfare, makespan, welfare - config.k * t * makespan


def aggregate_plans(inputs: MarketInputs) -> list[np.ndarray]:
    caps = inputs.round_cap
    plans = []
    for counts in itertools.product(*(range(c + 1) for c in caps)):
        c = np.array(counts)
        if c @ inputs.scale_factors <= inputs.gpus * inputs.rounds:
            plans.append(c)
    return plans


def per_round_plans(inputs: MarketInputs) -> list[np.ndarray]:
    """Counts of every 0/1 layout with per-round capacity (the reference's formulation)."""
    n, h = inputs.jobs, inputs.rounds
    fits = [
        set_ for set_ in itertools.product((0, 1), repeat=n) if np.array(set_) @ inputs.scale_factors <= inputs.gpus
    ]
    plans = {tuple(np.sum(rows, axis=0)) for rows in itertools.product(fits, repeat=h)}
    return [np.array(p) for p in plans if (np.array(p) <= inputs.round_cap).all()]


def brute_force(
    inputs: MarketInputs, fairness: Fairness, config: ShockwaveConfig, plans: list[np.ndarray]
) -> tuple[float, float] | None:
    """(best objective, best completion score among plans within the second solve's guards)."""
    scored = [(c, v) for c in plans if (v := evaluate(inputs, fairness, config, c)) is not None]
    if not scored:
        return None
    _, (w1, m1, best) = max(scored, key=lambda cv: cv[1][2])
    completion = 1.0 / inputs.round_cap.astype(float) ** 2
    guarded = [
        c @ completion
        for c, (w, m, _) in scored
        if w >= w1 - config.welfare_slack * abs(w1) - 1e-9 and m <= m1 * (1 + config.solver_rel_gap) + 1e-9
    ]
    return best, max(guarded)


@pytest.mark.parametrize("seed", range(12))
def test_aggregate_market_matches_enumeration(seed: int) -> None:
    inputs, fairness = instance(seed, jobs=5, rounds=4, gpus=4)
    solution = solve_market(inputs, CONFIG, fairness)
    best, completion = brute_force(inputs, fairness, CONFIG, aggregate_plans(inputs))
    assert solution.objective == pytest.approx(best, abs=1e-6)
    assert solution.counts @ (1.0 / inputs.round_cap.astype(float) ** 2) == pytest.approx(completion, abs=1e-6)
    assert evaluate(inputs, fairness, CONFIG, solution.counts) is not None


@pytest.mark.parametrize("seed", range(4))
def test_per_round_market_matches_enumeration(seed: int) -> None:
    inputs, fairness = instance(100 + seed, jobs=3, rounds=3, gpus=2)
    solution = solve_market(inputs, CONFIG, fairness, exact=True)
    best, completion = brute_force(inputs, fairness, CONFIG, per_round_plans(inputs))
    assert solution.objective == pytest.approx(best, abs=1e-6)
    assert solution.counts @ (1.0 / inputs.round_cap.astype(float) ** 2) == pytest.approx(completion, abs=1e-6)
    assert solution.rounds is not None
    for jobs_in_round in solution.rounds:
        assert inputs.scale_factors[jobs_in_round].sum() <= inputs.gpus
    assert [sum(j in r for r in solution.rounds) for j in range(inputs.jobs)] == solution.counts.tolist()


@pytest.mark.parametrize("seed", range(4))
def test_fairness_constraints_match_enumeration(seed: int) -> None:
    inputs, _ = instance(200 + seed, jobs=4, rounds=4, gpus=4)
    # Each job may leave at most 80% of its runtime for after the window.
    bound = np.floor(0.8 * inputs.remaining_rounds)
    fairness = Fairness(bound, np.ones(inputs.jobs))
    expected = brute_force(inputs, fairness, CONFIG, aggregate_plans(inputs))
    solution = solve_market(inputs, CONFIG, fairness)
    if expected is None:
        assert solution is None
    else:
        assert solution is not None and solution.objective == pytest.approx(expected[0], abs=1e-6)


def test_infeasible_fairness_gives_none() -> None:
    inputs, _ = instance(7, jobs=3, rounds=2, gpus=2)
    assert (inputs.remaining_s > inputs.rounds * inputs.round_s).any()  # some job cannot finish in the window
    nothing_left_after_window = Fairness(np.zeros(inputs.jobs), np.ones(inputs.jobs))
    assert solve_market(inputs, CONFIG, nothing_left_after_window) is None


def test_zero_welfare_slack_is_a_pure_tie_break() -> None:
    inputs, fairness = instance(3, jobs=4, rounds=4, gpus=4)
    strict = replace(CONFIG, welfare_slack=0.0)
    solution = solve_market(inputs, strict, fairness)
    _, _, objective = evaluate(inputs, fairness, strict, solution.counts)
    assert objective == pytest.approx(solution.objective, abs=1e-6)


def test_solver_failure_is_raised_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    inputs, fairness = instance(1, jobs=4, rounds=4, gpus=4)

    def broken(solver: object) -> None:
        raise SolverFailure("HiGHS returned Solve error without a usable solution")

    monkeypatch.setattr(market, "_run", broken)
    with pytest.raises(SolverFailure):
        solve_market(inputs, CONFIG, fairness)


def test_log_segments_interpolate_the_breakpoints() -> None:
    slopes, intercepts = log_segments((0.0, 0.5, 1.0))
    assert slopes[1] * 1.0 + intercepts[1] == pytest.approx(0.0)
    assert slopes[1] * 0.5 + intercepts[1] == pytest.approx(np.log(0.5))
    assert intercepts[0] == pytest.approx(market.LOG_OF_ZERO)


def test_a_job_with_nothing_left_is_planned_without_nan() -> None:
    """The reference's zero-remaining job (progress = epochs, spec notes on job 35) must not poison the model."""
    inputs, fairness = instance(5, jobs=4, rounds=4, gpus=4)
    done = replace(
        inputs,
        progress=np.where(np.arange(4) == 0, inputs.epochs, inputs.progress),
        remaining_s=np.where(np.arange(4) == 0, 0.0, inputs.remaining_s),
        epoch_s=np.where(np.arange(4) == 0, 0.0, inputs.epoch_s),
    )
    solution = solve_market(done, CONFIG, fairness)
    best, _ = brute_force(done, fairness, CONFIG, aggregate_plans(done))
    assert solution.objective == pytest.approx(best, abs=1e-6)


def test_non_finite_forecast_is_a_solver_failure() -> None:
    inputs, fairness = instance(5, jobs=4, rounds=4, gpus=4)
    broken = replace(inputs, remaining_s=np.array([np.nan, 1.0, 2.0, 3.0]) * 120)
    with pytest.raises(SolverFailure, match="non-finite"):
        solve_market(broken, CONFIG, fairness)
