"""The longest jobs first on several GPU types (`longest.py`): which jobs must progress and by how much, within
the budget, and that the market honours it; and the late floor's budget, which holds the most urgent late gangs."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
from test_gpu_types import CONFIG
from test_typed_greedy import window

from shockwave.policies.shockwave.longest import MARGIN, longest_first
from shockwave.policies.shockwave.market import Fairness, solve_market
from shockwave.policies.shockwave.policy import ShockwavePolicy

ROUNDS = 10


def test_the_longest_job_runs_every_round_at_its_fastest_speed() -> None:
    # job 2 needs 1,000 rounds at speed 2 (500 in time); jobs 0 and 1 are far below the level
    inputs = window([[2.0, 0.5], [1.0, 1.0], [2.0, 1.0]], [600.0, 600.0, 60000.0], (4, 4))
    progress = longest_first(inputs, jobs=3, share=1.0)
    assert progress is not None
    assert progress.tolist() == [0.0, 0.0, 2.0 * ROUNDS]


def test_jobs_just_behind_the_longest_are_levelled_with_it() -> None:
    # times left 500 and 470 rounds: the level is (1 - MARGIN) x 500 - 10 = 465, so job 1 must do 5 rounds' time
    inputs = window([[1.0, 0.5], [1.0, 0.5]], [30000.0, 28200.0], (4, 4))
    progress = longest_first(inputs, jobs=2, share=1.0)
    assert progress is not None
    assert (1 - MARGIN) * 500 - ROUNDS == 465
    assert progress.tolist() == [ROUNDS, 5.0]


def test_near_the_end_only_the_chosen_jobs_are_asked_for_progress() -> None:
    # the projected end (5 rounds) is within the window: the level is below 0, and the jobs not chosen stay free
    inputs = window([[1.0, 1.0]] * 4, [300.0, 120.0, 60.0, 60.0], (4, 4))
    progress = longest_first(inputs, jobs=1, share=1.0)
    assert progress is not None
    assert progress.tolist() == [5.0, 0.0, 0.0, 0.0]


def test_only_the_longest_jobs_count() -> None:
    inputs = window([[1.0, 0.5]] * 3, [30000.0, 29900.0, 29800.0], (4, 4))
    progress = longest_first(inputs, jobs=1, share=1.0)
    assert progress is not None
    assert progress.tolist() == [ROUNDS, 0.0, 0.0]


def test_the_budget_raises_the_level() -> None:
    # three jobs alike on 4 GPUs: 10% of 40 GPU-rounds is 4, so they share 4 rounds of progress
    inputs = window([[1.0, 1.0]] * 3, [30000.0] * 3, (2, 2))
    progress = longest_first(inputs, jobs=3, share=0.1)
    assert progress is not None
    assert progress.sum() <= 0.1 * 4 * ROUNDS
    assert (progress == progress[0]).all()


def test_nothing_is_asked_when_turned_off_or_when_the_work_sets_the_end() -> None:
    inputs = window([[1.0, 1.0]] * 3, [30000.0] * 3, (2, 2))
    assert longest_first(inputs, jobs=0, share=0.1) is None
    assert longest_first(inputs, jobs=3, share=0.0) is None
    # 40 equal jobs on 2 GPUs: all work over all GPUs ends far past any one job
    crowded = window([[1.0, 1.0]] * 40, [600.0] * 39 + [1200.0], (1, 1))
    assert longest_first(crowded, jobs=3, share=1.0) is None


def test_the_market_gives_the_progress_on_the_fastest_type() -> None:
    # job 0 runs 1.3x faster on type 0, two shorter jobs 8x: by welfare alone they share type 0's GPU with it and job
    # 0 spends most rounds on type 1; asked for every round's progress, it gets the whole window on type 0
    inputs = window([[2.0, 1.5], [4.0, 0.5], [4.0, 0.5]], [60000.0, 6000.0, 6000.0], (1, 2))
    fairness = Fairness(np.full(3, np.inf), np.ones(3))
    alone = solve_market(inputs, CONFIG, fairness)
    assert alone is not None
    assert alone.by_type[0].tolist() == [2, 8]
    progress = longest_first(inputs, jobs=1, share=1.0)
    assert progress is not None
    assert progress.tolist() == [2.0 * ROUNDS, 0.0, 0.0]
    solution = solve_market(inputs, CONFIG, fairness, progress=progress)
    assert solution is not None
    assert solution.by_type[0].tolist() == [ROUNDS, 0]


def test_progress_the_types_cannot_hold_makes_the_market_infeasible() -> None:
    inputs = window([[2.0, 0.5], [2.0, 0.5]], [60000.0, 60000.0], (1, 1))
    fairness = Fairness(np.full(2, np.inf), np.ones(2))
    both = np.full(2, 2.0 * ROUNDS)
    assert solve_market(inputs, CONFIG, fairness, progress=both) is None
    assert solve_market(inputs, CONFIG, fairness) is not None


def test_the_late_floor_holds_the_whole_window_of_the_most_urgent_late_gangs() -> None:
    # three late 8-GPU gangs on 8:8:8: 25% of the window (60 GPU-rounds) holds 7 of one gang's 10 rounds; the budget
    # grows to the two most urgent gangs' whole windows (160), so both get every round and the third none
    inputs = replace(window([[2.0, 1.0, 0.5]] * 3, [60000.0] * 3, (8, 8, 8)), scale_factors=np.full(3, 8))
    view = SimpleNamespace(
        late=lambda rhomax: np.ones(3, dtype=bool), urgency=lambda lam, rhomax: np.array([1.0, 3.0, 2.0])
    )
    policy = ShockwavePolicy(CONFIG)
    assert policy._late_floor(inputs, view).tolist() == [0, ROUNDS, ROUNDS]  # type: ignore[arg-type]
