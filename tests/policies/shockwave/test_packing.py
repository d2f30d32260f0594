"""Shockwave's round layout (packing.py: `pack`, `arrange`, `fill`) on hand-worked cases.

`pack` lays each job's granted round count out over the window; a job's weight is urgency - ln(rounds granted),
jobs of equal weight go by index. Each round takes the jobs that need every remaining round, then (while gangs fit)
late jobs, then jobs that ran the round before, then the rest by weight.
"""

from __future__ import annotations

import math

import numpy as np

from shockwave.policies.shockwave.packing import arrange, fill, pack

NONE_LATE = np.zeros(3, dtype=bool)


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=int)


def floats(*values: float) -> np.ndarray:
    return np.array(values, dtype=float)


# -- pack ----------------------------------------------------------------------------------------------------------
def test_a_job_needing_every_round_comes_first_then_by_weight() -> None:
    # weights 0 - ln 2, 0, 0: order 1, 2, 0. Round 0: job 0 needs both rounds (2 GPUs, 1 left), then job 1 fits, job 2
    # does not. Round 1: jobs 2 and 0 each need their last round.
    layout = pack(ints(2, 1, 1), ints(1, 1, 1), 2, 2, floats(0, 0, 0), NONE_LATE, set())
    assert layout == [[0, 1], [2, 0]]


def test_a_job_that_ran_before_is_extended() -> None:
    # as above, but job 2 ran in the round before: it takes round 0's free GPU ahead of job 1 (no restart cost)
    layout = pack(ints(2, 1, 1), ints(1, 1, 1), 2, 2, floats(0, 0, 0), NONE_LATE, {2})
    assert layout == [[0, 2], [1, 0]]


def test_a_late_job_goes_before_one_that_ran() -> None:
    late = np.array([False, True, False])
    layout = pack(ints(2, 1, 1), ints(1, 1, 1), 2, 2, floats(0, 0, 0), late, {2})
    assert layout == [[0, 1], [2, 0]]


def test_weight_is_urgency_over_rounds_granted() -> None:
    # one GPU, 3 rounds; job 0 gets 2 rounds, job 1 one. Weight of job 0: u0 - ln 2 (ln 2 = 0.693), job 1: 0.
    # u0 = 0.5: -0.193 < 0, job 1 first; then job 0 needs both remaining rounds.
    assert pack(ints(2, 1), ints(1, 1), 1, 3, floats(0.5, 0), NONE_LATE[:2], set()) == [[1], [0], [0]]
    # u0 = 1.0: 0.307 > 0, job 0 first; in round 1 it is extended (it ran in round 0); job 1 needs the last round
    assert pack(ints(2, 1), ints(1, 1), 1, 3, floats(1.0, 0), NONE_LATE[:2], set()) == [[0], [0], [1]]


def test_jobs_with_no_rounds_are_left_out() -> None:
    assert pack(ints(0, 1, 0), ints(1, 1, 1), 4, 2, floats(5, 0, 5), NONE_LATE, {0}) == [[1], []]


def test_the_least_loaded_layout_when_the_greedy_one_runs_out_of_room() -> None:
    # 3 GPUs, 2 rounds; gangs 2, 2, 1, 1, one round each; weights = urgency 0, 0.5, 1, 2: order 3, 2, 1, 0.
    # Greedy: round 0 takes jobs 3 and 2 (1 GPU left, neither gang of 2 fits), round 1 must hold both 2-GPU jobs:
    # 4 > 3, no layout. Least loaded, largest gangs first (weight order among equals): job 1 -> round 0, job 0 ->
    # round 1, job 3 -> round 0 (loads tie at 2: the first round), job 2 -> round 1: [[1, 3], [0, 2]].
    # Rounds by sum of exp(weight - 2): round [1, 3]: e^-1.5 + 1 = 1.22 > round [0, 2]: e^-2 + e^-1 = 0.50.
    layout = pack(ints(1, 1, 1, 1), ints(2, 2, 1, 1), 3, 2, floats(0, 0.5, 1, 2), np.zeros(4, dtype=bool), set())
    assert layout == [[1, 3], [0, 2]]


def test_the_least_loaded_layout_breaks_load_ties_by_the_earlier_round() -> None:
    # as above with urgency 0, 0, 1, 1: order 2, 3, 0, 1; greedy fails the same way. Least loaded: job 0 -> round 0,
    # job 1 -> round 1, job 2 -> round 0 (loads 2 and 2: the earlier round), job 3 -> round 1: [[0, 2], [1, 3]].
    # Both rounds weigh e^-1 + 1, so arranging keeps them in that order.
    layout = pack(ints(1, 1, 1, 1), ints(2, 2, 1, 1), 3, 2, floats(0, 0, 1, 1), np.zeros(4, dtype=bool), set())
    assert layout == [[0, 2], [1, 3]]


def test_a_count_beyond_the_window_gets_every_round() -> None:
    # job 0 asks 3 of 2 rounds: no round-by-round layout; least loaded (weights -ln 3, 0: job 1 first) puts job 1 in
    # round 0 and job 0 in both. Rounds weigh 1/3 + 1 (round 0) and 1/3 (round 1).
    assert pack(ints(3, 1), ints(1, 1), 2, 2, floats(0, 0), NONE_LATE[:2], set()) == [[1, 0], [0]]


def test_no_layout_when_the_gangs_cannot_fit() -> None:
    # one round of 3 GPUs for gangs 2, 2 and 1: 5 > 3 whichever way
    assert pack(ints(1, 1, 1), ints(2, 2, 1), 3, 1, floats(0, 0, 0), NONE_LATE, set()) is None
    # two rounds of 2 GPUs hold 4 GPU-rounds, the counts ask for 2 x 2 + 1 = 5
    assert pack(ints(2, 1, 0), ints(2, 1, 1), 2, 2, floats(0, 0, 0), NONE_LATE, set()) is None


# -- arrange -------------------------------------------------------------------------------------------------------
def test_arrange_puts_the_round_of_the_most_urgent_job_first() -> None:
    assert arrange([[0], [1]], ints(1, 1), floats(0, 1)) == [[1], [0]]
    assert arrange([[0], [1]], ints(1, 1), floats(1, 0)) == [[0], [1]]


def test_arrange_weighs_a_round_by_urgency_over_rounds_granted() -> None:
    # job 0 in 2 rounds: weight u0 - ln 2. u0 = 0.5 -> -0.193 < 0 (job 1): job 1's round first; u0 = 1 -> 0.307 > 0
    assert arrange([[0], [0], [1]], ints(2, 1), floats(0.5, 0)) == [[1], [0], [0]]
    assert arrange([[0], [0], [1]], ints(2, 1), floats(1.0, 0)) == [[0], [0], [1]]


def test_arrange_sums_exp_weight_over_a_rounds_jobs() -> None:
    # e^1 = 2.718 for job 0 alone, e^0.6 + e^0.6 = 3.644 for jobs 1 and 2 together: the pair's round first
    assert math.exp(1.0) < 2 * math.exp(0.6)
    assert arrange([[0], [1, 2]], ints(1, 1, 1), floats(1.0, 0.6, 0.6)) == [[1, 2], [0]]
    # ... but not with 0.3 each: 2 e^0.3 = 2.70 < 2.718
    assert arrange([[1, 2], [0]], ints(1, 1, 1), floats(1.0, 0.3, 0.3)) == [[0], [1, 2]]


# -- fill ----------------------------------------------------------------------------------------------------------
def test_fill_gives_idle_gpus_to_the_longest_remaining_jobs_that_fit() -> None:
    # longest first: 3 (40 s), 1 (30 s), 2 (20 s), 0 (10 s). 3 GPUs.
    # round [0]: 2 free; job 3 (2 GPUs) fits: [0, 3]. round []: job 3 (1 left), job 1 (0 left): [3, 1].
    # round [2, 3]: 0 free: unchanged.
    filled = fill([[0], [], [2, 3]], ints(1, 1, 1, 2), 3, floats(10, 30, 20, 40))
    assert filled == [[0, 3], [3, 1], [2, 3]]


def test_fill_skips_a_gang_that_does_not_fit_and_keeps_going() -> None:
    # round [0] leaves 1 GPU: job 3 (2 GPUs) is skipped, job 1 (1 GPU) takes it
    assert fill([[0]], ints(1, 1, 1, 2), 2, floats(10, 30, 20, 40)) == [[0, 1]]


def test_fill_breaks_ties_in_remaining_time_by_index() -> None:
    assert fill([[]], ints(1, 1, 1), 2, floats(5, 5, 5)) == [[0, 1]]
