"""Sia's configurations, goodput rows and restart factor."""

from __future__ import annotations

from pathlib import Path

import pytest

from shockwave.core.cluster import ClusterSpec
from shockwave.core.state import JobState
from shockwave.policies.elastic import restart_factor
from shockwave.policies.sia.configs import ZERO, Knowledge, configurations, goodput_row
from shockwave.workload_model.goodput import Training, goodput_of
from shockwave.workload_model.profile import build_profile
from shockwave.workload_model.sia.rigid import read_sia_workload


def test_configurations_are_powers_of_two_in_a_node_then_whole_nodes_by_type_alphabetically() -> None:
    found = configurations(ClusterSpec.parse("aws:24:4,rtx:24:8,dgx-ext:16:8"))
    assert [(c.gpu_type, c.gpus) for c in found] == [
        *[("aws", g) for g in (1, 2, 4, 8, 12, 16, 20, 24)],
        *[("dgx-ext", g) for g in (1, 2, 4, 8, 16)],
        *[("rtx", g) for g in (1, 2, 4, 8, 16, 24)],
    ]
    assert len(configurations(ClusterSpec.parse("aws:64:4"))) == 3 + 15
    assert [c.gpus for c in configurations(ClusterSpec.parse("x:12:6"))] == [1, 2, 4, 6, 12]


def test_restart_factor() -> None:
    assert restart_factor(300, 2, 30) == pytest.approx(240 / 330)
    assert restart_factor(100, 9, 30) == 0.0


def _job(sia_workload: Path, sia_profiles: Path, *, elastic: bool) -> tuple[JobState, object]:
    cluster = ClusterSpec.parse("a:8:4,b:8:8")
    jobs, _, tm = read_sia_workload(sia_workload, sia_profiles, cluster, elastic=elastic)
    rates = {t: tm.throughput("toy", jobs[1].batch_size, jobs[1].scale_factor, t) for t in cluster.types}
    return JobState.admit(1, jobs[1], build_profile(jobs[1], tm, gpu_type="a"), rates), tm


def test_a_new_job_is_offered_one_gpu_of_any_type(sia_workload: Path, sia_profiles: Path) -> None:
    job, tm = _job(sia_workload, sia_profiles, elastic=True)
    configs = configurations(ClusterSpec.parse("a:8:4,b:8:8"))
    row = goodput_row(job, configs, goodput_of(tm), Knowledge({}), ("a", "b"))
    assert dict(zip([(c.gpu_type, c.gpus) for c in configs], row.tolist(), strict=True)) == {
        ("a", 1): 1.0, ("a", 2): ZERO, ("a", 4): ZERO, ("a", 8): ZERO,
        ("b", 1): 1.0, ("b", 2): ZERO, ("b", 4): ZERO, ("b", 8): ZERO,
    }  # fmt: skip


def test_known_goodput_grows_to_twice_what_ran_and_projects(sia_workload: Path, sia_profiles: Path) -> None:
    job, tm = _job(sia_workload, sia_profiles, elastic=True)
    job.training, job.measured = Training(1, 32, 0, 0), {"a": [(1, 1, 32.0, 0.2, 0.0)]}
    assert Knowledge.of(job) == Knowledge({"a": 1})
    configs = configurations(ClusterSpec.parse("a:8:4,b:8:8"))
    row = goodput_row(job, configs, goodput_of(tm), Knowledge.of(job), ("a", "b"))
    # a: 5.0 progress/s on one GPU as timed, more on two as the fit extrapolates; b projected at half (one-GPU
    # throughput 80 against 160); normalised by the least, b's one GPU (2.5/s); nothing beyond 2 GPUs.
    assert row[[0, 4]] == pytest.approx([2.0, 1.0])
    assert row[1] > row[0] and row[5] == pytest.approx(row[1] / 2)
    assert (row[[2, 3, 6, 7]] == ZERO).all()
    unprojected = goodput_row(job, configs, goodput_of(tm), Knowledge({"a": 1}), ("a", "b"), project=False)
    assert unprojected[4] == 1.0 and unprojected[5] == ZERO  # b unknown: its one GPU only, worth 1
    assert Knowledge({"a": 4}).replica_bound(job, goodput_of(tm), ("a", "b")) == 4  # at most the batch allows
