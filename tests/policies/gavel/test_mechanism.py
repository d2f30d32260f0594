"""Gavel's round mechanism (spec §5.0) on hand-worked cases, with a fixed allocator so only the mechanism is tested;
and the checks every plan and every cluster string go through (`validate_plan`, `ClusterSpec.parse`).

Expected values are worked out by hand in the comments: round_seconds is 120 s (a job's time counter is re-seeded
with 60 s at each recompute) unless a case says otherwise.
"""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import pytest

from shockwave.core.cluster import ClusterSpec, Pool
from shockwave.core.errors import InputError
from shockwave.core.plan import Assignment, PlanError, RoundPlan, validate_plan
from shockwave.core.policy import SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.gavel.fifo import Fifo, FifoPolicy
from shockwave.policies.gavel.mechanism import AllocationInputs, GavelPolicy
from shockwave.workload_model.profile import JobProfile, build_profile
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import catalog_job


@cache
def _profile(gang: int) -> JobProfile:
    return build_profile(catalog_job("ResNet-18", 32, gang, 1563, "static", 0.0), load_throughputs(None))


def make_job(job_id: int, gang: int = 1, rate: float = 10.0, arrival: float = 0.0) -> JobState:
    """A static ResNet-18 job (one epoch at batch size 32) running at `rate` steps/s on v100."""
    spec = catalog_job("ResNet-18", 32, gang, 1563, "static", arrival).job()
    return JobState.admit(job_id, spec, _profile(gang), rates={"v100": rate})


def priority(policy: GavelPolicy, h: Harness, job_id: int) -> float:
    return policy.priorities(h.view, "v100")[job_id]


class FixedAllocator:
    """Returns the given allocations in turn (the last one again once they run out), restricted to active jobs;
    records the job ids of every call."""

    name = "fixed"
    heterogeneity_aware = True
    packs = False

    def __init__(self, *allocations: dict[int, float]) -> None:
        self.allocations = list(allocations)
        self.calls: list[list[int]] = []

    def allocate(self, inputs: AllocationInputs) -> dict[int, dict[str, float]]:
        allocation = self.allocations[min(len(self.calls), len(self.allocations) - 1)]
        self.calls.append(list(inputs.job_ids))
        return {j: {"v100": x} for j, x in allocation.items() if j in inputs.job_ids}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to take up."""


class Harness:
    """A policy, a view on `gpus` v100s and a clock the test moves; `plan()` returns the planned job ids."""

    def __init__(
        self,
        policy: GavelPolicy,
        gpus: int = 4,
        round_seconds: float = 120.0,
        start_s: float = 0.0,
        cluster: ClusterSpec | None = None,
    ) -> None:
        self.now = start_s
        self.policy = policy
        cluster = cluster or ClusterSpec.of(gpus)
        self.view = SchedulerView(time=lambda: self.now, round_seconds=round_seconds, cluster=cluster)

    def add(self, *jobs: JobState) -> None:
        for job in jobs:
            self.view.jobs[job.id] = job
            self.policy.job_added(self.view, job)

    def remove(self, job_id: int) -> None:
        self.policy.job_removed(self.view, self.view.jobs.pop(job_id))

    def ran(self, job_id: int, seconds: float) -> None:
        self.policy.round_executed(self.view, self.view.jobs[job_id], seconds, 1)

    def plan(self) -> list[int]:
        return [job for job, _ in self.typed_plan()]

    def typed_plan(self) -> list[tuple[int, str]]:
        plan = self.policy.plan(self.view)
        validate_plan(plan, self.view.cluster, self.view.jobs, self.policy.name)
        return [(a.jobs[0], a.gpu_type) for a in plan.assignments]


def gavel(*allocations: dict[int, float], interval: float = 1000.0) -> tuple[GavelPolicy, FixedAllocator]:
    allocator = FixedAllocator(*allocations)
    return GavelPolicy(allocator, min_realloc_interval_s=interval), allocator


# -- priorities ----------------------------------------------------------------------------------------------------
def test_at_the_first_recompute_priority_is_x_over_an_equal_share() -> None:
    policy, _ = gavel({0: 0.2, 1: 0.5, 2: 0.3})
    h = Harness(policy, gpus=4)
    h.add(make_job(0), make_job(1), make_job(2))
    # job_time 60 each, worker_time 180: fraction 1/3; priority = 3x = 0.6, 1.5, 0.9 -> 1, 2, 0
    assert h.plan() == [1, 2, 0]
    assert priority(policy, h, 1) == pytest.approx(1.5)
    assert policy.worker_time["v100"] == 180.0 and policy.job_time["v100"] == {0: 60.0, 1: 60.0, 2: 60.0}


def test_priority_divides_by_the_share_of_executed_time_received() -> None:
    policy, _ = gavel({0: 0.2, 1: 0.5, 2: 0.3})
    h = Harness(policy, gpus=2)
    h.add(make_job(0), make_job(1), make_job(2))
    assert h.plan() == [1, 2]
    h.ran(1, 120.0)
    h.ran(2, 120.0)
    # job_time 60, 180, 180; worker_time 180 + 240 = 420
    # priority 0.2 * 420/60 = 1.4; 0.5 * 420/180 = 1.1667; 0.3 * 420/180 = 0.7 -> 0, 1 (job 2 waits)
    assert h.plan() == [0, 1]
    assert priority(policy, h, 0) == pytest.approx(1.4)
    assert priority(policy, h, 1) == pytest.approx(0.5 * 420 / 180)
    assert priority(policy, h, 2) == pytest.approx(0.7)


def test_a_job_that_received_no_time_gets_share_times_1e9() -> None:
    policy, _ = gavel({0: 0.1, 1: 0.9})
    h = Harness(policy, gpus=1)
    h.add(make_job(0), make_job(1))
    h.plan()
    # a restored state where job 0 has had no time (fraction 0) and job 1 all of it (fraction 1)
    state = policy.state_dict() | {"job_time": {"v100": {"0": 0.0, "1": 100.0}}, "worker_time": {"v100": 100.0}}
    policy.load_state_dict(state)
    assert priority(policy, h, 0) == pytest.approx(0.1 * 1e9)  # 1e8
    assert priority(policy, h, 1) == pytest.approx(0.9)  # 0.9 / 1
    assert h.plan() == [0]
    # with no worker time at all every fraction is 0: 0.1e9 < 0.9e9 puts job 1 first
    policy.load_state_dict(state | {"worker_time": {"v100": 0.0}})
    assert priority(policy, h, 1) == pytest.approx(0.9e9)
    assert h.plan() == [1]


def test_a_job_without_a_rate_gets_priority_0_and_never_runs() -> None:
    policy, _ = gavel({0: 0.5, 1: 0.5})
    h = Harness(policy, gpus=4)
    h.add(make_job(0, rate=0.0), make_job(1))
    # 3 GPUs stay idle rather than run a job that cannot progress on v100
    assert h.plan() == [1]
    assert priority(policy, h, 0) == 0.0


# -- ties: deficit, then x -----------------------------------------------------------------------------------------
def test_deficits_are_settled_at_a_recompute_and_break_priority_ties() -> None:
    # first allocation 0.75 / 0.25, the second equal shares, so the order after it is decided by the deficits
    policy, allocator = gavel({0: 0.75, 1: 0.25}, {0: 0.3, 1: 0.3, 2: 0.3})
    h = Harness(policy, gpus=4)
    h.add(make_job(0), make_job(1))
    h.plan()  # recompute at t = 0
    for _ in range(8):  # job 0 runs 8 rounds (960 s), job 1 none
        h.ran(0, 120.0)
    h.now = 1200.0
    h.add(make_job(2, arrival=1200.0))
    # recompute at 1200 (elapsed 1200): deficit = x_old * 1200 - (job_time - 60)
    # job 0: 0.75 * 1200 - 960 = -60; job 1: 0.25 * 1200 - 0 = 300; job 2 (not in the old allocation): 0 - 0 = 0
    order = h.plan()
    assert allocator.calls == [[0, 1], [0, 1, 2]]
    assert policy.deficits["v100"] == {0: pytest.approx(-60.0), 1: pytest.approx(300.0), 2: 0.0}
    assert policy.job_time["v100"] == {0: 60.0, 1: 60.0, 2: 60.0} and policy.worker_time["v100"] == 180.0
    assert policy.last_realloc_s == 1200.0
    # equal priorities (0.3 / (1/3) = 0.9 each): by deficit 300 > 0 > -60
    assert order == [1, 2, 0]


def test_deficits_add_up_over_recomputes() -> None:
    policy, _ = gavel({0: 0.5, 1: 0.5}, interval=0.0)
    h = Harness(policy, gpus=1)
    h.add(make_job(0), make_job(1))
    h.plan()  # t = 0
    h.ran(0, 100.0)
    h.now = 200.0
    policy.round_failed(h.view, h.view.jobs[1])  # a change: recompute at 200
    h.plan()
    # 0: 0.5 * 200 - 100 = 0; 1: 0.5 * 200 - 0 = 100
    assert policy.deficits["v100"] == {0: pytest.approx(0.0), 1: pytest.approx(100.0)}
    h.ran(0, 50.0)
    h.ran(1, 30.0)
    h.now = 300.0
    policy.round_failed(h.view, h.view.jobs[1])
    h.plan()
    # elapsed 100: 0: 0 + 50 - 50 = 0; 1: 100 + 50 - 30 = 120
    assert policy.deficits["v100"] == {0: pytest.approx(0.0), 1: pytest.approx(120.0)}


def test_equal_priority_and_deficit_fall_back_to_the_larger_x() -> None:
    # round 128 s: re-seed 64 s, so every fraction below is exact in binary
    policy, _ = gavel({0: 0.125, 1: 0.25, 2: 0.0625})
    h = Harness(policy, gpus=4, round_seconds=128.0)
    h.add(make_job(0), make_job(1), make_job(2))
    h.plan()
    h.ran(1, 64.0)
    # job_time 64, 128, 64; worker_time 256: fractions 1/4, 1/2, 1/4
    # priority 0.125 * 4 = 0.5; 0.25 * 2 = 0.5; 0.0625 * 4 = 0.25; deficits all 0 -> x decides: 1 (0.25) before 0
    assert priority(policy, h, 0) == priority(policy, h, 1) == 0.5
    assert h.plan() == [1, 0, 2]


def test_the_deficit_comes_before_x() -> None:
    # round 128 s (re-seed 64 s); recompute whenever something changed
    policy, _ = gavel({0: 0.5, 1: 0.5, 2: 0.5}, {0: 0.125, 1: 0.25, 2: 0.0625}, interval=0.0)
    h = Harness(policy, gpus=4, round_seconds=128.0)
    h.add(make_job(0), make_job(1), make_job(2))
    h.plan()  # t = 0
    h.ran(1, 100.0)
    h.now = 200.0
    policy.round_failed(h.view, h.view.jobs[2])  # recompute at 200: deficit = 0.5 * 200 - executed = 100, 0, 100
    h.plan()
    assert policy.deficits["v100"] == {0: pytest.approx(100.0), 1: pytest.approx(0.0), 2: pytest.approx(100.0)}
    h.ran(1, 64.0)
    # as in the case above, priorities 0.5, 0.5, 0.25; jobs 0 and 1 tie: deficit 100 > 0 puts job 0 first although
    # job 1 has the larger x
    assert h.plan() == [0, 1, 2]


# -- the greedy fill -----------------------------------------------------------------------------------------------
def test_a_gang_that_does_not_fit_is_skipped_and_later_ones_still_fill() -> None:
    policy, _ = gavel({0: 0.5, 1: 0.4, 2: 0.1, 3: 0.05})
    h = Harness(policy, gpus=4)
    h.add(make_job(0, gang=2), make_job(1, gang=4), make_job(2, gang=2), make_job(3, gang=1))
    # equal fractions: order by x: 0 (2 GPUs, 2 left), 1 (4 > 2, skipped), 2 (2 GPUs, 0 left), 3 (none left)
    plan = h.policy.plan(h.view)
    assert plan.job_ids == [0, 2]
    assert [(a.jobs, a.gpu_type, a.gpus) for a in plan.assignments] == [((0,), "v100", 2), ((2,), "v100", 2)]


def test_a_job_outside_the_allocation_holds_gpus_without_running() -> None:
    # first arrivals at t = 10, so the recompute there leaves last_realloc_s = 10 (not the "== 0" quirk)
    policy, allocator = gavel({0: 1.0, 1: 0.0})
    h = Harness(policy, gpus=4, start_s=10.0)
    h.add(make_job(0, gang=2, arrival=10.0), make_job(1, gang=2, arrival=10.0))
    # job 1 has x = 0 (priority 0) but idle GPUs help nobody: it runs
    assert h.plan() == [0, 1]
    for _ in range(9):  # both run 9 rounds: 1080 s
        h.ran(0, 120.0)
        h.ran(1, 120.0)
    h.now = 1090.0
    policy.round_failed(h.view, h.view.jobs[0])  # a change, 1080 s after the last recompute
    assert h.plan() == [0, 1]
    # deficits: 0: 1.0 * 1080 - 1080 = 0; 1: 0 * 1080 - 1080 = -1080
    assert policy.deficits["v100"] == {0: pytest.approx(0.0), 1: pytest.approx(-1080.0)}
    h.now = 1210.0
    h.add(make_job(2, gang=2, arrival=1210.0))  # 120 s after the recompute: not recomputed, job 2 has no x
    # queue: 0 (priority > 0), 2 (priority 0, deficit 0), 1 (priority 0, deficit -1080)
    # job 0 takes 2 GPUs, job 2 takes the other 2 but is not run, job 1 no longer fits: 2 GPUs idle
    assert h.plan() == [0]
    assert allocator.calls == [[0, 1], [0, 1]]


# -- when the allocation is recomputed -----------------------------------------------------------------------------
def test_recompute_throttle_with_the_last_realloc_at_zero_quirk() -> None:
    policy, allocator = gavel({0: 0.5, 1: 0.5, 2: 0.5})
    h = Harness(policy, gpus=4)
    h.add(make_job(0))
    h.plan()
    assert allocator.calls == [[0]] and policy.last_realloc_s == 0.0
    h.plan()  # nothing changed: no recompute
    assert len(allocator.calls) == 1
    h.now = 120.0
    h.add(make_job(1, arrival=120.0))
    h.plan()  # 120 s < 1000 s, but the last recompute was at 0: recompute (spec notes §2.1)
    assert allocator.calls[-1] == [0, 1] and policy.last_realloc_s == 120.0
    h.now = 240.0
    h.add(make_job(2, arrival=240.0))
    assert h.plan() == [0, 1]  # 240 - 120 < 1000: job 2 waits outside the allocation
    assert len(allocator.calls) == 2
    h.now = 1119.0
    h.plan()  # 999 s
    assert len(allocator.calls) == 2
    h.ran(0, 120.0)
    h.now = 1120.0
    # 1000 s: recompute. Deficits (x 0.5 each, job 0 ran 120 s):
    # at 120 (elapsed 120): job 0: 0.5 * 120 - 0 = 60; at 1120 (elapsed 1000): job 0: 60 + 500 - 120 = 440,
    # job 1: 0 + 500 - 0 = 500, job 2 (outside the old allocation): 0. Priorities tie (0.5 * 3): 1, 0, 2
    assert h.plan() == [1, 0, 2]
    assert policy.deficits["v100"] == {0: pytest.approx(440.0), 1: pytest.approx(500.0), 2: 0.0}
    assert allocator.calls[-1] == [0, 1, 2] and policy.last_realloc_s == 1120.0
    h.now = 9000.0
    h.plan()  # long after, but nothing changed
    assert len(allocator.calls) == 3


def test_without_the_quirk_a_first_recompute_after_zero_throttles() -> None:
    policy, allocator = gavel({0: 0.5, 1: 0.5})
    h = Harness(policy, gpus=4, start_s=50.0)
    h.add(make_job(0, arrival=50.0))
    h.plan()  # first recompute at 50
    h.now = 170.0
    h.add(make_job(1, arrival=170.0))
    assert h.plan() == [0]  # 120 s after 50 (not 0): no recompute
    assert allocator.calls == [[0]]
    h.now = 1050.0
    # 1000 s after 50: recompute. Deficits over elapsed 1000 s, no rounds reported: job 0: 0.5 * 1000 - 0 = 500;
    # job 1 (outside the old allocation): 0. Priorities tie (0.5 / (60/120) = 1.0), the deficit puts job 0 first.
    assert h.plan() == [0, 1]
    assert allocator.calls == [[0], [0, 1]] and policy.last_realloc_s == 1050.0
    assert policy.deficits["v100"] == {0: pytest.approx(500.0), 1: 0.0}


def test_removing_a_job_triggers_a_recompute_and_forgets_it() -> None:
    policy, allocator = gavel({0: 0.5, 1: 0.5}, interval=0.0)
    h = Harness(policy, gpus=1)
    h.add(make_job(0), make_job(1))
    h.plan()
    h.now = 120.0
    h.remove(0)
    assert 0 not in policy.job_time and 0 not in policy.deficits and policy.needs_realloc
    assert h.plan() == [1]
    assert allocator.calls == [[0, 1], [1]]


# -- FIFO: a strict queue ------------------------------------------------------------------------------------------
def test_fifo_never_lets_a_priority_0_job_take_idle_gpus() -> None:
    h = Harness(FifoPolicy(), gpus=4)
    h.add(make_job(0, gang=2), make_job(1, gang=4), make_job(2, gang=1))
    # Fifo: job 0 takes 2 GPUs, job 1 (4) does not fit and blocks job 2: x = 1, 0, 0
    assert h.plan() == [0]  # 2 GPUs stay idle although job 2 fits
    h.now = 120.0
    h.remove(0)  # recomputed (last at 0): job 1 takes all 4 GPUs, job 2 still waits
    assert h.plan() == [1]


def test_the_same_allocation_without_fifos_rule_fills_idle_gpus() -> None:
    h = Harness(GavelPolicy(Fifo()), gpus=4)
    h.add(make_job(0, gang=2), make_job(1, gang=4), make_job(2, gang=1))
    # job 0 (priority 3), then 1 (4 GPUs > 2 left: skipped), then 2 (x = 0, in the allocation, fits)
    assert h.plan() == [0, 2]


# -- several GPU types (spec §4.3) ----------------------------------------------------------------------------------
class TypedAllocator(FixedAllocator):
    """One allocation by job and type, for a policy that is (or is not) heterogeneity-aware."""

    def __init__(self, allocation: dict[int, dict[str, float]], *, aware: bool = True) -> None:
        super().__init__()
        self.allocation, self.heterogeneity_aware = allocation, aware

    def allocate(self, inputs: AllocationInputs) -> dict[int, dict[str, float]]:
        self.calls.append(list(inputs.job_ids))
        return {j: x for j, x in self.allocation.items() if j in inputs.job_ids}


def typed_harness(
    allocation: dict[int, dict[str, float]], cluster: str, *, aware: bool = True, seed: int = 0
) -> Harness:
    return Harness(GavelPolicy(TypedAllocator(allocation, aware=aware), seed=seed), cluster=ClusterSpec.parse(cluster))


def typed_job(job_id: int, **rates: float) -> JobState:
    spec = catalog_job("ResNet-18", 32, 1, 1563, "static", 0.0).job()
    return JobState.admit(job_id, spec, _profile(1), rates=rates)


def test_queues_are_taken_v100_then_p100_then_k80() -> None:
    h = typed_harness({0: {"k80": 1.0}, 1: {"p100": 1.0}, 2: {"v100": 1.0}}, "k80:1,p100:1,v100:1")
    h.add(*(typed_job(j, k80=1.0, p100=2.0, v100=3.0) for j in range(3)))
    assert h.typed_plan() == [(2, "v100"), (1, "p100"), (0, "k80")]


def test_a_job_goes_to_the_first_type_whose_queue_reaches_it() -> None:
    # fractions all 1/2 after the reseed: on v100, priorities 0.6 / 0.5 = 1.2 (job 0) and 0.8 (job 1): job 0 takes
    # the v100; on k80 job 1 (1.2) comes first
    h = typed_harness({0: {"v100": 0.6, "k80": 0.4}, 1: {"v100": 0.4, "k80": 0.6}}, "v100:1,k80:1")
    h.add(typed_job(0, k80=1.0, v100=4.0), typed_job(1, k80=1.0, v100=4.0))
    assert h.typed_plan() == [(0, "v100"), (1, "k80")]
    # the time run is credited to the type the job ran on: k80's records move, v100's do not
    h.ran(1, 100.0)
    assert h.policy.job_time["k80"] == {0: 60.0, 1: 160.0} and h.policy.worker_time["k80"] == 220.0
    assert h.policy.job_time["v100"] == {0: 60.0, 1: 60.0} and h.policy.worker_time["v100"] == 120.0


def test_a_type_the_job_cannot_run_on_is_passed_over() -> None:
    h = typed_harness({0: {"v100": 0.9, "k80": 0.1}}, "v100:1,k80:1")
    h.add(typed_job(0, k80=1.0))  # no v100 rate at all
    assert h.typed_plan() == [(0, "k80")]


def test_agnostic_policies_shuffle_the_type_order_every_round_with_seed_plus_5() -> None:
    h = typed_harness({0: {"v100": 0.5, "k80": 0.5}}, "k80:1,v100:1", aware=False, seed=7)
    h.add(typed_job(0, k80=1.0, v100=1.0))
    shuffler, landed = random.Random(12), []
    for _ in range(12):
        order = ["v100", "k80"]
        shuffler.shuffle(order)
        landed.append(order[0])
    assert [h.typed_plan()[0][1] for _ in range(12)] == landed
    assert set(landed) == {"v100", "k80"}
    aware = typed_harness({0: {"v100": 0.5, "k80": 0.5}}, "k80:1,v100:1", seed=7)
    aware.add(typed_job(0, k80=1.0, v100=1.0))
    assert {aware.typed_plan()[0][1] for _ in range(12)} == {"v100"}


# -- validate_plan: every refusal ----------------------------------------------------------------------------------
def plan_of(*assignments: tuple[tuple[int, ...], str, int]) -> RoundPlan:
    return RoundPlan(tuple(Assignment(jobs, gpu_type, gpus) for jobs, gpu_type, gpus in assignments))


@pytest.fixture
def jobs() -> dict[int, JobState]:
    made = {0: make_job(0, gang=1), 1: make_job(1, gang=1), 2: make_job(2, gang=2), 3: make_job(3, gang=1)}
    for job in made.values():
        job.rates["k80"] = 2.5
    return made


def test_valid_plans_pass(jobs: dict[int, JobState]) -> None:
    cluster = ClusterSpec.parse("v100:4,k80:2")
    # 1 + 2 = 3 of 4 v100s; a pair sharing one k80
    validate_plan(plan_of(((0,), "v100", 1), ((2,), "v100", 2), ((1, 3), "k80", 1)), cluster, jobs, "p")
    validate_plan(RoundPlan(), cluster, jobs, "p")


@pytest.mark.parametrize(
    ("assignments", "why"),
    [
        ([((0,), "p100", 1)], "'p100', a GPU type the cluster does not have"),
        ([((7,), "v100", 1)], "job 7 is not active"),
        ([((0,), "v100", 1), ((0,), "v100", 1)], "job 0 is planned twice"),
        ([((0, 1), "v100", 1), ((1,), "v100", 1)], "job 1 is planned twice"),
        ([((2,), "v100", 1)], "job 2 needs a gang of 2 GPUs, given 1"),
        ([((0, 2), "v100", 1)], "job 2 needs a gang of 2 GPUs, given 1"),
        (
            [((2,), "v100", 2), ((0,), "v100", 1), ((1,), "v100", 1), ((3,), "v100", 1)],
            "5 v100 GPUs planned, the cluster has 4",
        ),
        ([((0, 1, 3), "v100", 1)], "3 jobs share GPUs (0, 1, 3)"),
        ([((), "v100", 1)], "0 jobs share GPUs"),
    ],
)
def test_each_impossible_plan_is_refused(
    jobs: dict[int, JobState], assignments: list[tuple[tuple[int, ...], str, int]], why: str
) -> None:
    with pytest.raises(PlanError, match=r"^policy 'mine' planned an impossible round: ") as refused:
        validate_plan(plan_of(*assignments), ClusterSpec.of(4), jobs, "mine")
    assert why in str(refused.value)


def test_a_job_planned_where_it_cannot_run_is_refused(jobs: dict[int, JobState]) -> None:
    """A batch-size switch can leave a job without a rate on a type (ResNet-50 at 128 on a K80)."""
    del jobs[0].rates["k80"]
    with pytest.raises(PlanError, match="job 0 cannot run on k80 at batch size 32"):
        validate_plan(plan_of(((0,), "k80", 1)), ClusterSpec.parse("v100:4,k80:2"), jobs, "mine")


# -- ClusterSpec.parse ---------------------------------------------------------------------------------------------
def test_parse_one_pool() -> None:
    cluster = ClusterSpec.parse("v100:32")
    assert cluster.pools == (Pool("v100", 32, 1),)
    assert cluster.gpus == 32 and cluster.default_type == "v100"


def test_parse_pools_with_their_own_server_sizes() -> None:
    cluster = ClusterSpec.parse("v100:8:4,k80:4", gpus_per_server=2)
    # v100: 8 GPUs in servers of 4 (servers 0-1); k80 takes the default 2 per server (servers 2-3)
    assert cluster.pools == (Pool("v100", 8, 4), Pool("k80", 4, 2))
    assert cluster.gpus == 12 and cluster.types == ("v100", "k80")
    assert cluster.gpu_ids("k80") == range(8, 12)
    # GPU 9 is the k80 pool's second GPU: server 2 + 1 // 2 = 2; GPU 11: 2 + 3 // 2 = 3; GPU 7: 7 // 4 = 1
    assert [cluster.server_of(g) for g in (7, 9, 11)] == [1, 2, 3]
    assert cluster.describe() == "v100:8:4,k80:4:2"


def test_parse_tolerates_spaces_and_capitals() -> None:
    assert ClusterSpec.parse(" V100 : 4 , k80:2:2 ").pools == (Pool("v100", 4, 1), Pool("k80", 2, 2))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "v100",
        "v100:",
        ":4",
        "4:v100",
        "v100:four",
        "v100:-1",
        "v100:0",
        "v100:8:3",
        "v100:8:0",
        "v100:4,",
        "v100:4,v100:2",
        "v100:4;k80:4",
        "v100:2000000",
    ],
)
def test_parse_refuses_bad_strings(text: str) -> None:
    with pytest.raises(InputError):
        ClusterSpec.parse(text)


# -- Sia's port of the round robin (round_robin="sia") ---------------------------------------------------------------
def sia_harness(allocation: dict[int, dict[str, float]], cluster: str) -> Harness:
    policy = GavelPolicy(TypedAllocator(allocation, aware=True), round_robin="sia")
    return Harness(policy, cluster=ClusterSpec.parse(cluster))


def test_sias_port_offers_every_type_from_one_queue() -> None:
    allocation = {0: {"v100": 0.4, "k80": 0.6}, 1: {"v100": 0.2, "k80": 0.0}}
    jobs = [typed_job(0, k80=1.0, v100=4.0), typed_job(1, k80=1.0, v100=4.0)]
    # Gavel's v100 queue comes first: job 0 (0.4 / 0.5 = 0.8) takes the v100, job 1 the idle k80
    gavel_h = typed_harness(allocation, "v100:1,k80:1")
    gavel_h.add(*jobs)
    assert gavel_h.typed_plan() == [(0, "v100"), (1, "k80")]
    # one queue: job 0 on k80 (1.2) comes before job 0 on v100 (0.8), so job 1 gets the v100
    h = sia_harness(allocation, "v100:1,k80:1")
    h.add(*jobs)
    assert h.typed_plan() == [(0, "k80"), (1, "v100")]


def test_sias_port_keeps_its_time_records_and_credits_whole_rounds() -> None:
    h = sia_harness({0: {"v100": 0.5}, 1: {"v100": 0.5}}, "v100:1")
    h.add(typed_job(0, v100=1.0), typed_job(1, v100=1.0))
    assert h.policy.worker_time["v100"] == 120.0  # each new job adds its 60 s seed to the type's total
    assert h.typed_plan() == [(0, "v100")]  # a tie on (priority, x): table order
    h.ran(0, 30.0)  # finished early in the round: credited the whole 120 s round all the same
    assert h.policy.job_time["v100"] == {0: 180.0, 1: 60.0} and h.policy.worker_time["v100"] == 240.0
    assert h.typed_plan() == [(1, "v100")]  # recomputed, nothing reset: 0.5 / (60 / 240) beats 0.5 / (180 / 240)
    assert h.policy.job_time["v100"] == {0: 180.0, 1: 60.0}
    assert h.policy.allocator.calls == [[0, 1], [0, 1]]  # every round, though no job came or went


def test_sias_port_rounds_shares_to_5_decimals_so_near_equal_shares_tie() -> None:
    allocation = {0: {"v100": 0.333333333}, 1: {"v100": 0.333333334}}
    jobs = [typed_job(0, v100=1.0), typed_job(1, v100=1.0)]
    gavel_h = typed_harness(allocation, "v100:1")
    gavel_h.add(*jobs)
    assert gavel_h.typed_plan() == [(1, "v100")]  # the larger share, by 1e-9
    h = sia_harness(allocation, "v100:1")
    h.add(*jobs)
    assert h.typed_plan() == [(0, "v100")] and h.policy.allocation[1]["v100"] == 0.33333


def test_round_robin_is_a_mechanism_parameter_every_allocator_takes() -> None:
    from shockwave.policies.registry import POLICIES, policy_info

    takers = {name for name, info in POLICIES.items() if any(p.name == "round_robin" for p in info.params)}
    assert {"fifo", "fifo_perf", "fifo_packed", "max_sum_throughput_perf"} <= takers
    for name in takers:
        offered = POLICIES[name].offered(round_robin="sia", min_realloc_interval_s=1000.0)
        assert isinstance(offered, GavelPolicy) and offered.sia, name
    policy = policy_info("max_sum_throughput_perf").make({"round_robin": "sia"})
    assert isinstance(policy, GavelPolicy) and policy.sia
    with pytest.raises(InputError, match="parameter round_robin must be one of gavel, sia, got 'other'"):
        policy_info("max_sum_throughput_perf").make({"round_robin": "other"})
