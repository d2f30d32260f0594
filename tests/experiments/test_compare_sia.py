"""`shockwave compare` on Sia's workload format: every policy side by side, the profile files carried by the cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import check_results, shockwave
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.experiments.compare import CompareRequest, build_cells
from shockwave.workload_model.sia.profiles import write_profile_files

CLUSTER = "a:8:4,b:8:8"


def test_compare_runs_sia_and_rigid_policies_on_a_sia_workload(
    tmp_path: Path, sia_workload: Path, sia_profiles: Path
) -> None:
    out = tmp_path / "cmp"
    args = ["--trace", sia_workload, "--trace-format", "sia", "--profiles", sia_profiles, "--cluster", CLUSTER]
    run = shockwave("compare", *args, "--policies", "sia,themis,fifo_perf", "--round-seconds", 60, "--out", out)
    assert run.returncode == 0, run.stderr
    results = json.loads((out / "results.json").read_text())
    assert [r["policy"] for r in results] == ["sia", "themis", "fifo_perf"]
    check_results(results)
    assert all(r["cell"]["trace_format"] == "sia" and r["unfinished_jobs"] == [] for r in results)


def test_cells_carry_the_profiles_and_their_digest_follows_them(sia_workload: Path, sia_profiles: Path) -> None:
    request = CompareRequest(sia_workload, None, ["sia"], cluster=CLUSTER, trace_format="sia", profiles=sia_profiles)
    (cell,) = build_cells(request)
    assert {name for name, _ in cell.profile_texts} >= {"toy/placements-a.csv", "toy/validation-64.csv"}
    with (sia_profiles / "toy" / "placements-a.csv").open("a") as out:
        out.write("1,24,0.15,0.0\n")
    (changed,) = build_cells(request)
    assert changed.digest != cell.digest
    assert ClusterSpec.parse(CLUSTER).gpus == cell.gpus


def test_sia_inputs_are_checked_before_anything_runs(sia_workload: Path, sia_profiles: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="needs --profiles"):
        build_cells(CompareRequest(sia_workload, None, ["sia"], cluster=CLUSTER, trace_format="sia"))
    with pytest.raises(InputError, match="goes with --trace-format sia"):
        build_cells(CompareRequest(sia_workload, None, ["sia"], cluster=CLUSTER, profiles=sia_profiles))
    with pytest.raises(InputError, match=r"APPLICATION/NAME\.csv"):
        write_profile_files({"../escape/x.csv": "text"}, tmp_path / "p")
    assert not (tmp_path / "escape").exists()
