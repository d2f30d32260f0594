"""Goodput-adaptive jobs of Sia's applications: the batch a job picks, how far it gets, hand-computed on the toy
profile (gain 1 at batch 32, 4/3 at 64; type b twice as slow as a)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shockwave.core.cluster import ClusterSpec
from shockwave.workload_model.goodput import goodput_of
from shockwave.workload_model.sia.goodput import Choice, SiaGoodput, epoch_of, split
from shockwave.workload_model.sia.rigid import read_sia_workload

CLUSTER = "a:8:4,b:8:8"


@pytest.fixture
def model(sia_workload: Path, sia_profiles: Path) -> SiaGoodput:
    _, _, tm = read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse(CLUSTER), elastic=True)
    found = goodput_of(tm)
    assert isinstance(found, SiaGoodput)
    return found


def test_split_takes_as_few_accumulation_steps_as_fit() -> None:
    assert split(64, 2, 32, 32) == (32, 0)
    assert split(64, 1, 32, 32) == (32, 1)  # one GPU above the smallest batch accumulates at least once
    assert split(100, 1, 32, 32) == (25, 3)
    assert split(32, 1, 32, 32) == (32, 0)


def test_a_job_picks_the_batch_that_progresses_fastest(model: SiaGoodput) -> None:
    # One GPU of a: batch 32 in one 0.2 s step (gain 1) beats 64 as two accumulated steps (0.4 s, gain 4/3).
    assert model.best("toy", "a", (1,), 0, 64, running=True) == Choice(pytest.approx(5.0), 32)
    # Two GPUs: 16 each in 0.12 s (8.3/s) beats 32 each in 0.22 s at gain 4/3 (6.1/s).
    assert model.best("toy", "a", (2,), 0, 64, running=True) == Choice(pytest.approx(1 / 0.12), 32)
    # One GPU on each of two nodes is not measured as such: read off the shapes around it, (1, 1) at 16 each.
    assert model.best("toy", "a", (1, 1), 0, 64, running=True) != model.best("toy", "a", (2,), 0, 64, running=True)
    assert model.goodput("toy", "b", 1, 0.0, 64) == pytest.approx(2.5)
    # Sixteen GPUs would need 16 per GPU at batch 256: more than the application's largest batch allows.
    assert model.best("toy", "a", (4, 4, 4, 4), 0, 64, running=True) is None
    assert model.goodput("toy", "a", 16, 0.0, 64) == 0.0


def test_advance_stops_at_the_work_and_re_chooses_per_epoch(model: SiaGoodput) -> None:
    assert model.advance("toy", "a", (1,), 0.0, 4.0) == pytest.approx((20.0, 4.0))
    assert model.advance("toy", "a", (1,), 25.0, 10.0) == pytest.approx((30.0, 1.0))  # done after 1 s
    assert model.advance("toy", "a", (4, 4, 4, 4), 0.0, 10.0) == (0.0, 0.0)  # cannot run there
    app = model.applications["toy"]
    assert [epoch_of(app, p) for p in (0.0, 9.99, 10.0, 29.0, 30.0)] == [0, 0, 1, 2, 2]
    assert model.total("toy") == 30.0


def test_limits_for_projection_and_growth(model: SiaGoodput) -> None:
    # Largest batch 64 at 16 per GPU: 4 GPUs. One GPU: largest batch / largest step time of the one-GPU rows.
    assert model.largest_gang("toy", "a") == 4
    assert model.one_gpu_throughput("toy", "a") == pytest.approx(32 / 0.2)
    assert model.one_gpu_throughput("toy", "b") == pytest.approx(32 / 0.4)


def test_elastic_jobs_count_progress_and_keep_their_request(sia_workload: Path, sia_profiles: Path) -> None:
    jobs, profiles, _ = read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse(CLUSTER), elastic=True)
    assert all(j.elastic and j.total_steps == 30.0 for j in jobs)
    assert [j.scale_factor for j in jobs] == [2, 1, 4, 8] and profiles[0].epochs == 5
