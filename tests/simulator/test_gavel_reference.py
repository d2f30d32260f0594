"""The reference Gavel simulator's numbers (../shared/reference/gavel/reference_results.json), reproduced.

Each row is one run of the reference on a workload its generator made from seed 0 (36:36:36, 360 s rounds): we
generate the same workload (`trace generate --style gavel`) and simulate it under `--mechanics gavel`. The average
JCT over the window, the utilisation and the number of jobs that had arrived agree to the reference's printed
precision; per-job completion times too, for every job of the window. (Finish-time fairness matches only with the
reference's own formulation of its program, which `--mechanics gavel` selects: ECOS returns another of the optimal
allocations for our vectorised one, and average JCT then differs by 0.2-0.8%.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import require_reference
from shockwave.api import simulate
from shockwave.simulator.mechanics import preset
from shockwave.workload_model.gavel_generator import GavelWorkload
from shockwave.workload_model.throughput import TableThroughputs

pytestmark = pytest.mark.slow

GAVEL = require_reference("gavel")
TABLE = GAVEL / "simulation_throughputs.json"
ROWS = json.loads((GAVEL / "reference_results.json").read_text())["runs"]


def row_id(row: dict[str, Any]) -> str:
    size = row.get("lam_mean_interarrival_s") or row.get("jobs")
    return f"{row['policy']}-{row['experiment']}-{size:g}"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Callable[[GavelWorkload], Path]:
    """A workload's trace, generated once per module (rows share them)."""
    folder, table = tmp_path_factory.mktemp("gavel"), TableThroughputs.from_json(TABLE)
    return lambda workload: workload.write(table, folder)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_reference_row(row: dict[str, Any], traces: Callable[[GavelWorkload], Path]) -> None:
    trace = traces(GavelWorkload.of_reference_run(row))
    window = tuple(row["window_job_ids"]) if "window_job_ids" in row else None
    result = simulate(
        trace, row["policy"], "v100:36,p100:36,k80:36", throughputs=TABLE, mechanics="gavel", round_seconds=360,
        window=window, seed=int(row["seed"]),
    )  # fmt: skip
    assert result.avg_jct_s == pytest.approx(row["avg_jct_s"], rel=1e-5)
    assert result.utilization == pytest.approx(row["utilization"], abs=1e-3)
    if "makespan_s" in row:
        assert result.makespan_s == pytest.approx(row["makespan_s"], rel=1e-6)
    if "num_jobs_dispatched" in row:
        assert result.jobs_arrived == row["num_jobs_dispatched"]
    if "per_job_jct_s" in row:
        ours = {job.id: job.jct_s for job in result.jobs}
        assert ours == {int(j): pytest.approx(jct, abs=1e-2) for j, jct in row["per_job_jct_s"].items()}


def test_finish_time_fairness_by_our_own_program_is_within_a_percent(traces: Callable[[GavelWorkload], Path]) -> None:
    """Our vectorised program (without the reference's quirks) has the same optimum, another point among ties."""
    row = next(r for r in ROWS if r["policy"] == "finish_time_fairness_perf")
    result = simulate(
        traces(GavelWorkload.of_reference_run(row)), "finish_time_fairness_perf", "v100:36,p100:36,k80:36",
        throughputs=TABLE, mechanics=replace(preset("gavel"), reference_policy_quirks=False), round_seconds=360,
        window=tuple(row["window_job_ids"]), seed=0,
    )  # fmt: skip
    assert result.avg_jct_s == pytest.approx(row["avg_jct_s"], rel=0.01)


OTHER_SEEDS = {
    ("max_min_fairness_perf", 900.0, 1, False): 46428.792139,
    ("max_min_fairness_perf", 900.0, 2, False): 52298.833874,
    ("max_min_fairness", 900.0, 1, False): 65378.674286,
    ("finish_time_fairness_perf", 2400.0, 1, True): 60247.559958,
}
"""Runs of the reference's generated-jobs driver on seeds of ours (-c 36:36:36 -p POLICY --seed S -l LAM -s 400 -e 600
-i 360 --solver ECOS, --generate-multi-gpu-jobs where the last field is True): average JCT over jobs 400-599."""


@pytest.mark.parametrize("case", sorted(OTHER_SEEDS), ids=lambda c: f"{c[0]}-{c[1]:g}-seed{c[2]}")
def test_other_seeds_we_ran_on_the_reference(case: tuple[str, float, int, bool], traces: Callable) -> None:
    policy, lam, seed, multi_gpu = case
    result = simulate(
        traces(GavelWorkload(2500, lam, seed=seed, multi_gpu=multi_gpu)), policy, "v100:36,p100:36,k80:36",
        throughputs=TABLE, mechanics="gavel", round_seconds=360, window=(400, 600), seed=seed,
    )  # fmt: skip
    assert result.avg_jct_s == pytest.approx(OTHER_SEEDS[case], rel=1e-9)


FIFO_AT_4_PER_HOUR = {0: 52813.996965, 1: 52764.036417, 2: 68803.679268, 3: 86953.830590}
"""The reference's fifo at 4 jobs/h, window 400-600, 36:36:36 (-p fifo --seed S -l 900 -s 400 -e 600 -i 360 --solver
ECOS): average JCT by seed. Seeds 4-11 matched too (`benchmarks/gavel_diff.py` screens random cells)."""


@pytest.mark.parametrize("seed", sorted(FIFO_AT_4_PER_HOUR))
def test_fifo_at_the_documented_window_takes_the_traces_seed(seed: int, traces: Callable) -> None:
    """As a user runs it: the trace generated with the seed, simulated with neither a seed nor a round length (the
    trace carries its seed, the preset Gavel's 360 s). With the policies seeded 0 instead, seeds 1 and 3 were 3.9%
    and 19.5% off: FIFO draws each job's GPU type from that stream."""
    result = simulate(
        traces(GavelWorkload(10_000, 900.0, seed=seed)), "fifo", "v100:36,p100:36,k80:36", throughputs=TABLE,
        mechanics="gavel", window=(400, 600),
    )  # fmt: skip
    assert (result.seed, result.round_seconds) == (seed, 360)
    assert result.avg_jct_s == pytest.approx(FIFO_AT_4_PER_HOUR[seed], rel=1e-9)


EMPTY_CLUSTER = (23072.237614, 0.163177, 70, {0: 2058.617, 1: 20673.656, 2: 4809.113, 3: 47608.727, 4: 40211.075})
"""The reference on fifo, seed 20, 4 jobs/h, window 0-5 (-p fifo --seed 20 -l 900 -s 0 -e 5 -i 360 --solver ECOS):
average JCT, utilisation, jobs arrived, each window job's JCT."""


def test_a_recompute_on_an_empty_cluster_delays_the_next_arrival(traces: Callable) -> None:
    """Job 0 ends at 2058.6 s with no other job active; the reference recomputes then (one is due: the last was at
    0), over no jobs, which also drops job 0 from FIFO's types, so job 1 (arriving at 2329.6 s) waits for the next
    recompute, at job 2's arrival (5001.0 s). Without that empty recompute job 1 started at once: -1.8% here, -5.35%
    on the window 400-599 of the same seed (issue 36's -3.9% on a held-back workload)."""
    avg_jct, utilization, arrived, per_job = EMPTY_CLUSTER
    result = simulate(
        traces(GavelWorkload(100, 900.0, seed=20)), "fifo", "v100:36,p100:36,k80:36", throughputs=TABLE,
        mechanics="gavel", round_seconds=360, window=(0, 5), seed=20,
    )  # fmt: skip
    assert result.avg_jct_s == pytest.approx(avg_jct, rel=1e-9)
    assert result.utilization == pytest.approx(utilization, abs=1e-6)
    assert result.jobs_arrived == arrived
    assert {job.id: job.jct_s for job in result.jobs} == {j: pytest.approx(t, abs=1e-2) for j, t in per_job.items()}


RAN_OURSELVES = {"max_min_fairness_packed": (1800.0, 51691.048817, 0.258792)}
"""Rows we ran on the reference simulator ourselves (its generated-jobs driver as `reference_results.json` says,
-p max_min_fairness_packed -l 1800 -s 400 -e 600 -i 360 --seed 0, ECOS, cvxpy 1.7.5; one line of its packed max-min
patched to read a 1-element array with `.item()`, which numpy 2 requires): (lam, avg JCT, utilisation)."""


@pytest.mark.parametrize("exact", [True, False], ids=["reference-program", "class-program"])
def test_packed_max_min_against_the_reference_we_ran(exact: bool, traces: Callable[[GavelWorkload], Path]) -> None:
    """The reference's per-pair program gives its numbers exactly; our class program (the default) within 1%."""
    lam, avg_jct, utilization = RAN_OURSELVES["max_min_fairness_packed"]
    trace = traces(GavelWorkload(2500, lam, seed=0))
    mechanics = preset("gavel") if exact else replace(preset("gavel"), reference_policy_quirks=False)
    result = simulate(
        trace, "max_min_fairness_packed", "v100:36,p100:36,k80:36", throughputs=TABLE, mechanics=mechanics,
        round_seconds=360, window=(400, 600), seed=0,
    )  # fmt: skip
    assert result.avg_jct_s == pytest.approx(avg_jct, rel=1e-6 if exact else 0.01)
    assert result.utilization == pytest.approx(utilization, abs=1e-3 if exact else 0.01)


STATIC_RAN_OURSELVES = {
    "fifo_packed": (True, 68260.189870, 0.155003, 648221.191363),
    "min_total_duration_packed": (False, 84702.217993, 0.084289, 608916.418060),
}
"""Static rows we ran on the reference ourselves (`scripts/sweeps/run_sweep_static.py -c 36:36:36 -a 100 -b 100 -n 1
-i 360 --seeds 0 -p POLICY`, with `-m` where the first field is True; a stub `func_timeout` module): (multi-GPU, avg
JCT, utilisation, makespan). fifo_packed forms pairs there (130 pair rounds in the reference's log). The reference's
min_total_duration_packed cannot run the multi-GPU workload (its per-job constraint reshapes a list whose length is
not a multiple of the job count once gangs differ: GAVEL_SPEC §7 item 8), hence the single-GPU one."""


@pytest.mark.parametrize("policy", sorted(STATIC_RAN_OURSELVES))
def test_static_packed_rows_we_ran_on_the_reference(policy: str, traces: Callable[[GavelWorkload], Path]) -> None:
    multi_gpu, avg_jct, utilization, makespan = STATIC_RAN_OURSELVES[policy]
    trace = traces(GavelWorkload(100, 0.0, seed=0, multi_gpu=multi_gpu))
    result = simulate(
        trace, policy, "v100:36,p100:36,k80:36", throughputs=TABLE, mechanics=preset("gavel"), round_seconds=360,
    )  # fmt: skip
    assert result.avg_jct_s == pytest.approx(avg_jct, rel=1e-6)
    assert result.utilization == pytest.approx(utilization, abs=1e-3)
    assert result.makespan_s == pytest.approx(makespan, rel=1e-6)


DIFF = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "gavel_diff.json").read_text())["cells"]
QUICKEST = [min((c for c in DIFF if c["cell"]["policy"] == p), key=lambda c: c["ours"]["wall_s"]) for p in
            sorted({c["cell"]["policy"] for c in DIFF})]  # fmt: skip
"""The recorded random cell of each policy that our simulator runs fastest (`benchmarks/gavel_diff.py` recorded them
all, with the reference's commands and numbers)."""


@pytest.mark.parametrize("cell", QUICKEST, ids=lambda c: c["key"])
def test_recorded_random_cells_still_match(cell: dict[str, Any], traces: Callable[[GavelWorkload], Path]) -> None:
    """Each such cell as a user runs it (the trace's own seed, the preset's round): within 1% of the reference on
    the window's average JCT, and what the harness recorded of ours, so a change that moves a cell shows here."""
    c = cell["cell"]
    workload = GavelWorkload(10_000, float(c["lam"]), seed=int(c["seed"]), multi_gpu=bool(c["multi_gpu"]))
    cluster = ",".join(f"{t}:{n}" for t, n in zip(("v100", "p100", "k80"), c["cluster"], strict=True))
    result = simulate(
        traces(workload), c["policy"], cluster, throughputs=TABLE, mechanics="gavel", window=tuple(c["window"])
    )
    assert result.avg_jct_s == pytest.approx(cell["reference"]["avg_jct_s"], rel=0.01)
    assert result.avg_jct_s == pytest.approx(cell["ours"]["avg_jct_s"], rel=1e-9)
