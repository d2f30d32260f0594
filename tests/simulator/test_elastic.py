"""Goodput-adaptive jobs in the simulator: restarts, learning, completion mid-round, and their state saved as data.
Times are hand-computed on the toy profile (tests/sia_files.py): one GPU of type a at batch 32 makes 5 progress a
second, the work is 30, a restart costs 30 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from shockwave.api import simulate
from shockwave.core.state import JobState
from shockwave.policies.sia.policy import SiaPolicy
from sia_files import toy_application, write_csv

HEADER = "name,time,application,num_replicas,batch_size"


def test_a_lone_job_starts_pays_its_restart_and_finishes_mid_round(sia_profiles: Path, tmp_path: Path) -> None:
    workload = write_csv(tmp_path / "one.csv", HEADER, ["toy-0,0,toy,2,64"])
    result = simulate(
        workload, "sia", "a:4:4", trace_format="sia", profiles=sia_profiles, round_seconds=60, mechanics="corrected"
    )
    # A new job gets one GPU at once; 30 s of restart, then 30 progress at 5 a second.
    assert result.complete and result.jobs[0].jct_s == pytest.approx(36.0)


def test_long_jobs_grow_restart_and_all_finish(tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    toy_application(profiles, "long", epoch_progress=1000.0)  # 3000 progress: 10 minutes on one GPU
    workload = write_csv(tmp_path / "long.csv", HEADER, [f"long-{i},{30 * i},long,2,64" for i in range(4)])
    result = simulate(workload, "sia", "a:8:4,b:8:8", trace_format="sia", profiles=profiles, round_seconds=60)
    assert result.complete and len(result.jobs) == 4
    assert result.model_extra["sia"]["restarts"] >= 4  # every job grows at least once
    assert all(30 + 3000 / (5 * 4) < j.jct_s < 30 + 3000 / 5 for j in result.jobs)  # faster than on one GPU


def test_rigid_policies_keep_the_gang_the_line_asks_for(sia_workload: Path, sia_profiles: Path) -> None:
    elastic = simulate(sia_workload, "sia", "a:8:4,b:8:8", trace_format="sia", profiles=sia_profiles)
    rigid = simulate(sia_workload, "fifo_perf", "a:8:4,b:8:8", trace_format="sia", profiles=sia_profiles)
    assert elastic.complete and rigid.complete and elastic.avg_jct_s != rigid.avg_jct_s


def test_what_an_elastic_job_learns_is_saved_as_data(sia_workload: Path, sia_profiles: Path) -> None:
    from shockwave.core.cluster import ClusterSpec
    from shockwave.workload_model.goodput import Training
    from shockwave.workload_model.profile import build_profile
    from shockwave.workload_model.sia.rigid import read_sia_workload

    jobs, _, tm = read_sia_workload(sia_workload, sia_profiles, ClusterSpec.parse("a:8:4"), elastic=True)
    job = JobState.admit(0, jobs[0], build_profile(jobs[0], tm, gpu_type="a"), {"a": 1.0})
    job.training, job.measured = Training(1, 32, 0, 2), {"a": [(1, 1, 32.0, 0.2, 0.0)]}
    restored = JobState.restore(0, jobs[0], job.profile, job.state_dict())
    assert (restored.training, restored.measured) == (job.training, job.measured)
    policy = SiaPolicy()
    allocations = policy.allocations
    allocations.current, allocations.restarts, allocations.restoring_until = {0: ("a", 2)}, {0: 3}, {0: 90.0}
    again = SiaPolicy()
    again.load_state_dict(policy.state_dict())
    assert (again.allocations.current, again.allocations.restarts) == ({0: ("a", 2)}, {0: 3})
    assert again.allocations.restoring_until == {0: 90.0}


@pytest.mark.parametrize("policy", ["sia", "pollux"])
@pytest.mark.parametrize(
    ("mechanics", "jcts"),
    [
        ("corrected", [36.0, 36.0]),  # at once: a restart, then 30 progress at 5/s
        ("sia", [60 + 36.0, 40 + 36.0]),  # Sia's fixed clock: planned at 60 s (the first round's end) and 20,040 s
    ],
)
def test_a_job_arriving_on_an_idle_cluster_waits_only_for_its_clock(
    policy: str, mechanics: str, jcts: list[float], sia_profiles: Path, tmp_path: Path
) -> None:
    workload = write_csv(tmp_path / "apart.csv", HEADER, ["toy-0,0,toy,2,64", "toy-1,20000,toy,2,64"])
    result = simulate(
        workload, policy, "a:4:4", trace_format="sia", profiles=sia_profiles, round_seconds=60, mechanics=mechanics
    )
    assert [j.jct_s for j in result.jobs] == pytest.approx(jcts)


def test_sia_refuses_a_lambda_that_starts_nothing(sia_workload: Path, sia_profiles: Path) -> None:
    from shockwave.core.errors import InputError

    with pytest.raises(InputError, match="lambda_n must be a number > 1 with p < 0"):
        simulate(
            sia_workload, "sia", "a:8:4", trace_format="sia", profiles=sia_profiles, policy_params={"lambda_n": 0.9}
        )


@pytest.mark.parametrize("mechanics", ["sia", "corrected"])
def test_a_rigid_gang_split_over_servers_runs_at_its_placements_speed(
    mechanics: str, sia_profiles: Path, tmp_path: Path
) -> None:
    from shockwave.core.cluster import ClusterSpec
    from shockwave.workload_model.sia.rigid import read_sia_workload

    workload = write_csv(tmp_path / "two.csv", HEADER, ["toy-0,0,toy,3,64", "toy-1,0,toy,3,64"])
    result = simulate(
        workload, "max_sum_throughput_perf", "a:8:4", trace_format="sia", profiles=sia_profiles, mechanics=mechanics
    )
    _, _, tm = read_sia_workload(workload, sia_profiles, ClusterSpec.parse("a:8:4"))
    packed, split = tm.placed("toy", 64, (3,), "a"), tm.placed("toy", 64, (1, 2), "a")
    assert packed is not None and split is not None and split < packed  # interpolated: two servers sync slower
    steps, ends = tm.steps("toy", 64), tm.epoch_ends("toy", 64)
    if mechanics == "sia":
        # first-fit: job 0 on GPUs 0-2, job 1 on GPU 3 and GPUs 4-5; both planned at the first round's end (Sia's 60 s),
        # each of the three epochs (all within the first round after the 30-s start) ending on a whole second
        assert result.round_seconds == 60
        epochs = [end - start for start, end in zip((0.0, *ends), ends, strict=False)]
        expected = [60 + 30 + sum(round(epoch / rate) for epoch in epochs) for rate in (packed, split)]
    else:
        # a whole server each, planned at once, both at the packed placement's speed
        expected = [30 + steps / packed] * 2
    assert [j.jct_s for j in result.jobs] == pytest.approx(expected)


def test_sias_mechanics_restart_a_rigid_gang_whose_servers_change_shape(sia_workload: Path, sia_profiles: Path) -> None:
    from shockwave.core.cluster import ClusterSpec
    from shockwave.policies.registry import policy_info
    from shockwave.simulator.engine import Simulator
    from shockwave.simulator.mechanics import preset
    from shockwave.workload_model.sia.rigid import read_sia_workload

    cluster = ClusterSpec.parse("a:8:4")
    jobs, profiles, tm = read_sia_workload(sia_workload, sia_profiles, cluster)
    for mechanics, restarts in (("sia", True), ("corrected", False)):
        policy = policy_info("max_sum_throughput_perf").make({})
        engine = Simulator(jobs, profiles, tm, cluster, policy, preset(mechanics))
        engine.view.jobs[0] = JobState.admit(0, jobs[0], profiles[0], {"a": 1.0})  # a gang of 2
        assert not engine._restarts(0, (0, 1), {0: (0, 1)})  # kept
        assert not engine._restarts(0, (4, 5), {0: (0, 1)})  # the same shape on another server
        assert engine._restarts(0, (3, 4), {0: (0, 1)}) is restarts  # now one GPU on each of two servers
        assert engine._restarts(0, (0, 1), {})  # it did not run the round before


@pytest.mark.parametrize("policy", ["sia", "shockwave"])
def test_an_adaptive_plan_does_not_depend_on_the_order_the_cluster_lists_its_types(
    policy: str, sia_workload: Path, sia_profiles: Path
) -> None:
    runs = [
        simulate(sia_workload, policy, cluster, trace_format="sia", profiles=sia_profiles, round_seconds=60)
        for cluster in ("a:8:4,b:8:8", "b:8:8,a:8:4")
    ]
    assert [(j.jct_s, j.finish_s) for j in runs[0].jobs] == [(j.jct_s, j.finish_s) for j in runs[1].jobs]


def test_sias_workloads_get_sias_mechanics_unless_another_is_named(sia_workload: Path, sia_profiles: Path) -> None:
    from shockwave.core.errors import InputError
    from shockwave.simulator.mechanics import Mechanics

    run = simulate(sia_workload, "fifo_perf", "a:8:4", trace_format="sia", profiles=sia_profiles)
    assert run.mechanics == "sia"
    named = simulate(sia_workload, "fifo_perf", "a:8:4", trace_format="sia", profiles=sia_profiles, mechanics="gavel")
    assert named.mechanics == "gavel"
    with pytest.raises(InputError, match="gavel_round_robin must be one of gavel, sia, got 'x'"):
        Mechanics(name="mine", gavel_round_robin="x")


def test_on_sias_clock_an_arrival_on_a_round_boundary_is_planned_then(sia_profiles: Path, tmp_path: Path) -> None:
    workload = write_csv(tmp_path / "edge.csv", HEADER, ["toy-0,0,toy,2,64", "toy-1,60,toy,2,64"])
    result = simulate(workload, "sia", "a:4:4", trace_format="sia", profiles=sia_profiles, round_seconds=60)
    # job 0 is planned at 60 s (the first round's end) and job 1, arriving then, in the same decision
    assert [j.jct_s for j in result.jobs] == pytest.approx([60 + 36.0, 36.0])


def test_sias_fixed_clock_refuses_a_replay(tmp_path: Path) -> None:
    from shockwave.core.errors import InputError

    with pytest.raises(InputError, match="--mechanics sia keeps a fixed clock of whole rounds"):
        simulate("canonical-120", "fifo", 32, mechanics="sia", batch_sizes=tmp_path / "batch_sizes.json")


@pytest.mark.parametrize(("policy", "job_1_per_server"), [("max_sum_throughput_perf", (1, 2)), ("pollux", (3,))])
def test_sias_first_fit_scan_places_gavels_gangs_and_sia_and_pollux_place_theirs_whole(
    policy: str, job_1_per_server: tuple[int, ...], sia_profiles: Path, tmp_path: Path
) -> None:
    from shockwave.core.cluster import ClusterSpec
    from shockwave.core.plan import Assignment, RoundPlan
    from shockwave.policies.registry import policy_info
    from shockwave.simulator.engine import Simulator
    from shockwave.simulator.mechanics import preset
    from shockwave.workload_model.sia.rigid import read_sia_workload

    workload = write_csv(tmp_path / "two.csv", HEADER, ["toy-0,0,toy,3,64", "toy-1,0,toy,3,64"])
    cluster = ClusterSpec.parse("a:8:4")
    jobs, profiles, tm = read_sia_workload(workload, sia_profiles, cluster)
    engine = Simulator(jobs, profiles, tm, cluster, policy_info(policy).make({}), preset("sia"))
    for i in (0, 1):
        engine.view.jobs[i] = JobState.admit(i, jobs[i], profiles[i], {"a": tm.throughput("toy", 64, 3, "a")})
    engine.launch(engine.loop, RoundPlan((Assignment((0,), "a", 3), Assignment((1,), "a", 3))))
    assert engine._per_server(engine.placements[-1][0]) == (3,)
    assert engine._per_server(engine.placements[-1][1]) == job_1_per_server


def test_a_job_whose_last_work_takes_no_whole_second_finishes(sia_profiles: Path, tmp_path: Path) -> None:
    from shockwave.core.cluster import ClusterSpec
    from shockwave.workload_model.sia.rigid import read_sia_workload

    workload = write_csv(tmp_path / "one.csv", HEADER, ["toy-0,0,toy,3,64"])
    _, _, tm = read_sia_workload(workload, sia_profiles, ClusterSpec.parse("a:8:4"))
    rate, ends = tm.placed("toy", 64, (3,), "a"), tm.epoch_ends("toy", 64)
    assert rate is not None
    first, second, last = (end - start for start, end in zip((0.0, *ends), ends, strict=False))
    # Rounds that leave 0.3 s of the last epoch to the job's second round: reached in 0 whole seconds, at its start.
    length = 30 + round(first / rate) + round(second / rate) + last / rate - 0.3
    result = simulate(
        workload, "max_sum_throughput_perf", "a:8:4", trace_format="sia", profiles=sia_profiles,
        round_seconds=length, mechanics="sia",
    )  # fmt: skip
    assert [j.jct_s for j in result.jobs] == pytest.approx([2 * length])  # planned at the first round's end
