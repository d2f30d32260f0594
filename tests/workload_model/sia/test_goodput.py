"""Goodput-adaptive jobs of Sia's applications: the batch a job picks, how far it gets and what it learns,
hand-computed on the toy profile (gain 1 at batch 32, 4/3 at 64; per-GPU batches 16-32; type b twice as slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shockwave.core.cluster import ClusterSpec
from shockwave.workload_model.goodput import Training
from shockwave.workload_model.sia.goodput import SiaGoodput, epoch_of, split
from shockwave.workload_model.sia.rigid import read_sia_workload
from sia_files import ONE_GPU, toy_application, toy_workload, write_csv

CLUSTER = "a:8:4,b:8:8"


def test_split_takes_as_few_accumulation_steps_as_fit() -> None:
    assert split(64, 2, 32, 32) == (32, 0)
    assert split(64, 1, 32, 32) == (32, 1)  # one GPU above the smallest batch accumulates at least once
    assert split(100, 1, 32, 32) == (25, 3)
    assert split(32, 1, 32, 32) == (32, 0)


def test_a_new_job_starts_small_and_learns_what_it_timed(toy_goodput: SiaGoodput) -> None:
    # Nothing timed: the smallest batch, 32 on one GPU, one 0.2 s step at gain 1: 5 progress a second.
    ran = toy_goodput.advance("toy", "a", (1,), 0.0, 4.0, training=None, measured=(), restarted=True)
    assert (ran.done, ran.trained_s) == pytest.approx((20.0, 4.0))
    assert ran.measured == (ONE_GPU,)
    # Its fitted model then says 64 (two accumulated steps, 0.4 s, gain 4/3: 3.3/s) is slower: it keeps 32; its
    # last step was in epoch 1 (two epochs of 10 in 4 s).
    assert ran.training == Training(gpus=1, local=32, accumulation=0, epoch=1)


def test_it_stops_at_its_work_and_where_it_cannot_run(toy_goodput: SiaGoodput) -> None:
    training = Training(1, 32, 0, 2)
    done = toy_goodput.advance("toy", "a", (1,), 25.0, 10.0, training=training, measured=[ONE_GPU], restarted=False)
    assert (done.done, done.trained_s) == pytest.approx((30.0, 1.0)) and done.measured == ()
    # Four nodes of four GPUs: no measurement that large.
    stuck = toy_goodput.advance("toy", "a", (4, 4, 4, 4), 0.0, 10.0, training=training, measured=(), restarted=True)
    assert (stuck.done, stuck.trained_s, stuck.training) == (0.0, 0.0, None)


def test_a_policy_estimates_only_where_the_job_timed_steps(toy_goodput: SiaGoodput) -> None:
    training = Training(1, 32, 0, 0)
    assert toy_goodput.goodput("toy", "a", 1, 64, training=None, measured=()) == 0.0
    assert toy_goodput.goodput("toy", "a", 1, 64, training=training, measured=()) == 0.0
    assert toy_goodput.goodput("toy", "a", 1, 64, training=training, measured=[ONE_GPU]) == pytest.approx(5.0, rel=1e-3)


def test_epochs_and_limits(toy_goodput: SiaGoodput) -> None:
    app = toy_goodput.applications["toy"]
    assert [epoch_of(app, p) for p in (0.0, 9.99, 10.0, 29.0, 30.0)] == [0, 0, 1, 2, 2]
    # Largest batch 64 at 16 per GPU: 4 GPUs. One GPU: largest batch / largest step time of the one-GPU rows.
    assert toy_goodput.largest_gang("toy", "a") == 4
    assert toy_goodput.one_gpu_throughput("toy", "a") == pytest.approx(32 / 0.2)
    assert toy_goodput.one_gpu_throughput("toy", "b") == pytest.approx(32 / 0.4)


def test_elastic_jobs_count_progress_and_keep_their_request(sia_workload: Path, sia_profiles: Path) -> None:
    jobs, profiles, _ = read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse(CLUSTER), elastic=True)
    assert all(j.elastic and j.total_steps == 30.0 for j in jobs)
    assert [j.scale_factor for j in jobs] == [2, 1, 4, 8] and profiles[0].epochs == 5


def test_the_noise_a_job_knows_is_the_one_of_the_batch_it_last_stepped(tmp_path: Path) -> None:
    # Noisier gradients at batch 64 (variance 9): there larger batches gain more. A batch just picked has not been
    # stepped, so its noise is unknown: the job (and a policy's estimate) still use the noise of the batch it trained.
    app = toy_application(tmp_path / "traces")
    epochs = [f"{10.0 * (e + 1)},{e},0.5,1.0,9.0" for e in range(3)]
    write_csv(app / "validation-64.csv", "progress,iteration,metric,grad_sqr,grad_var", epochs)
    cluster = ClusterSpec.parse(CLUSTER)
    _, _, model = read_sia_workload(toy_workload(tmp_path), tmp_path / "traces", cluster, elastic=True)
    goodput = model.goodput
    stepped_32, picked_64 = Training(1, 32, 1, 0, stepped_batch=32), Training(2, 32, 0, 0)
    assert stepped_32.batch == 64 and picked_64.stepped_batch == 64

    def estimate(training: Training) -> float:
        return goodput.goodput("toy", "a", 2, 128, training=training, measured=[ONE_GPU, (1, 2, 32.0, 0.22, 0.02)])

    assert estimate(stepped_32) == estimate(Training(1, 32, 0, 0))
    assert estimate(picked_64) > estimate(stepped_32)
    # Training on with the batch picked measures its noise.
    ran = goodput.advance("toy", "a", (1,), 0.0, 1.0, training=stepped_32, measured=[ONE_GPU], restarted=False)
    assert ran.training is not None and ran.training.stepped_batch == 64
