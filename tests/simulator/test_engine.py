"""Simulator mechanics on small hand-made traces, placement, and the `simulate` command's contract."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import shockwave
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.loop import MAX_EMPTY_ROUNDS
from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.simulator.engine import Simulator
from shockwave.simulator.mechanics import Mechanics, preset
from shockwave.simulator.placement import place
from shockwave.simulator.run import simulate
from shockwave.workload_model.builtin_throughput import BuiltinThroughputs
from shockwave.workload_model.catalog import FAMILIES
from shockwave.workload_model.profile import build_profile
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import TraceJob, catalog_job, read_trace, write_trace


def job(model: str, bs: int, steps: int, arrival: float, sf: int = 1, mode: str = "static") -> TraceJob:
    return catalog_job(model, bs, sf, steps, mode, arrival, duration=100)


def trace_file(tmp_path: Path, *jobs: TraceJob) -> Path:
    path = tmp_path / "small.trace"
    write_trace(jobs, path)
    return path


def test_lone_job_runs_at_its_isolated_speed(tmp_path: Path) -> None:
    rate = BuiltinThroughputs().throughput("ResNet-18", 64, 2)
    steps = int(rate * 1000)
    result, _ = simulate(
        trace_file(tmp_path, job("ResNet-18", 64, steps, 0, sf=2)), "gavel", ClusterSpec.of(4), preset("reference")
    )
    assert result["makespan_s"] == pytest.approx(steps / rate, rel=1e-9)  # never preempted: no restart cost
    # T_iso counts whole epochs (D / bs per epoch), so a job alone finishes at or just under rho = 1.
    assert 0.95 < result["jobs"][0]["ftf"] <= 1.0
    assert result["utilization"] == pytest.approx(0.5, rel=1e-6)  # 2 of 4 GPUs busy throughout


def test_reference_stops_when_cluster_is_briefly_empty_corrected_runs_on(tmp_path: Path) -> None:
    rate = BuiltinThroughputs().throughput("LM", 20, 1)
    path = trace_file(tmp_path, job("LM", 20, int(rate * 200), 0), job("LM", 20, int(rate * 200), 5000))
    reference, _ = simulate(path, "gavel", ClusterSpec.of(2), preset("reference"))
    corrected, _ = simulate(path, "gavel", ClusterSpec.of(2), preset("corrected"))
    assert reference["unfinished_jobs"] == [1]
    assert corrected["unfinished_jobs"] == []
    work = int(rate * 200) / rate
    restart = Mechanics(name="x").restart_cost_s  # the late job's first full round pays the start-up cost
    assert 5000 + work < corrected["makespan_s"] <= 5000 + work + restart + 1


def test_restart_cost_is_charged_after_waiting(tmp_path: Path) -> None:
    rate = BuiltinThroughputs().throughput("LM", 20, 1)
    steps = int(rate * 600)
    path = trace_file(tmp_path, job("LM", 20, steps, 0), job("LM", 20, steps, 0))
    free, _ = simulate(path, "gandiva_fair", ClusterSpec.of(2), preset("reference"))
    shared, _ = simulate(path, "gandiva_fair", ClusterSpec.of(1), preset("reference"))
    lost = Mechanics(name="x").restart_cost_s
    assert free["makespan_s"] == pytest.approx(steps / rate, rel=1e-6)
    # Two jobs alternating on one GPU pay the restart cost on most rounds: makespan exceeds the pure work.
    assert shared["makespan_s"] > 2 * steps / rate + lost


def test_adaptive_jobs_change_batch_size(tmp_path: Path) -> None:
    lm = FAMILIES["LM"]
    # LM bs5 GNS doubles at epochs 31, 41, 61, 71; LM bs10 Accordion leaves its critical regime after epoch 10.
    path = trace_file(
        tmp_path,
        job("LM", 5, lm.iterations_per_epoch(5) * 80, 0, mode="gns"),
        job("LM", 10, lm.iterations_per_epoch(10) * 40, 0, mode="accordion"),
    )
    result, _ = simulate(path, "gavel", ClusterSpec.of(2), preset("reference"))
    assert [j["batch_size_changes"] for j in result["jobs"]] == [4, 1]


def gangs(*pairs: tuple[int, int], gpu_type: str = "v100") -> RoundPlan:
    return RoundPlan(tuple(Assignment((job,), gpu_type, size) for job, size in pairs))


def test_placement_keeps_previous_gpus_and_places_big_gangs_first() -> None:
    cluster = ClusterSpec.of(8)
    placement = place(gangs((1, 1), (2, 4), (3, 2)), {1: (5,), 3: (0, 1)}, cluster)
    assert placement[2] == (0, 1, 2, 3)  # the 4-GPU gang goes first and takes the lowest free GPUs
    assert placement[3] == (4, 5)  # its old GPUs were taken: the lowest free ones
    assert placement[1] == (6,)  # as in the reference, a bigger gang placed first may take a smaller job's GPU
    assert place(gangs((1, 1), (3, 2)), {1: (5,), 3: (0, 1)}, cluster) == {3: (0, 1), 1: (5,)}  # both kept


def test_placement_keeps_each_type_in_its_own_pool() -> None:
    cluster = ClusterSpec.parse("v100:4,k80:4:2")
    plan = RoundPlan((*gangs((2, 4)).assignments, *gangs((3, 2), (4, 1), gpu_type="k80").assignments))
    placement = place(plan, {3: (0, 1)}, cluster, consolidate=True)
    assert placement[2] == (0, 1, 2, 3)  # the V100 pool: GPUs 0-3
    assert set(placement[3]) | set(placement[4]) <= {4, 5, 6, 7}  # K80s are 4-7; job 3's old V100s are not K80s
    assert cluster.server_of(placement[3][0]) == cluster.server_of(placement[3][1])


def test_consolidation_packs_gangs_on_one_server() -> None:
    cluster = ClusterSpec.of(8, gpus_per_server=4)
    placement = place(gangs((1, 1), (2, 2), (3, 1)), {1: (1,)}, cluster, consolidate=True)
    servers = {cluster.server_of(g) for g in placement[2]}
    assert len(servers) == 1


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda p: simulate(p, "gavel", ClusterSpec.of(1), preset("reference")), "needs a gang of 2 GPUs"),
        (lambda p: simulate(p, "nope", ClusterSpec.of(4), preset("reference")), "unknown policy 'nope'"),
        (lambda p: ClusterSpec.of(0), "--gpus must be >= 1"),
        (lambda p: Mechanics(name="x", round_seconds=0), "--round-seconds must be > 0"),
        (lambda p: preset("fast"), "unknown mechanics"),
        (
            lambda p: simulate(p.with_name("missing.trace"), "gavel", ClusterSpec.of(4), preset("reference")),
            "trace file not found",
        ),
    ],
)
def test_bad_input(tmp_path: Path, build, words: str) -> None:  # type: ignore[no-untyped-def]
    path = trace_file(tmp_path, job("LM", 20, 1000, 0, sf=2))
    with pytest.raises(InputError, match=words):
        build(path)


def test_simulate_json_contract_and_out_dir(tmp_path: Path) -> None:
    path = trace_file(tmp_path, job("LM", 20, 20000, 0), job("ResNet-50", 32, 3000, 30, sf=2))
    result = shockwave(
        "simulate", "--trace", path, "--policy", "themis", "--gpus", 2, "--json", "--out", tmp_path / "out"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for key in (
        "policy",
        "trace",
        "gpus",
        "mechanics",
        "round_seconds",
        "makespan_s",
        "avg_jct_s",
        "worst_ftf",
        "unfair_fraction",
        "utilization",
        "num_rounds",
        "makespan_lower_bound_s",
        "wall_seconds",
        "jobs",
    ):
        assert key in data
    assert set(data["jobs"][0]) == {"id", "arrival_s", "finish_s", "jct_s", "t_isolated_s", "ftf", "batch_size_changes"}
    assert data["policy"] == "themis"
    assert json.loads((tmp_path / "out" / "result.json").read_text())["makespan_s"] == data["makespan_s"]
    rows = (tmp_path / "out" / "rounds.csv").read_text().splitlines()
    assert rows[0] == "round,time_s,running_jobs,busy_gpus" and len(rows) == data["num_rounds"] + 1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--gpus", "1"), "needs a gang of 2 GPUs"),
        (("--gpus", "0"), "--gpus must be >= 1"),
        (("--gpus", "4", "--round-seconds", "-5"), "--round-seconds must be > 0"),
        (("--gpus", "4", "--policy", "magic"), "unknown policy 'magic'"),
    ],
)
def test_simulate_bad_input_exits_nonzero(tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    path = trace_file(tmp_path, job("LM", 20, 1000, 0, sf=2))
    argv = ["simulate", "--trace", path, "--policy", "gavel", *args]
    if "--policy" in args:
        argv = ["simulate", "--trace", path, *args]
    result = shockwave(*argv)
    assert result.returncode == 2, result.stderr
    assert words in result.stderr
    missing = shockwave("simulate", "--trace", tmp_path / "none.trace", "--policy", "gavel", "--gpus", "4")
    assert missing.returncode == 2 and "trace file not found" in missing.stderr


# -- replaying the batch sizes a real run observed -----------------------------------------------------------------
SCHEDULE = [32] + [64] * 11


def replay(tmp_path: Path, schedules: object, restart_s: float = 20.0) -> dict:
    trace = trace_file(tmp_path, job("ResNet-18", 32, 1563 * 12, 0.0, mode="accordion"), job("LM", 20, 3000, 10.0))
    observed = tmp_path / "batch_sizes.json"
    observed.write_text(json.dumps(schedules))
    mech = preset("corrected").with_overrides(restart_cost_s=restart_s)
    return simulate(trace, "fifo", ClusterSpec.of(2), mech, batch_sizes=observed)[0]


def test_a_replayed_job_follows_its_observed_batch_sizes_and_pays_each_start(tmp_path: Path) -> None:
    result = replay(tmp_path, {"0": SCHEDULE})
    tm = BuiltinThroughputs()
    epoch = {bs: FAMILIES["ResNet-18"].dataset_size / bs / tm.throughput("ResNet-18", bs, 1) for bs in (32, 64)}
    first, second = result["jobs"]
    assert first["batch_size_changes"] == 1 and second["batch_size_changes"] == 0  # static jobs keep theirs
    assert first["t_isolated_s"] == pytest.approx(sum(epoch[bs] for bs in SCHEDULE))
    steady = replay(tmp_path, {"0": [32] * 12})["jobs"][0]
    assert steady["finish_s"] == pytest.approx(20.0 + 12 * epoch[32], abs=0.5)  # starts once, keeps its GPU
    free = replay(tmp_path, {"0": SCHEDULE}, restart_s=0.0)["jobs"][0]
    assert 20.0 < first["finish_s"] - free["finish_s"] <= 40.1  # it starts, and restarts to switch (whole steps)


def test_a_replayed_switch_within_a_round_costs_the_switch_and_goes_on_at_the_new_rate(tmp_path: Path) -> None:
    """The real job checkpoints at the epoch its batch size changes, starts again at the new size and trains on in
    the same round: 5 s start-up, an epoch at 32, 7 s to switch, two epochs at 64 (within a 120 s round)."""
    trace = trace_file(tmp_path, job("ResNet-18", 32, 1563 * 3, 0.0, mode="accordion"))
    observed = tmp_path / "batch_sizes.json"
    observed.write_text(json.dumps({"0": [32, 64, 64]}))
    tm = BuiltinThroughputs()
    epoch = {bs: FAMILIES["ResNet-18"].iterations_per_epoch(bs) / tm.throughput("ResNet-18", bs, 1) for bs in (32, 64)}
    assert 5 + epoch[32] + 7 + 2 * epoch[64] < 120
    mech = preset("corrected").with_overrides(restart_cost_s=5.0, switch_cost_by_gang={1: 7.0})
    done = simulate(trace, "fifo", ClusterSpec.of(1), mech, batch_sizes=observed)[0]["jobs"][0]
    assert done["batch_size_changes"] == 1
    assert done["finish_s"] == pytest.approx(5 + epoch[32] + 7 + 2 * epoch[64], abs=0.05)
    other_gang = preset("corrected").with_overrides(restart_cost_s=5.0, switch_cost_by_gang={2: 7.0})
    restarted = simulate(trace, "fifo", ClusterSpec.of(1), other_gang, batch_sizes=observed)[0]["jobs"][0]
    assert restarted["finish_s"] == pytest.approx(5 + epoch[32] + 5 + 2 * epoch[64], abs=0.05)  # the restart cost
    own = tmp_path / "measurements.json"  # a measured job's own switch and start-up
    own.write_text(json.dumps({"jobs": {"0": {"startups": [1.5], "switches": [2.5]}}}))
    measured = simulate(trace, "fifo", ClusterSpec.of(1), mech, batch_sizes=observed, measurements=own)[0]["jobs"][0]
    assert measured["finish_s"] == pytest.approx(1.5 + epoch[32] + 2.5 + 2 * epoch[64], abs=0.05)


def test_a_replayed_switch_that_outlasts_the_round_goes_on_starting_in_the_next(tmp_path: Path) -> None:
    """A switch 150 s long, begun after the first epoch of a 120 s round: the job starts again 30 s and more into
    the next round it keeps its GPU for."""
    trace = trace_file(tmp_path, job("ResNet-18", 32, 1563 * 2, 0.0, mode="accordion"))
    observed = tmp_path / "batch_sizes.json"
    observed.write_text(json.dumps({"0": [32, 64]}))
    tm = BuiltinThroughputs()
    epoch = {bs: FAMILIES["ResNet-18"].iterations_per_epoch(bs) / tm.throughput("ResNet-18", bs, 1) for bs in (32, 64)}
    mech = preset("corrected").with_overrides(restart_cost_s=0.0, switch_cost_by_gang={1: 150.0})
    done = simulate(trace, "fifo", ClusterSpec.of(1), mech, batch_sizes=observed)[0]["jobs"][0]
    assert done["finish_s"] == pytest.approx(epoch[32] + 150.0 + epoch[64], abs=0.05)


@pytest.mark.parametrize(
    ("schedules", "message"),
    [
        ({"0": [32, 64]}, "expected a list of 12 positive batch sizes"),
        ({"0": [*SCHEDULE[:11], 0]}, "expected a list of 12 positive batch sizes"),
        ({"7": SCHEDULE}, "'7' is not a job id of the trace (0..1)"),
        ([SCHEDULE], "expected an object"),
    ],
)
def test_bad_observed_batch_sizes_are_named(tmp_path: Path, schedules: object, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as error:
        replay(tmp_path, schedules)
    assert "batch_sizes.json" in str(error.value)


def test_a_measured_job_trains_at_its_own_rates_where_known_and_at_the_table_s_ratios_elsewhere(
    tmp_path: Path,
) -> None:
    """Three ResNet-18 jobs of one kind, each alone on a GPU: the second measured at half the table's rate at batch
    size 32 and a quarter at 64 trains at those; the third, measured only at 32, goes on at 64 by the table's ratio
    between the two sizes."""
    epochs = 3
    trace = trace_file(
        tmp_path,
        job("ResNet-18", 32, 1563 * epochs, 0.0),
        job("ResNet-18", 32, 1563 * epochs, 0.0, mode="accordion"),
        job("ResNet-18", 32, 1563 * epochs, 0.0, mode="accordion"),
    )
    tm = BuiltinThroughputs()
    rate = {bs: tm.throughput("ResNet-18", bs, 1) for bs in (32, 64)}
    steps = {bs: FAMILIES["ResNet-18"].iterations_per_epoch(bs) for bs in (32, 64)}
    observed, own = tmp_path / "batch_sizes.json", tmp_path / "measurements.json"
    observed.write_text(json.dumps({"1": [32, 64, 64], "2": [32, 64, 64]}))
    halved = {"v100": {"32": rate[32] / 2, "64": rate[64] / 4}}
    own.write_text(json.dumps({"jobs": {"1": {"rates": halved}, "2": {"rates": {"v100": {"32": 10.0}}}}}))
    mech = preset("corrected").with_overrides(restart_cost_s=0.0, switch_cost_by_gang={1: 0.0})
    jobs = simulate(trace, "fifo", ClusterSpec.of(3), mech, batch_sizes=observed, measurements=own)[0]["jobs"]
    assert jobs[0]["finish_s"] == pytest.approx(epochs * steps[32] / rate[32], rel=1e-6)
    assert jobs[1]["finish_s"] == pytest.approx(steps[32] / (rate[32] / 2) + 2 * steps[64] / (rate[64] / 4), rel=1e-3)
    scaled = 10.0 * rate[64] / rate[32]
    assert jobs[2]["finish_s"] == pytest.approx(steps[32] / 10.0 + 2 * steps[64] / scaled, rel=1e-3)
    assert jobs[1]["t_isolated_s"] == jobs[2]["t_isolated_s"]  # the table's T_iso: the same for both
    own.write_text(json.dumps({"jobs": {"1": {"rates": halved, "t_isolated_s": 1234.5}}}))
    again = simulate(trace, "fifo", ClusterSpec.of(3), mech, batch_sizes=observed, measurements=own)[0]["jobs"]
    assert again[1]["t_isolated_s"] == 1234.5 and again[1]["ftf"] == pytest.approx(again[1]["jct_s"] / 1234.5)


def test_a_measured_job_s_nth_start_costs_its_nth_measured_start_up_then_their_mean(tmp_path: Path) -> None:
    """Two jobs of 250 s share one GPU in 100 s rounds under max-min fairness. Job 0's starts cost what the run
    measured, 3 s then 7 s, and then (the run never started it a third time) their mean, 5 s; job 1, measured
    without start-ups, pays the mechanics' 11 s. Job 0 runs rounds 0 and 2 (97 + 93 s trained), job 1 rounds 1, 3
    and 4 (89 + 89 s, then it keeps its GPU), job 0 round 5."""
    rate = BuiltinThroughputs().throughput("ResNet-18", 32, 1)
    steps = int(rate * 250)
    trace = trace_file(tmp_path, job("ResNet-18", 32, steps, 0.0), job("ResNet-18", 32, steps, 0.0))
    own, nothing_observed = tmp_path / "measurements.json", tmp_path / "none.json"
    own.write_text(json.dumps({"jobs": {"0": {"startups": [3.0, 7.0]}, "1": {}}}))
    nothing_observed.write_text("{}")
    mech = preset("corrected").with_round_seconds(100.0).with_overrides(restart_cost_s=11.0)
    first, second = simulate(
        trace, "max_min_fairness", ClusterSpec.of(1), mech, batch_sizes=nothing_observed, measurements=own
    )[0]["jobs"]
    alone = steps / rate  # rounds train whole steps: within a step per round
    assert second["finish_s"] == pytest.approx(400 + alone - 2 * (100 - 11), abs=0.1)
    assert first["finish_s"] == pytest.approx(500 + 5 + alone - (100 - 3) - (100 - 7), abs=0.1)


def test_a_replayed_round_lasts_as_long_as_the_run_s_round_of_that_index(tmp_path: Path) -> None:
    """Job 0 (50 s) and job 1 (30 s) share one GPU under FIFO; a replayed round lasts its whole length, so job 1
    starts when round 0 ends: after the run's 70 s where it was measured, after the mean 100 s where not."""
    rate = BuiltinThroughputs().throughput("ResNet-18", 32, 1)
    trace = trace_file(tmp_path, job("ResNet-18", 32, int(rate * 50), 0.0), job("ResNet-18", 32, int(rate * 30), 0.0))
    nothing_observed, own = tmp_path / "none.json", tmp_path / "measurements.json"
    nothing_observed.write_text("{}")
    mech = preset("corrected").with_round_seconds(100.0).with_overrides(restart_cost_s=2.0)

    def second_finish(rounds: list[float]) -> float:
        own.write_text(json.dumps({"rounds": rounds}))
        result = simulate(trace, "fifo", ClusterSpec.of(1), mech, batch_sizes=nothing_observed, measurements=own)
        return result[0]["jobs"][1]["finish_s"]

    assert second_finish([70.0]) == pytest.approx(70 + 2 + 30, abs=0.1)
    assert second_finish([]) == pytest.approx(100 + 2 + 30, abs=0.1)


@pytest.mark.parametrize(
    ("jobs", "field", "message"),
    [
        ({"3": {}}, "jobs.3", "'3' is not a job id of the trace (0..1)"),
        ({"0": {"rates": {"k80": {"32": 1.0}}}}, "jobs.0.rates.k80", "GPU type 'k80' is not in the cluster (v100)"),
        ({"0": {"rates": {"v100": {"32": -1.0}}}}, "jobs.0.rates.v100.32", "steps per second, not -1.0"),
        ({"0": {"rates": {"v100": {"32": True}}}}, "jobs.0.rates.v100.32", "not True"),
        ({"0": {"rates": {"v100": {"0": 1.0}}}}, "jobs.0.rates.v100.0", "'0' is not a batch size"),
        ({"0": {"rates": {"v100": [1.0]}}}, "jobs.0.rates.v100", "expected an object"),
        ({"0": {"startups": [0.5, -1]}}, "jobs.0.startups[1]", "expected seconds from 0 to 1e+10, not -1"),
        ({"0": {"startups": 0.5}}, "jobs.0.startups", "expected a list of seconds"),
        (
            {"0": {"startup": [0.5]}},
            "jobs.0.startup",
            "unknown field 'startup' (rates, startups, switches, t_isolated_s)",
        ),
        ({"0": {"switches": [float("inf")]}}, "jobs.0.switches[0]", "expected seconds from 0 to 1e+10, not inf"),
        ({"0": {"t_isolated_s": 0}}, "jobs.0.t_isolated_s", "expected seconds above 0, at most 1e+10, not 0"),
        ({"0": {"rates": {"v100": {"32": "1e400"}}}}, "jobs.0.rates.v100.32", "steps per second, not 1000"),
        ({"00": {}}, "jobs.00", "'00' is not a job id of the trace (0..1)"),
        ({"9" * 5000: {}}, "jobs.999", "is not a job id of the trace (0..1)"),  # more digits than Python reads
        ({"0": {"rates": {"v100": {"032": 1.0}}}}, "jobs.0.rates.v100.032", "'032' is not a batch size"),
        ([], "jobs", "expected an object"),
    ],
)
def test_bad_measurements_are_named(tmp_path: Path, jobs: object, field: str, message: str) -> None:
    trace = trace_file(tmp_path, job("ResNet-18", 32, 100, 0.0), job("LM", 20, 100, 0.0))
    own, nothing_observed = tmp_path / "measurements.json", tmp_path / "none.json"
    own.write_text(json.dumps({"jobs": jobs}).replace('"1e400"', "1" + "0" * 400))  # an integer no float holds
    nothing_observed.write_text("{}")
    with pytest.raises(InputError, match=re.escape(message)) as error:
        simulate(trace, "fifo", ClusterSpec.of(2), preset("corrected"), batch_sizes=nothing_observed, measurements=own)
    assert "measurements.json" in str(error.value) and field in str(error.value)


@pytest.mark.parametrize(
    ("measurements", "field", "message"),
    [
        ({"rounds": [12.0, 1e-300]}, "rounds[1]", "a round lasts at least 0.01 s, not 1e-300"),
        ({"rounds": {"0": 12.0}}, "rounds", "expected a list of seconds"),
        ({"round": [12.0]}, "round", "unknown field 'round' (jobs, rounds)"),
        ([], "", "expected an object"),
    ],
)
def test_bad_measured_rounds_are_named(tmp_path: Path, measurements: object, field: str, message: str) -> None:
    trace = trace_file(tmp_path, job("ResNet-18", 32, 100, 0.0))
    own, nothing_observed = tmp_path / "measurements.json", tmp_path / "none.json"
    own.write_text(json.dumps(measurements))
    nothing_observed.write_text("{}")
    with pytest.raises(InputError, match=re.escape(message)) as error:
        simulate(trace, "fifo", ClusterSpec.of(1), preset("corrected"), batch_sizes=nothing_observed, measurements=own)
    assert "measurements.json" in str(error.value) and field in str(error.value)


def test_measurements_that_are_not_numbers_fail_in_one_line(tmp_path: Path) -> None:
    trace = trace_file(tmp_path, job("ResNet-18", 32, 100, 0.0))
    own, nothing_observed = tmp_path / "measurements.json", tmp_path / "none.json"
    own.write_text('{"jobs": {"0": {"rates": {"v100": {"32": NaN}}}}}')
    nothing_observed.write_text("{}")
    common = ("simulate", "--trace", trace, "--policy", "fifo", "--gpus", "1", "--measurements", own)
    result = shockwave(*common, "--batch-sizes", nothing_observed)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "measurements.json" in result.stderr and "not nan" in result.stderr
    alone = shockwave(*common)  # measurements replay a real run, whose batch sizes come with them
    assert alone.returncode != 0 and "Traceback" not in alone.stderr and "give its --batch-sizes too" in alone.stderr


def test_a_replayed_start_up_depends_on_the_gang_and_can_outlast_a_round(tmp_path: Path) -> None:
    trace = trace_file(tmp_path, job("ResNet-18", 32, 1563 * 4, 0.0), job("ResNet-18", 32, 1563 * 4, 0.0, sf=2))
    nothing_observed = tmp_path / "none.json"
    nothing_observed.write_text("{}")
    mech = preset("corrected").with_overrides(restart_cost_by_gang={1: 250.0, 2: 30.0})
    result = simulate(trace, "fifo", ClusterSpec.of(3), mech, batch_sizes=nothing_observed)[0]
    for record, start_up in zip(result["jobs"], (250.0, 30.0), strict=True):  # 250 s: two rounds and more, then on
        assert record["finish_s"] == pytest.approx(start_up + record["t_isolated_s"], abs=0.5)
    with pytest.raises(InputError, match="a restart cost must be >= 0"):
        preset("corrected").with_overrides(restart_cost_by_gang={4: -1.0})


def test_a_replayed_round_lasts_its_whole_length_as_the_runtime_s_do(tmp_path: Path) -> None:
    """The runtime decides at round ends only: a GPU a job frees mid-round idles until then, in a replay too (its
    replays were 5-10% short in makespan for it); the run ends with its last job, not at a round's end."""
    trace = trace_file(tmp_path, job("ResNet-18", 32, 1563, 0.0), job("ResNet-18", 32, 1563, 0.0))
    epoch = 1563 / BuiltinThroughputs().throughput("ResNet-18", 32, 1)
    assert 5 + epoch < 120
    nothing_observed = tmp_path / "none.json"
    nothing_observed.write_text("{}")
    mech = preset("corrected").with_overrides(restart_cost_s=5.0)
    replayed = simulate(trace, "fifo", ClusterSpec.of(1), mech, batch_sizes=nothing_observed)[0]
    first, second = replayed["jobs"]
    assert first["finish_s"] == pytest.approx(5 + epoch, abs=0.05)
    assert second["finish_s"] == pytest.approx(120 + 5 + epoch, abs=0.05)  # from the next round's start
    assert replayed["makespan_s"] == pytest.approx(second["finish_s"])
    simulated = simulate(trace, "fifo", ClusterSpec.of(1), mech)[0]["jobs"][1]
    assert simulated["finish_s"] < second["finish_s"] - 20  # the simulator's own rounds end with their last job


def test_simulate_reads_restart_costs_per_gang(tmp_path: Path) -> None:
    trace = trace_file(tmp_path, job("ResNet-18", 32, 1563, 0.0))
    bad = shockwave("simulate", "--trace", trace, "--gpus", 1, "--policy", "fifo", "--restart-seconds-by-gang", "1=5")
    assert bad.returncode == 2 and "GANG:SECONDS pairs, got '1=5'" in bad.stderr
    bad = shockwave("simulate", "--trace", trace, "--gpus", 1, "--policy", "fifo", "--switch-seconds-by-gang", "0:5")
    assert bad.returncode == 2 and "--switch-seconds-by-gang: gang sizes must be >= 1" in bad.stderr


class NeverPlans(Policy):
    name = "never_plans"

    def plan(self, view: SchedulerView) -> RoundPlan:
        return RoundPlan()


def test_a_policy_of_one_gpu_type_is_refused_a_cluster_of_several(tmp_path: Path) -> None:
    path = trace_file(tmp_path, job("ResNet-18", 64, 100, 0))
    jobs = [line.job() for line in read_trace(path)]
    profiles = [build_profile(jobs[0], load_throughputs(None))]
    with pytest.raises(InputError, match=r"schedules one GPU type; the cluster k80:4,v100:4 has 2"):
        Simulator(
            jobs, profiles, load_throughputs(None), ClusterSpec.parse("k80:4,v100:4"), NeverPlans(), preset("corrected")
        )


def test_a_policy_that_never_plans_its_jobs_ends_the_run_unfinished(tmp_path: Path) -> None:
    path = trace_file(tmp_path, job("ResNet-18", 64, 100, 0))
    jobs = [line.job() for line in read_trace(path)]
    profiles = [build_profile(jobs[0], load_throughputs(None))]
    engine = Simulator(jobs, profiles, load_throughputs(None), ClusterSpec.of(2), NeverPlans(), preset("corrected"))
    result = engine.run()
    assert result.summary["unfinished_jobs"] == [0] and not result.summary["complete"]
    assert len(result.rounds) == MAX_EMPTY_ROUNDS


def test_cluster_is_gpus_of_the_default_type_or_pools_by_type(tmp_path: Path) -> None:
    path = trace_file(tmp_path, job("ResNet-18", 64, 800, 0), job("ResNet-50", 64, 400, 10, sf=2))
    run = ["simulate", "--trace", str(path), "--policy", "gavel", "--json"]
    by_gpus, by_cluster = shockwave(*run, "--gpus", "4"), shockwave(*run, "--cluster", "v100:4")
    assert by_gpus.returncode == by_cluster.returncode == 0, by_cluster.stderr
    ours, theirs = json.loads(by_gpus.stdout), json.loads(by_cluster.stdout)
    assert ours["cluster"] == theirs["cluster"] == "v100:4" and ours["makespan_s"] == theirs["makespan_s"]
    both = shockwave(*run, "--gpus", "4", "--cluster", "v100:4")
    neither = shockwave(*run)
    small = shockwave("trace", "check", str(path), "--cluster", "v100:1")
    assert both.returncode == neither.returncode == small.returncode == 2
    assert "not both" in both.stderr and "one of them" in neither.stderr and "needs a gang of 2" in small.stderr
