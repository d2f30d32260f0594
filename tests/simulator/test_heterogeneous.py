"""Clusters of several GPU types end to end in the simulator: every policy runs, types are used, and the
heterogeneity-aware policies gain what Gavel says they gain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import require_reference, shockwave
from shockwave.api import simulate
from shockwave.policies.registry import POLICIES
from shockwave.workload_model.gavel_generator import GavelWorkload
from shockwave.workload_model.throughput import TableThroughputs

TABLE = require_reference("gavel", "simulation_throughputs.json")
CLUSTER = "v100:8,p100:8,k80:8"


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 Gavel jobs (gangs of 1-8) arriving every 10 minutes on average: a loaded 24-GPU cluster."""
    workload = GavelWorkload(40, 600.0, seed=3, multi_gpu=True)
    return workload.write(TableThroughputs.from_json(TABLE), tmp_path_factory.mktemp("hetero"))


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_finishes_a_workload_on_three_types(workload: Path, policy: str) -> None:
    result = simulate(workload, policy, CLUSTER, throughputs=TABLE, round_seconds=360)
    assert result.complete and len(result.jobs) == 40
    assert result.utilization_by_type is not None and set(result.utilization_by_type) == {"v100", "p100", "k80"}
    assert sum(result.utilization_by_type.values()) > 0
    if policy not in ("fifo",):  # a job keeps the type FIFO drew for it; the others spread over all types
        assert all(u > 0 for u in result.utilization_by_type.values()), result.utilization_by_type


def test_heterogeneity_aware_policies_beat_their_agnostic_versions(workload: Path) -> None:
    def jct(policy: str) -> float:
        return simulate(workload, policy, CLUSTER, throughputs=TABLE, round_seconds=360).avg_jct_s

    assert jct("max_min_fairness_perf") < jct("max_min_fairness")
    assert jct("fifo_perf") < jct("fifo")


def test_cli_reports_utilisation_per_type_and_a_window(workload: Path) -> None:
    done = shockwave(
        "simulate", "--trace", workload, "--cluster", CLUSTER, "--policy", "max_min_fairness_perf",
        "--throughputs", TABLE, "--round-seconds", "360", "--window", "10:30", "--mechanics", "gavel", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["window"] == [10, 30] and sorted(job["id"] for job in result["jobs"]) == list(range(10, 30))
    assert result["cluster"] == CLUSTER and set(result["utilization_by_type"]) == {"v100", "p100", "k80"}
    run = ("simulate", "--trace", workload, "--cluster", CLUSTER, "--policy", "fifo", "--throughputs", TABLE)
    bad, beyond = shockwave(*run, "--window", "30:10"), shockwave(*run, "--window", "0:41")
    assert bad.returncode == beyond.returncode == 2 and "Traceback" not in bad.stderr + beyond.stderr
    assert "--window" in bad.stderr and "0:40" in beyond.stderr


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_finishes_jobs_whose_switch_takes_a_type_away(tmp_path: Path, policy: str) -> None:
    """Four ResNet-50 jobs on mostly K80s switch to batch size 128, which K80s cannot run: a plan (a lease, a kept
    type, a window planned ahead) must not keep them there."""
    from shockwave.workload_model.catalog import FAMILIES
    from shockwave.workload_model.trace import catalog_job, write_trace

    wisr = require_reference("throughputs", "wisr_throughputs.json")
    trace = tmp_path / "rn50.trace"
    steps = 12 * FAMILIES["ResNet-50"].iterations_per_epoch(64)
    write_trace([catalog_job("ResNet-50", 64, 1, steps, "accordion", 600.0 * i) for i in range(4)], trace)
    result = simulate(trace, policy, "v100:1,k80:3", throughputs=wisr, mechanics="corrected", round_seconds=600)
    assert result.complete and sum(job.batch_size_changes for job in result.jobs) >= 2


@pytest.mark.parametrize("policy", ["shockwave", "max_min_fairness_perf"])
def test_a_switch_to_a_size_one_type_cannot_run_is_refused_only_there(tmp_path: Path, policy: str) -> None:
    """The wisr table has no K80 rate for ResNet-50 at batch size 128: the job still reaches 128, on the V100."""
    from shockwave.workload_model.catalog import FAMILIES
    from shockwave.workload_model.trace import catalog_job, write_trace

    wisr = require_reference("throughputs", "wisr_throughputs.json")
    trace = tmp_path / "rn50.trace"  # Accordion on ResNet-50 from batch size 64 goes to 128 after epoch 10
    write_trace(
        [catalog_job("ResNet-50", 64, 1, 12 * FAMILIES["ResNet-50"].iterations_per_epoch(64), "accordion", 0)], trace
    )
    result = simulate(trace, policy, "v100:1,k80:1", throughputs=wisr, mechanics="corrected")
    assert result.complete and result.jobs[0].batch_size_changes == 1
