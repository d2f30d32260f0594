"""Shockwave's runtime forecast and finish-time-fairness targets against hand-computed examples (spec §4.2-4.4)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shockwave.policies.shockwave.fairness import (
    PRIORITY_CAP,
    FairnessView,
    FinishTimeTargets,
    equal_share,
    fair_finish_estimate,
)
from shockwave.policies.shockwave.predictor import JobForecast
from shockwave.workload_model.profile import JobProfile

DATASET = 1600  # samples per epoch: 100 steps at batch size 16, 25 at 64


def accordion_like() -> JobForecast:
    """10 epochs: 3 at batch size 16 (20 s each), then 7 at 64 (8 s each)."""
    profile = JobProfile(epochs=10, runs=((16, 3, 20.0), (64, 7, 8.0)))
    return JobForecast(profile, DATASET, submit_s=0.0)


def test_static_job_forecast_is_its_remaining_epochs() -> None:
    job = JobForecast(JobProfile(epochs=4, runs=((32, 4, 10.0),)), 3200, 0.0)
    job.observe(1, 32, {"v100": 10.0})
    # Half of epoch 1 left (5 s), then the posterior puts 4 - 2 = 2 more epochs at batch size 32: 20 s.
    assert job.remaining_runtime(1.5) == pytest.approx(25.0)
    assert job.elapsed(1.5) == pytest.approx(15.0)


def test_dirichlet_posterior_splits_remaining_epochs_between_modes() -> None:
    job = accordion_like()
    job.observe(0, 16, {"v100": 5.0})
    # Prior 10/2 = 5 per mode; epoch 0 seen at 16: posterior (6, 5); shares 10*(6,5)/11 = (60/11, 50/11);
    # minus the observed epoch: (49/11, 50/11) epochs after the current one, at 20 s and 8 s.
    after = (49 / 11) * 20 + (50 / 11) * 8
    assert job.after_current(0.0) == pytest.approx(after)
    assert job.remaining_runtime(0.0) == pytest.approx(20 + after)


def test_calibration_rescales_unmeasured_modes_beyond_tolerance() -> None:
    job = accordion_like()
    job.record(steps=100, seconds=40.0, batch_size=16)  # one epoch at 16 took 40 s, not 20: 100% off
    job.observe(1, 16, {"v100": 2.5})
    assert job.calibration() == pytest.approx(2.0)
    assert job.epoch_duration(16, 2.0) == pytest.approx(40.0)  # measured
    assert job.epoch_duration(64, 2.0) == pytest.approx(16.0)  # profiled x calibration
    # Observed (16, 16): posterior (7, 5); shares (70/12, 50/12) minus (2, 0) = (23/6, 25/6) epochs, 9 remain.
    assert job.remaining_runtime(1.0) == pytest.approx(40 + (23 / 6) * 40 + (25 / 6) * 16)


def test_calibration_within_tolerance_keeps_the_profile() -> None:
    job = accordion_like()
    job.record(steps=100, seconds=25.0, batch_size=16)  # 25% off: within the 40% tolerance
    assert job.calibration() == 1.0
    assert job.epoch_duration(16, 1.0) == pytest.approx(25.0)
    assert job.epoch_duration(64, 1.0) == pytest.approx(8.0)


def test_forecast_shrinks_when_observations_outnumber_a_modes_share() -> None:
    profile = JobProfile(epochs=5, runs=((16, 1, 20.0), (64, 4, 8.0)))
    job = JobForecast(profile, DATASET, 0.0)
    job.observe(3, 16, {"v100": 5.0})  # the job stayed at 16 for four epochs
    # Posterior (6.5, 2.5); shares 5*(6.5, 2.5)/9 = (65/18, 25/18); only 3 of the 4 epochs at 16 fit: (11/18, 25/18).
    # Inflated count 5 - 3 + 1 = 3 > 2 remaining: scale by 2/3.
    after = 2 / 3 * ((11 / 18) * 20 + (25 / 18) * 8)
    assert job.after_current(3.0) == pytest.approx(after)
    assert job.remaining_runtime(3.0) == pytest.approx(20 + after)


def test_a_batch_size_the_profile_never_planned_uses_the_schedulers_throughput() -> None:
    job = accordion_like()
    job.observe(0, 32, {"v100": 2.0})  # 1600 / 32 = 50 steps at 2 steps/s
    assert job.epoch_duration(32, 1.0) == pytest.approx(25.0)
    assert job.remaining_runtime(0.5) == pytest.approx(12.5 + job.after_current(0.5))


def test_finished_job_has_nothing_left() -> None:
    job = accordion_like()
    job.observe(9, 64, {"v100": 5.0})
    assert job.remaining_runtime(10.0) == 0.0
    assert job.after_current(10.0) == 0.0


def test_targets_are_time_weighted_then_blended_with_the_latest() -> None:
    targets = FinishTimeTargets()
    targets.reestimate(0, {1: 100.0})
    targets.reestimate(4, {1: 200.0})
    # 100 was current for 4 rounds, 200 for 6: average 160; 0.9 * 160 + 0.1 * 200.
    assert targets.target(1, 10) == pytest.approx(164.0)
    targets.reestimate(4, {1: 300.0})  # a second estimate in the same round replaces the first
    assert targets.target(1, 4) == pytest.approx(0.9 * 100 + 0.1 * 300)
    targets.reestimate(5, {2: 50.0})
    assert targets.target(2, 5) == 50.0  # no round has passed: the estimate itself
    targets.forget(1)
    assert 1 not in targets.series


def test_equal_share_and_fair_finish_estimate() -> None:
    assert equal_share(32, 64) == 0.5
    assert equal_share(32, 10) == 1.0
    assert fair_finish_estimate(submit_s=100, elapsed_s=50, remaining_s=150, share=0.5) == 500


def test_projected_ratio_priorities_and_deadlines() -> None:
    view = FairnessView(
        now_s=1000.0,
        share=0.5,
        round_s=120.0,
        submit_s=np.array([0.0, 0.0, 900.0, 0.0]),
        targets_s=np.array([2000.0, 1000.0, 1100.0, 1000.0]),
        remaining_s=np.array([400.0, 600.0, 50.0, 600.0]),
        after_current_s=np.array([300.0, 200.0, 50.0, 100.0]),
    )
    # (now + R/s - submit) / (target - submit): 1800/2000, 2200/1000, 200/200, 2200/1000.
    assert view.projected_ratio() == pytest.approx([0.9, 2.2, 1.0, 2.2])
    # On track (<= rhomax) -> 1; behind -> rho^lambda; behind with under a round after its epoch -> rho^100, capped.
    assert view.priorities(lam=2.0, rhomax=1.0) == pytest.approx([1.0, 2.2**2, 1.0, PRIORITY_CAP])
    assert view.urgency(lam=2.0, rhomax=1.0)[3] == pytest.approx(100 * np.log(2.2))
    # Late: the deadline (= target at rhomax 1) falls before now + R even running alone.
    assert view.late(rhomax=1.0).tolist() == [False, True, False, True]
    assert view.leftover_bound(rhomax=1.0, window_end_s=1500.0) == pytest.approx(
        0.5 * np.array([500.0, -500.0, -400.0, -500.0]) / 120
    )
    # Far behind: late and past FAR_BEHIND x rhomax (2.2 > 1.5).
    assert view.far_behind(rhomax=1.0).tolist() == [False, True, False, True]
    assert view.far_behind(rhomax=2.0).tolist() == [False] * 4


def test_gang_priorities_keep_the_order_past_the_cap_and_count_the_gang() -> None:
    view = FairnessView(
        now_s=1000.0,
        share=0.5,
        round_s=120.0,
        submit_s=np.zeros(4),
        targets_s=np.array([2000.0, 500.0, 300.0, 250.0]),
        remaining_s=np.full(4, 400.0),
        after_current_s=np.full(4, 400.0),
    )
    sizes = np.array([1, 1, 1, 8])
    # rho = 1800 / target: 0.9, 3.6, 6, 7.2. With lambda 12 the last three pass PRIORITY_CAP: a fixed cap made
    # them equal; scaled together they keep their order, the most urgent (a gang of 8) at the cap.
    capped = view.priorities(lam=12.0, rhomax=1.0)
    assert capped[1:].tolist() == [PRIORITY_CAP] * 3
    scaled = view.gang_priorities(lam=12.0, rhomax=1.0, sizes=sizes)
    assert scaled[0] == 1.0 and scaled[1] < scaled[2] < scaled[3]
    assert scaled[3] == pytest.approx(PRIORITY_CAP)
    exponent = np.log(PRIORITY_CAP) / (np.log(7.2) + np.log(8) / 12)  # lambda scaled down to put the top at the cap
    assert scaled[1] == pytest.approx(3.6**exponent)
    # A nearly done job gets the cap without flattening the others (its exponent of 100 is not the scale).
    done = replace(view, after_current_s=np.array([400.0, 400.0, 400.0, 10.0]))
    with_done = done.gang_priorities(lam=2.0, rhomax=1.0, sizes=np.ones(4))
    assert with_done[3] == pytest.approx(PRIORITY_CAP) and with_done[1:3] == pytest.approx([3.6**2, 6.0**2])
    # A target at the submission (an infinite ratio) stays finite.
    endless = replace(view, targets_s=np.array([2000.0, 0.0, 300.0, 250.0]))
    with np.errstate(divide="ignore"):
        assert np.isfinite(endless.gang_priorities(lam=12.0, rhomax=1.0, sizes=sizes)).all()
    # Under the cap, lambda is kept: rho^lambda times the gang.
    assert view.gang_priorities(lam=2.0, rhomax=1.0, sizes=sizes)[3] == pytest.approx(8 * 7.2**2)
    # Lambda 0 (a valid key: rho^0 = 1) weighs jobs behind by their gang alone; it divided by zero (NaN weights).
    assert view.gang_priorities(lam=0.0, rhomax=1.0, sizes=sizes).tolist() == [1.0, 1.0, 1.0, 8.0]
    assert done.gang_priorities(lam=0.0, rhomax=1.0, sizes=sizes).tolist() == [1.0, 1.0, 1.0, PRIORITY_CAP]
    # And where a target is the submission itself (an infinite ratio), rho^0 is still 1, not 0 x log(inf).
    with np.errstate(divide="ignore"):
        assert endless.urgency(lam=0.0, rhomax=1.0).tolist() == [0.0] * 4
        assert endless.priorities(lam=0.0, rhomax=1.0).tolist() == [1.0] * 4
