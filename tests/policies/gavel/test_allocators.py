"""Each Gavel-style allocator (spec §5) on 1-4 job cases whose optimum is worked out by hand.

Where the optimum is unique the allocation is compared at 1e-6; where several x tie, the objective's value and the
constraints are checked instead of one arbitrary x.
"""

from __future__ import annotations

import math
from typing import Any

import cvxpy as cp
import pytest

from shockwave.policies.gavel import min_total_duration
from shockwave.policies.gavel.allox import AlloX
from shockwave.policies.gavel.fifo import Fifo, FifoPerf
from shockwave.policies.gavel.finish_time_fairness import FinishTimeFairness
from shockwave.policies.gavel.gandiva_fair import GandivaFair
from shockwave.policies.gavel.isolated import Isolated, Proportional
from shockwave.policies.gavel.lp import solve
from shockwave.policies.gavel.max_min_fairness import MaxMinFairness, MaxMinFairnessPerf
from shockwave.policies.gavel.max_sum_throughput import MaxSumThroughput
from shockwave.policies.gavel.mechanism import AllocationInputs
from shockwave.policies.gavel.min_total_duration import MinTotalDuration

TOL = 1e-6


def inputs(
    gpus: int,
    gangs: list[int],
    throughputs: list[float] | None = None,
    remaining: list[int] | None = None,
    since: list[float] | None = None,
) -> AllocationInputs:
    ids = list(range(len(gangs)))
    return single_type(
        gpus,
        throughputs=dict(zip(ids, throughputs or [1.0] * len(ids), strict=True)),
        scale_factors=dict(zip(ids, gangs, strict=True)),
        remaining_steps=dict(zip(ids, remaining or [1000] * len(ids), strict=True)),
        times_since_start=dict(zip(ids, since or [0.0] * len(ids), strict=True)),
    )


def single_type(
    gpus: int,
    throughputs: dict[int, float],
    scale_factors: dict[int, int],
    remaining_steps: dict[int, int],
    times_since_start: dict[int, float],
) -> AllocationInputs:
    """Inputs on a cluster of `gpus` V100s."""
    ids = sorted(throughputs)
    rates = {j: {"v100": throughputs[j]} for j in ids}
    return AllocationInputs(
        ids, ("v100",), (gpus,), rates, scale_factors, remaining_steps, times_since_start, dict.fromkeys(ids, 1.0)
    )


def flat(allocator: Any, inputs: AllocationInputs) -> dict[int, float]:
    """The allocation on a cluster of one type, by job."""
    return {j: x["v100"] for j, x in allocator.allocate(inputs).items()}


def assert_feasible(x: dict[int, float], gangs: list[int], gpus: int) -> None:
    assert all(-TOL <= v <= 1 + TOL for v in x.values())
    assert sum(g * x[j] for j, g in enumerate(gangs)) <= gpus + TOL


# -- max-min fairness: maximise min_j sf_j x_j ---------------------------------------------------------------------
def test_max_min_gangs_1_and_2_on_2_gpus() -> None:
    # sf x: x0 = 2 x1 = t, capacity x0 + 2 x1 = 2t <= 2 -> t = 1: x0 = 1, x1 = 0.5 (unique: x0 >= 1, 2 x1 >= 1 and
    # x0 + 2 x1 <= 2 leave one point)
    x = flat(MaxMinFairness(), inputs(2, [1, 2]))
    assert x == {0: pytest.approx(1.0, abs=TOL), 1: pytest.approx(0.5, abs=TOL)}


def test_max_min_three_single_gpu_jobs_on_2_gpus() -> None:
    # x_j = t for all, 3t <= 2: t = 2/3 (unique: each >= 2/3 and the sum <= 2)
    x = flat(MaxMinFairness(), inputs(2, [1, 1, 1]))
    assert x == {j: pytest.approx(2 / 3, abs=TOL) for j in range(3)}


def test_max_min_tie_is_checked_by_its_objective() -> None:
    # gangs 1, 1, 4 on 4 GPUs: min(x0, x1, 4 x2) <= min(x0) <= 1 and t = 1 is reachable (x2 = 1/4: 1 + 1 + 1 <= 4);
    # any x2 in [0.25, 0.5] is optimal, so only the objective value 1 and feasibility are checked
    gangs = [1, 1, 4]
    x = flat(MaxMinFairness(), inputs(4, gangs))
    assert min(g * x[j] for j, g in enumerate(gangs)) == pytest.approx(1.0, abs=TOL)
    assert_feasible(x, gangs, 4)


def test_max_min_ignores_throughputs() -> None:
    # heterogeneity-agnostic: the same answer as with equal throughputs
    x = flat(MaxMinFairness(), inputs(2, [1, 2], throughputs=[100.0, 1.0]))
    assert x == {0: pytest.approx(1.0, abs=TOL), 1: pytest.approx(0.5, abs=TOL)}


# -- max-sum-throughput: maximise sum_j thr_j x_j ------------------------------------------------------------------
def test_max_sum_throughput_is_a_fractional_knapsack() -> None:
    # per GPU: job 0 10/2 = 5, job 1 6/1 = 6, job 2 4/1 = 4. Fill by value per GPU: x1 = 1 (1 GPU), then x0 on the
    # last GPU: x0 = 1/2. Value 6 + 5 = 11 > 6 + 4 (x2 = 1) = 10.
    x = flat(MaxSumThroughput(), inputs(2, [2, 1, 1], throughputs=[10.0, 6.0, 4.0]))
    assert x == {0: pytest.approx(0.5, abs=TOL), 1: pytest.approx(1.0, abs=TOL), 2: pytest.approx(0.0, abs=TOL)}


def test_max_sum_throughput_caps_each_job_at_1() -> None:
    # 3 GPUs, single-GPU jobs of 10, 5, 1 steps/s: the two fastest get x = 1, the third the last GPU (x = 1): 16
    x = flat(MaxSumThroughput(), inputs(3, [1, 1, 1, 1], throughputs=[10.0, 5.0, 1.0, 0.5]))
    assert x == {
        0: pytest.approx(1.0, abs=TOL),
        1: pytest.approx(1.0, abs=TOL),
        2: pytest.approx(1.0, abs=TOL),
        3: pytest.approx(0.0, abs=TOL),
    }


# -- min-total-duration: the smallest horizon by bisection ---------------------------------------------------------
def bisected_horizon(needed_s: float) -> tuple[float, list[bool]]:
    """The spec's search (§5.0) for a horizon T feasible iff T >= needed_s: bisection on [100, 1e6] until
    1.05 low >= high, widening x10 while nothing is feasible. Returns the last feasible T and every verdict."""
    low, high, widest, best = 100.0, 1e6, 1e6, None
    verdicts: list[bool] = []
    while best is None:
        while 1.05 * low < high:
            mid = (low + high) / 2
            verdicts.append(mid >= needed_s)
            if mid >= needed_s:
                best, high = mid, mid
            else:
                low = mid
        low, high, widest = widest, widest * 10, widest * 10
    return best, verdicts


@pytest.fixture
def lp_verdicts(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each feasibility LP min_total_duration solves is feasible, in order."""
    verdicts: list[bool] = []

    def recording(problem: cp.Problem) -> None:
        solve(problem)
        verdicts.append(problem.status == "optimal")

    monkeypatch.setattr(min_total_duration, "solve", recording)
    return verdicts


def test_min_total_duration_two_jobs_on_one_gpu(lp_verdicts: list[bool]) -> None:
    # feasible at T iff x0 >= 1000 / (1 T), x1 >= 1000 / (2 T) and x0 + x1 <= 1, i.e. T >= 1000 + 500 = 1500 s
    horizon, verdicts = bisected_horizon(1500.0)
    assert 1500.0 <= horizon <= 1.05 * 1500.0
    x = flat(MinTotalDuration(), inputs(1, [1, 1], throughputs=[1.0, 2.0], remaining=[1000, 1000]))
    assert lp_verdicts == verdicts  # the same horizons tried, in the same order
    # the returned x is the one feasible at the last feasible horizon (the LP has no objective: any such x)
    assert x[0] >= 1000 / horizon - TOL
    assert x[1] >= 500 / horizon - TOL
    assert_feasible(x, [1, 1], 1)


def test_min_total_duration_widens_beyond_1e6_s(lp_verdicts: list[bool]) -> None:
    # 2.5e6 steps at 1 step/s need T >= 2.5e6 s: nothing in [100, 1e6] is feasible, [1e6, 1e7] is searched next
    # [100, 1e6]: mids 500,050, 750,025, 875,012.5, 937,506.25, 968,753.125 all infeasible (then 1.05 low >= 1e6);
    # [1e6, 1e7]: 5.5e6 yes, 3.25e6 yes, 2.125e6 no, 2.6875e6 yes, 2.40625e6 no, 2.546875e6 yes, 2.4765625e6 no
    # (1.05 x 2.4765625e6 = 2.60e6 >= 2.546875e6): the horizon is 2,546,875 s
    horizon, verdicts = bisected_horizon(2.5e6)
    assert (horizon, verdicts) == (2_546_875.0, [False] * 5 + [True, True, False, True, False, True, False])
    x = flat(MinTotalDuration(), inputs(1, [1], remaining=[2_500_000]))
    assert lp_verdicts == verdicts
    assert 2.5e6 / horizon - TOL <= x[0] <= 1 + TOL


# -- finish-time fairness: minimise max_j rho_j --------------------------------------------------------------------
def test_finish_time_fairness_golden_ratio_case() -> None:
    # 1 GPU, 2 jobs: equal share 1/2, iso x = 0.5, iso rate 0.5 and 1.0; T_iso = 100 / 0.5 = 200, 400 / 1 = 400.
    # job 0 (arrived 100 s ago): 100 + 100 / x0 <= 200 t  ->  x0 = 1 / (2t - 1)
    # job 1: 400 / (2 x1) <= 400 t  ->  x1 = 1 / (2t)
    # x0 + x1 = 1: 4t^2 - 6t + 1 = 0, t = (3 + sqrt 5) / 4; x0 = (sqrt 5 - 1) / 2, x1 = (3 - sqrt 5) / 2
    x = flat(FinishTimeFairness(), inputs(1, [1, 1], throughputs=[1.0, 2.0], remaining=[100, 400], since=[100, 0]))
    root5 = math.sqrt(5)
    assert x == {0: pytest.approx((root5 - 1) / 2, abs=TOL), 1: pytest.approx((3 - root5) / 2, abs=TOL)}


def test_finish_time_fairness_accumulates_isolated_time() -> None:
    ftf = FinishTimeFairness()
    flat(ftf, inputs(1, [1, 1], throughputs=[1.0, 2.0], remaining=[100, 400], since=[100, 0]))
    # 100 s later job 0 did 50 steps: isolated time += 50 / 0.5 (its iso rate at the last call) = 100 s
    x = flat(ftf, inputs(1, [1, 1], throughputs=[1.0, 2.0], remaining=[50, 400], since=[200, 100]))
    assert ftf.state_dict()["isolated_time"] == {0: pytest.approx(100.0), 1: 0.0}
    # T_iso = 100 + 50 / 0.5 = 200 and 0 + 400 / 1 = 400
    # job 0: 200 + 50 / x0 <= 200 t -> x0 = 1 / (4(t - 1)); job 1: 100 + 200 / x1 <= 400 t -> x1 = 2 / (4t - 1)
    # with s = 4t, x0 + x1 = 1: s^2 - 8s + 13 = 0, s = 4 + sqrt 3; x0 = 1 / sqrt 3, x1 = 1 - 1 / sqrt 3
    root3 = math.sqrt(3)
    assert x == {0: pytest.approx(1 / root3, abs=TOL), 1: pytest.approx(1 - 1 / root3, abs=TOL)}


def test_finish_time_fairness_gangs_get_their_isolated_share() -> None:
    # 4 GPUs, gangs 1 and 4, nothing run yet: equal share 2 GPUs, iso x = min(1, 2/1) = 1 and 2/4 = 0.5;
    # rho_j = (R_j / (thr_j x_j)) / (R_j / (thr_j iso_j)) = iso_j / x_j: t = max(1/x0, 0.5/x1)
    # with x0 + 4 x1 <= 4 and x0 <= 1: x0 = 1 (t >= 1), then 0.5/x1 <= 1 at x1 in [0.5, 0.75]: t = 1 (a tie in x1)
    gangs = [1, 4]
    x = flat(FinishTimeFairness(), inputs(4, gangs, throughputs=[3.0, 7.0], remaining=[600, 700]))
    assert x[0] == pytest.approx(1.0, abs=TOL)
    assert max(1 / x[0], 0.5 / x[1]) == pytest.approx(1.0, abs=TOL)
    assert_feasible(x, gangs, 4)


# -- AlloX ---------------------------------------------------------------------------------------------------------
def test_allox_gives_the_oldest_jobs_the_free_gpus() -> None:
    # alpha 0.2 of 3 jobs = 0 < 2 free GPUs: the 2 longest waiting (job 0: 300 s, job 2: 200 s) each head a queue
    x = flat(AlloX(), inputs(2, [1, 1, 1], since=[300.0, 100.0, 200.0]))
    assert x == {0: 1.0, 1: 0.0, 2: 1.0}


def test_allox_runs_the_shortest_job_first_on_one_gpu() -> None:
    # alpha 1: all 3 jobs queue on the one GPU; processing times 600/2 = 300, 100/1 = 100, 400/2 = 200.
    # cost (k + 1) p_j + wait_j is smallest with the longest job last (k = 0) and the shortest first (k = 2): job 1
    x = flat(AlloX(alpha=1.0), inputs(1, [1, 1, 1], throughputs=[2.0, 1.0, 2.0], remaining=[600, 100, 400]))
    assert x == {0: 0.0, 1: 1.0, 2: 0.0}


def test_allox_keeps_a_full_allocation_across_recomputes() -> None:
    allox = AlloX(alpha=1.0)
    flat(allox, inputs(1, [1, 1], throughputs=[1.0, 1.0], remaining=[500, 100]))  # job 1 (shorter) runs
    # job 1 now the longer one, and job 2 shorter still: job 1 holds the only GPU, no slot is left to match
    x = flat(allox, inputs(1, [1, 1, 1], throughputs=[1.0, 1.0, 1.0], remaining=[500, 900, 10]))
    assert x == {0: 0.0, 1: 1.0, 2: 0.0}


def test_allox_head_with_a_gang_gets_one_over_its_size() -> None:
    x = flat(AlloX(alpha=1.0), inputs(2, [2]))
    assert x == {0: 0.5}


# -- Gandiva-Fair --------------------------------------------------------------------------------------------------
def test_gandiva_fair_equal_time_fractions_whatever_the_gang() -> None:
    # share = G/m: 2/3 for 3 jobs on 2 GPUs; capped at 1 for 2 jobs on 4 GPUs
    assert flat(GandivaFair(), inputs(2, [1, 2, 4])) == {j: pytest.approx(2 / 3) for j in range(3)}
    assert flat(GandivaFair(), inputs(4, [1, 4])) == {0: 1.0, 1: 1.0}


# -- FIFO ----------------------------------------------------------------------------------------------------------
def test_fifo_head_of_line_blocking_and_persistence() -> None:
    fifo = Fifo()
    # 4 GPUs: job 0 (2) runs, job 1 (4) does not fit and blocks job 2 (1), which would
    assert flat(fifo, inputs(4, [2, 4, 1])) == {0: 1.0, 1: 0.0, 2: 0.0}
    # job 0 left: job 1 takes all 4 GPUs
    after = single_type(
        4, throughputs={1: 1.0, 2: 1.0}, scale_factors={1: 4, 2: 1}, remaining_steps={1: 9, 2: 9},
        times_since_start={1: 0.0, 2: 0.0},
    )  # fmt: skip
    assert flat(fifo, after) == {1: 1.0, 2: 0.0}
    # a later call keeps job 1 (a running job is never preempted) and job 2 still waits
    assert flat(fifo, after) == {1: 1.0, 2: 0.0}
    assert fifo.state_dict()["running"] == {1: "v100"}


def test_fifo_fills_in_arrival_order_while_gangs_fit() -> None:
    # 4 GPUs: 1 + 2 + 1 = 4, the fourth job waits
    assert flat(Fifo(), inputs(4, [1, 2, 1, 1])) == {0: 1.0, 1: 1.0, 2: 1.0, 3: 0.0}


# -- several GPU types (spec §3.2-3.4) -----------------------------------------------------------------------------
def two_types(gangs: list[int], rates: list[tuple[float, float]], gpus: tuple[int, int] = (1, 1)) -> AllocationInputs:
    """Types "fast" and "slow" (alphabetical columns: fast, slow), job j at rates[j] = (fast, slow) steps/s."""
    ids = list(range(len(gangs)))
    return AllocationInputs(
        ids,
        ("fast", "slow"),
        gpus,
        {j: {"fast": rates[j][0], "slow": rates[j][1]} for j in ids},
        dict(zip(ids, gangs, strict=True)),
        dict.fromkeys(ids, 1000),
        dict.fromkeys(ids, 0.0),
        dict.fromkeys(ids, 1.0),
    )


def test_max_min_perf_gives_each_job_the_type_it_gains_most_on() -> None:
    # 1 fast + 1 slow GPU. prop_j = (thr_fast + thr_slow) / 2: job 0 (4, 1) 2.5, job 1 (2, 1) 1.5.
    # Both GPUs busy all the time, each job all the time: job 0 on fast a, slow 1 - a; job 1 the other way round.
    # Normalised: job 0 (4a + 1 - a) / 2.5, job 1 (2(1 - a) + a) / 1.5; equal at 1.5(3a + 1) = 2.5(2 - a), a = 1/2:
    # both 1.0, and no other split lifts the lower one (the LP's optimum). Job 0, which gains more on fast, gets
    # the larger fast share relative to its equal share.
    x = MaxMinFairnessPerf().allocate(two_types([1, 1], [(4.0, 1.0), (2.0, 1.0)]))
    level = [(4 * x[0]["fast"] + x[0]["slow"]) / 2.5, (2 * x[1]["fast"] + x[1]["slow"]) / 1.5]
    assert min(level) == pytest.approx(1.0, abs=1e-5)
    agnostic = MaxMinFairness().allocate(two_types([1, 1], [(4.0, 1.0), (2.0, 1.0)]))
    assert [sum(x.values()) for x in agnostic.values()] == [pytest.approx(1.0, abs=TOL)] * 2


def test_max_sum_throughput_perf_puts_the_biggest_speed_up_on_the_fast_type() -> None:
    # 1 fast + 1 slow GPU: job 0 (10, 1), job 1 (3, 2). Both on fast share it; best sum: job 0 fast, job 1 slow = 12
    x = MaxSumThroughput().allocate(two_types([1, 1], [(10.0, 1.0), (3.0, 2.0)]))
    assert x[0]["fast"] == pytest.approx(1.0, abs=TOL) and x[1]["slow"] == pytest.approx(1.0, abs=TOL)


def test_fifo_perf_puts_each_job_on_its_fastest_type_with_room() -> None:
    # 1 fast + 1 slow GPU, in arrival order: job 0 fastest on fast; job 1 also, but fast is full: slow; job 2 waits
    x = FifoPerf().allocate(two_types([1, 1, 1], [(4.0, 1.0), (4.0, 1.0), (1.0, 9.0)]))
    assert {j: [t for t, v in a.items() if v == 1.0] for j, a in x.items()} == {0: ["fast"], 1: ["slow"], 2: []}


def test_fifo_perf_skips_a_job_no_free_type_can_run() -> None:
    # job 0 runs only on slow (fast rate 0) but slow is taken by nothing: slow; job 1 then takes fast
    x = FifoPerf().allocate(two_types([1, 1], [(0.0, 1.0), (2.0, 1.0)]))
    assert x[0]["slow"] == 1.0 and x[1]["fast"] == 1.0


def test_fifo_draws_a_type_among_those_with_room_and_keeps_it() -> None:
    fifo = Fifo(seed=3)
    first = fifo.allocate(two_types([1, 1, 1], [(1.0, 1.0)] * 3))
    assert sorted(t for a in first.values() for t, v in a.items() if v == 1.0) == ["fast", "slow"]
    assert first[2] == {"fast": 0.0, "slow": 0.0}
    assert fifo.allocate(two_types([1, 1, 1], [(1.0, 1.0)] * 3)) == first


def test_isolated_and_proportional_shares() -> None:
    # 2 jobs (gangs 1, 2) on 2 fast + 2 slow: proportional x_jt = G_t / G = 1/2; isolated (G_t / m) / sf, capped
    inputs = two_types([1, 2], [(1.0, 1.0)] * 2, gpus=(2, 2))
    assert Proportional().allocate(inputs) == {j: {"fast": 0.5, "slow": 0.5} for j in range(2)}
    assert Isolated().allocate(inputs) == {0: {"fast": 0.5, "slow": 0.5}, 1: {"fast": 0.5, "slow": 0.5}}
    three = two_types([1, 1, 2], [(1.0, 1.0)] * 3, gpus=(3, 3))
    assert Isolated().allocate(three)[2] == {"fast": pytest.approx(0.5), "slow": pytest.approx(0.5)}
    assert Isolated().allocate(three)[0] == {"fast": pytest.approx(0.5), "slow": pytest.approx(0.5)}
