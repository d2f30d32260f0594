"""The least worst rho of any schedule: what a job may train with, the GPU-time it needs to finish within a span, and
the bound itself, hand-checked on single-configuration jobs and never above what a policy gets on the toy profile."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from shockwave.api import simulate
from shockwave.core.cluster import ClusterSpec
from shockwave.workload_model.goodput import Training, goodput_of
from shockwave.workload_model.sia.fairness_bound import (
    LAMBDAS,
    JobWindow,
    distinct_placements,
    fits,
    gpu_time_factor,
    least_worst_rho,
    most_gpu_time_factor,
    orders,
    partitions,
    price_grid,
    windows,
)
from shockwave.workload_model.sia.goodput import SiaGoodput
from shockwave.workload_model.sia.rigid import read_sia_workload
from sia_files import ONE_GPU

CLUSTER = "a:8:4"
TIMED = [ONE_GPU, (1, 2, 16.0, 0.12, 0.02), (1, 4, 32.0, 0.23, 0.03), (2, 4, 16.0, 0.2, 0.05)]
"""Steps timed on several shapes (nodes, GPUs, per-GPU batch, seconds, of which synchronisation)."""


def one_configuration(arrival: float, basis: float, gpus: int, seconds: float) -> JobWindow:
    """A job that runs only on `gpus` GPUs and takes `seconds` there: it needs gpus x seconds within any span of at
    least `seconds`."""
    return JobWindow(arrival, basis, ((gpus + LAMBDAS) * seconds)[None, :], (gpus,))


def test_placements_cover_every_order_and_shape() -> None:
    assert list(partitions(5, 4, 2)) == [(4, 1), (3, 2)]
    assert list(partitions(5, 2, 2)) == []
    assert list(orders((2, 1, 1))) == [(1, 1, 2), (1, 2, 1), (2, 1, 1)]
    assert len(list(orders((4,) * 16))) == 1  # repeats are not permuted


def test_every_profiled_placement_and_every_unprofiled_shape(toy_goodput: SiaGoodput) -> None:
    profile = toy_goodput.applications["toy"].types["a"]
    found = distinct_placements(profile, 8, 4, 2)
    # Profiled: (1,), (2,), (4,), (4, 4). Not profiled: (3,) on one server, and two servers for 2-8 GPUs but 8 (only
    # (4, 4), which is).
    assert {p for p in found if p in profile.placements} == {(1,), (2,), (4,), (4, 4)}
    assert sorted((len(p), sum(p)) for p in found if p not in profile.placements) == [
        (1, 3),
        *((2, gpus) for gpus in range(2, 8)),
    ]


def test_a_job_may_train_with_its_first_batch_and_whatever_its_search_picks(toy_goodput: SiaGoodput) -> None:
    profile = toy_goodput.applications["toy"].types["a"]
    learned = [(Training(1, 32, 0, epoch), measured) for epoch in (0, 1, 2) for measured in ([ONE_GPU], TIMED)]
    for placement in distinct_placements(profile, 4, 4, 2):
        choices = {(c.local, c.accumulation) for c in toy_goodput.choices("toy", "a", placement)}
        for before, measured in [(None, []), *learned]:
            ran = toy_goodput.advance(
                "toy", "a", placement, 0.0, 0.01, training=before, measured=measured, restarted=True
            )
            assert ran.training is not None, placement
            assert (ran.training.local, ran.training.accumulation) in choices, placement
    assert toy_goodput.choices("toy", "a", (4, 4, 4, 4)) == ()  # nothing measured that large


def test_the_gpu_time_to_finish_within_a_span_never_exceeds_a_real_run(toy_goodput: SiaGoodput) -> None:
    (job,) = windows(toy_goodput, ["toy"], [0.0], [1.0], ClusterSpec.parse(CLUSTER))
    for placement in ((1,), (2,), (4,), (2, 2)):  # its largest gang is 4 (batch 64 at 16 a GPU)
        ran = toy_goodput.advance("toy", "a", placement, 0.0, 1e6, training=None, measured=(), restarted=True)
        assert ran.done == pytest.approx(30.0)
        assert job.least_gpu_seconds(ran.trained_s) <= sum(placement) * ran.trained_s + 1e-9
    spans = [0.5, 1, 2, 4, 8, 100]
    needs = [job.least_gpu_seconds(span) for span in spans]
    assert needs == sorted(needs, reverse=True)  # more time never costs more GPU-time
    assert job.least_gpu_seconds(0.0) == float("inf")


def test_two_jobs_that_each_need_the_whole_cluster_finish_one_after_the_other() -> None:
    # 2 GPUs; each job needs both for 100 s; both arrive at 0 with rho's basis 100 s: one ends at 100 s, the other
    # at 200 s at best, so the worst rho is 2.
    jobs = [one_configuration(0.0, 100.0, 2, 100.0), one_configuration(0.0, 100.0, 2, 100.0)]
    assert not fits(jobs, np.array([100.0, 199.0]), [2])
    assert fits(jobs, np.array([100.0, 200.0]), [2])
    assert 1.99 < least_worst_rho(jobs, [2]) <= 2.0
    # With four GPUs both end at 100 s; a job that cannot finish by `by` makes every rho unreachable.
    assert least_worst_rho(jobs, [4]) <= 1.0
    assert least_worst_rho(jobs, [2], by=150.0) == 64.0


def test_how_much_more_gpu_time_than_the_least_a_schedule_can_spend() -> None:
    # Two jobs of 2 GPUs x 100 s that may use 4, both due at 100 s: on 8 GPUs each may need twice its least
    # GPU-time (400 GPU-seconds, 4 GPUs for 100 s); on 2 GPUs they do not fit even at their least.
    jobs = [JobWindow(0.0, 100.0, ((2 + LAMBDAS) * 100.0)[None, :], (4,)) for _ in range(2)]
    assert 1.99 < most_gpu_time_factor(jobs, [8], 1.0) < 2.01
    assert most_gpu_time_factor(jobs, [2], 1.0) == 0.0
    # A run that took 100 s each and spent 600 GPU-seconds spent 1.5x the least (2 x 200).
    assert gpu_time_factor(jobs, [100.0, 100.0], 600.0) == pytest.approx(1.5)


def test_a_job_never_gets_more_than_its_largest_gang_at_a_time() -> None:
    # 100 GPU-seconds whatever the span, basis 200 s, 4 GPUs: on at most 1 GPU it ends at 100 s at the earliest
    # (rho 0.5), on 4 at 25 s.
    job = JobWindow(0.0, 200.0, np.full((1, len(LAMBDAS)), 100.0), (1,))
    assert 0.49 < least_worst_rho([job], [4]) <= 0.5
    assert least_worst_rho([replace(job, gangs=(4,))], [4]) <= 0.125


def test_a_long_horizon_on_many_gpus_keeps_a_small_demand() -> None:
    # 1,024 GPUs for 3e6 s is past 2^31 GPU-seconds; 10 GPU-seconds still fit and count.
    job = JobWindow(0.0, 1e6, ((1 + LAMBDAS) * 10.0)[None, :], (1,))
    assert fits([job], np.array([3e6]), [1024])
    assert not fits([job], np.array([9.0]), [1024])
    assert least_worst_rho([job], [1024]) <= 1e-5


def test_rho_counts_every_job_of_the_trace_over_the_gpus(toy_goodput: SiaGoodput) -> None:
    # Three jobs on two GPUs: each basis is its time alone x 3/2; with more GPUs than jobs, its time alone.
    found = windows(toy_goodput, ["toy"] * 3, [0.0, 1.0, 2.0], [10.0, 20.0, 30.0], ClusterSpec.parse("a:2:2"))
    assert [w.basis_s for w in found] == [15.0, 30.0, 45.0]
    found = windows(toy_goodput, ["toy"] * 3, [0.0, 1.0, 2.0], [10.0, 20.0, 30.0], ClusterSpec.parse(CLUSTER))
    assert [w.basis_s for w in found] == [10.0, 20.0, 30.0]


def test_the_price_grid_prices_gpu_time_first_and_each_type_alone() -> None:
    assert price_grid(1).tolist() == [[1.0]]
    grid = price_grid(2)
    assert grid[0].tolist() == [1.0, 1.0]
    assert {(1.0, 0.0), (0.0, 1.0), (1.0, 0.5), (0.25, 1.0)} <= {tuple(row) for row in grid.tolist()}
    assert len({tuple(row) for row in grid.tolist()}) == len(grid) and grid.max(axis=1).tolist() == [1.0] * len(grid)


def on_types(arrival: float, basis: float, configurations: list[tuple[int, int, float]]) -> JobWindow:
    """A one-epoch job that runs in any of `configurations` (type, GPUs, seconds) on two types: its dual at each
    price is its cheapest configuration's (price x GPUs + lambda) x seconds."""
    prices = price_grid(2)
    dual = np.array([[min((w[t] * g + lam) * s for t, g, s in configurations) for lam in LAMBDAS] for w in prices])
    gangs = tuple(max((g for t, g, _ in configurations if t == kind), default=0) for kind in (0, 1))
    return JobWindow(arrival, basis, dual, gangs)


def test_two_types_each_hold_one_job_but_one_type_holds_two_only_one_after_the_other() -> None:
    # Two GPUs of each type. One job runs only on type 0 (2 GPUs, 100 s); the other on either (2 GPUs, 100 s on
    # type 0, 50 s on type 1): side by side both end by 100 s. If the other also runs only on type 0, one waits.
    only_first = on_types(0.0, 100.0, [(0, 2, 100.0)])
    either = on_types(0.0, 100.0, [(0, 2, 100.0), (1, 2, 50.0)])
    assert fits([only_first, either], np.array([100.0, 100.0]), [2, 2])
    assert least_worst_rho([only_first, either], [2, 2]) <= 1.0
    assert not fits([only_first, only_first], np.array([100.0, 199.0]), [2, 2])
    assert 1.99 < least_worst_rho([only_first, only_first], [2, 2]) <= 2.0
    # Type 1 alone cannot hold the first job: a cluster of type-1 GPUs only fits nothing.
    assert not fits([only_first], np.array([1e6]), [0, 4])


def test_gpu_time_on_the_faster_type_is_priced_so_the_slow_type_cannot_stand_in() -> None:
    # One job, due at 60 s: 2 GPUs of type 1 for 50 s, or 4 of type 0 for 50 s (it has only 2 of type 0 at a time,
    # so it needs type 1). The total GPU-time (100 GPU-seconds of type 1 or 200 of type 0) fits in 2 + 2 GPUs over
    # 60 s (240), but not without type 1's GPUs, which a bound on GPU-time alone would miss.
    job = on_types(0.0, 60.0, [(0, 4, 50.0), (1, 2, 50.0)])
    assert fits([job], np.array([60.0]), [4, 2])
    assert not fits([replace(job, gangs=(2, 2))], np.array([60.0]), [4, 0])


@pytest.mark.parametrize("cluster", [CLUSTER, "a:8:4,b:8:8"])
def test_no_policy_beats_the_bound_on_one_type_or_two(sia_workload: Path, sia_profiles: Path, cluster: str) -> None:
    spec = ClusterSpec.parse(cluster)
    jobs, profiles, tm = read_sia_workload(sia_workload, sia_profiles, spec, elastic=True)
    found = windows(
        goodput_of(tm), [j.model for j in jobs], [j.arrival for j in jobs], [p.t_isolated for p in profiles], spec
    )
    bound = least_worst_rho(found, [pool.gpus for pool in spec.pools])
    assert bound > 0
    for policy in ("sia", "shockwave"):
        result = simulate(sia_workload, policy, cluster, trace_format="sia", profiles=sia_profiles, round_seconds=60)
        assert result.worst_ftf >= bound
