"""Sia's workload as rigid jobs: steps and rates by the artifact's fixed-batch rule, hand-computed on the toy
profile, and every policy of the project finishing an imported workload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shockwave.api import simulate
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.policies.registry import POLICIES
from shockwave.workload_model.catalog import family
from shockwave.workload_model.sia.profiles import packed
from shockwave.workload_model.sia.rigid import epoch_ends, read_sia_workload, rigid_step

CLUSTER = "a:8:4,b:8:8"


def test_steps_and_rates_follow_the_fixed_batch_rule(sia_workload: Path, sia_profiles: Path) -> None:
    jobs, job_profiles, tm = read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse(CLUSTER))
    app = tm.applications["toy"]
    # 30 progress over three epochs: 30 steps at batch 32 (gain 1), 22.5 at 64 (gain 4/3).
    assert epoch_ends(app, 32)[-1] == pytest.approx(30) and epoch_ends(app, 64)[-1] == pytest.approx(22.5)
    assert [j.total_steps for j in jobs][:2] == [22.5, 22.5] and all(j.continuous for j in jobs)
    assert [j.restart_s for j in jobs] == [30.0] * 4
    # Batch 64 on 2 GPUs of a: 32 per GPU (the largest measured), no accumulation: 0.22 s a step.
    assert tm.throughput("toy", 64, 2, "a") == pytest.approx(1 / 0.22)
    # On one GPU: 64 > 32 measured, one accumulation step of 32: 0.2 + (0.2 - 0) s.
    assert rigid_step(app, "a", (1,), 64) == pytest.approx((0.4, 64))
    # Batch 32 on 4 GPUs: 8 per GPU, below what was measured: unknown there.
    assert rigid_step(app, "a", (4,), 32) is None
    assert tm.throughput("toy", 64, 2, "b") == pytest.approx(1 / 0.44)
    assert packed(10, 4) == (4, 4, 2)
    assert family("toy").dataset_size == 10 * 32 and job_profiles[0].epochs == 5  # ceil(22.5 / (320 / 64))


def test_a_job_outside_its_profile_is_refused_with_its_line(sia_workload: Path, sia_profiles: Path) -> None:
    with sia_workload.open("a") as out:
        out.write("toy-4,120,toy,4,32\n")  # 8 per GPU: below what was measured, on every type
    with pytest.raises(InputError, match="outside its profile") as error:
        read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse(CLUSTER))
    assert (error.value.line, error.value.field) == (6, "batch_size")


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"prices": {"a": 1.0, "b": 0.5}}))
    return path


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_runs_on_a_sia_workload(sia_workload: Path, sia_profiles: Path, prices: Path, policy: str) -> None:
    result = simulate(
        sia_workload, policy, CLUSTER, trace_format="sia", profiles=sia_profiles, round_seconds=60, prices=prices
    )
    assert result.complete and len(result.jobs) == 4


def test_cli_reads_sia_workloads_and_refuses_what_does_not_go_with_them(sia_workload: Path, sia_profiles: Path) -> None:
    from typer.testing import CliRunner

    from shockwave.cli import app

    args = ["simulate", "--trace", str(sia_workload), "--trace-format", "sia", "--profiles", str(sia_profiles)]
    ran = CliRunner().invoke(app, [*args, "--cluster", CLUSTER, "--policy", "max_sum_throughput_perf", "--json"])
    result = json.loads(ran.stdout)
    assert result["complete"] and {"avg_jct_s", "makespan_s", "worst_ftf", "unfair_fraction"} <= set(result)
    with pytest.raises(InputError, match="needs --profiles"):
        simulate(sia_workload, "fifo", CLUSTER, trace_format="sia")
    with pytest.raises(InputError, match="goes with --trace-format sia"):
        simulate(sia_workload, "fifo", CLUSTER, profiles=sia_profiles)
    with pytest.raises(InputError, match="unknown trace format"):
        simulate(sia_workload, "fifo", CLUSTER, trace_format="csv")
    with pytest.raises(InputError, match="no profile for GPU type c"):
        simulate(sia_workload, "fifo", "a:8:4,c:8", trace_format="sia", profiles=sia_profiles)
    (sia_profiles / "toy").rename(sia_profiles / "other")
    with pytest.raises(InputError, match="no profile folder 'toy'") as error:
        simulate(sia_workload, "fifo", CLUSTER, trace_format="sia", profiles=sia_profiles)
    assert (error.value.line, error.value.field) == (2, "application")


def test_jobs_run_in_arrival_order_and_are_profiled_where_they_run(sia_profiles: Path, tmp_path: Path) -> None:
    # Listed out of order; and job b-1 runs only on type b (8 GPUs on one node of b, not 2 nodes of a's 4).
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\nlate,500,toy,2,64\nearly,0,toy,2,64\n")
    jobs, _, _ = read_sia_workload(path, sia_profiles, ClusterSpec.parse(CLUSTER))
    assert [j.arrival for j in jobs] == [0.0, 500.0]
    toy = sia_profiles / "toy"
    rows = [line for line in (toy / "placements-a.csv").read_text().splitlines() if not line.startswith("44,")]
    (toy / "placements-a.csv").write_text("\n".join(rows) + "\n")
    (toy / "scalability-a.csv").unlink()
    with (toy / "placements-b.csv").open("a") as out:
        out.write("8,16,0.25,0.1\n8,32,0.3,0.1\n")
    path.write_text("name,time,application,num_replicas,batch_size\nwide,0,toy,8,256\n")
    jobs, profiles, tm = read_sia_workload(path, sia_profiles, ClusterSpec.parse(CLUSTER))
    assert jobs[0].total_steps == 22.5 and profiles[0].epochs == 12  # 2 steps an epoch of 320 samples at 256
    assert profiles[0].runs[0][2] == pytest.approx(320 / 256 / tm.throughput("toy", 256, 8, "b"))


def test_the_same_application_from_other_profiles_is_refused(
    sia_workload: Path, sia_profiles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shockwave.workload_model.catalog as catalog

    monkeypatch.setattr(catalog, "IMPORTED", {})
    read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse(CLUSTER))
    for validation in (sia_profiles / "toy").glob("validation-*.csv"):  # twice the progress per epoch
        lines = validation.read_text().splitlines()
        rows = [",".join([str(2 * float(r.split(",")[0])), *r.split(",")[1:]]) for r in lines[1:]]
        validation.write_text("\n".join([lines[0], *rows]) + "\n")
    with pytest.raises(InputError, match="dataset_size 320 then 640"):
        read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse(CLUSTER))
