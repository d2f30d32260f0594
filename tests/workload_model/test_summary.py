"""A trace's makespan lower bounds: jobs counted to their last step, and one bound for `trace check` and `simulate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import require_reference, shockwave
from shockwave.api import simulate
from shockwave.core.cluster import ClusterSpec
from shockwave.workload_model.catalog import FAMILIES
from shockwave.workload_model.profile import build_profile
from shockwave.workload_model.summary import summarize
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import catalog_job, write_trace


def test_a_job_is_bounded_to_its_last_step_not_the_end_of_its_last_epoch(tmp_path: Path) -> None:
    per_epoch = FAMILIES["ResNet-18"].iterations_per_epoch(32)
    line = catalog_job("ResNet-18", 32, 1, 2 * per_epoch + 100, "static", 0.0)  # 100 steps into its third epoch
    trace = tmp_path / "one.trace"
    write_trace([line], trace)
    tm = load_throughputs(None)
    profile = build_profile(line.job(), tm)
    assert profile.epochs == 3 and profile.last_epoch_share == pytest.approx(100 / per_epoch)
    result = simulate(trace, "fifo", 1, mechanics="corrected", round_seconds=60)
    assert profile.t_isolated > result.makespan_s  # whole epochs: T_iso (rho's) is no bound
    assert result.makespan_lower_bound_s == pytest.approx(profile.least_seconds)
    assert result.makespan_s >= result.makespan_lower_bound_s >= result.makespan_s - 60
    summary = summarize([line.job()], [profile], tm, ClusterSpec.of(1))
    assert summary["makespan_lower_bound_s"] == summary["lower_bound_work_over_gpus_s"] == profile.least_seconds


def test_trace_check_prints_the_bound_simulate_reports_on_several_types(canonical_trace: Path) -> None:
    wisr, cluster = require_reference("throughputs", "wisr_throughputs.json"), "v100:12,p100:12,k80:12"
    checked = shockwave("trace", "check", canonical_trace, "--throughputs", wisr, "--cluster", cluster, "--json")
    assert checked.returncode == 0, checked.stderr
    summary = json.loads(checked.stdout)["summary"]
    assert "lower_bound_arrival_plus_t_iso_s" not in summary and "lower_bound_work_over_gpus_s" not in summary
    result = simulate(canonical_trace, "max_min_fairness_perf", cluster, throughputs=wisr, mechanics="corrected")
    assert summary["makespan_lower_bound_s"] == result.makespan_lower_bound_s
    assert summary["cluster"] == cluster and result.makespan_s >= result.makespan_lower_bound_s
