"""`themis`: finish-time fairness estimates, the partial-allocation auction and the lease periods, checked on cases
worked out by hand, against brute force, and end to end in the simulator."""

from __future__ import annotations

import itertools
import json
import math
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from runtime_trace import write_runtime_trace
from shockwave.api import simulate
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.registry import ALIASES, POLICIES, make_policy
from shockwave.policies.themis import auction
from shockwave.policies.themis.auction import Bid, max_nash_welfare, partial_allocation, welfare_of
from shockwave.policies.themis.policy import ThemisPolicy
from shockwave.policies.themis.rho import current_rho, finish_after_lease, isolated_rate, lease_values
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.runtime.run import RunRequest, run
from shockwave.simulator.engine import Simulator
from shockwave.simulator.mechanics import preset
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.job import Job
from shockwave.workload_model.profile import JobProfile, build_profile
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import TraceJob, catalog_job, write_trace


@cache
def _profile(gang: int) -> JobProfile:
    return build_profile(catalog_job("ResNet-18", 32, gang, 1563, "static", 0.0), load_throughputs(None))


def make_job(
    job_id: int, gang: int, steps: float, *, done: float = 0.0, arrival: float = 0.0, **rates: float
) -> JobState:
    """A static job of `steps` steps (`done` of them done) running at `rates` steps/s per type (default v100: 1)."""
    spec = catalog_job("ResNet-18", 32, gang, 1563, "static", arrival).job()
    job = JobState.admit(job_id, spec, _profile(gang), rates=rates or {"v100": 1.0})
    job.total_steps, job.steps_done = steps, done
    return job


class Harness:
    """Drives a policy round by round over fixed jobs, the clock at round index x round length."""

    def __init__(self, policy: ThemisPolicy, cluster: str, jobs: list[JobState], round_s: float = 100.0) -> None:
        self.policy, self.clock = policy, [0.0]
        self.view = SchedulerView(
            lambda: self.clock[0], round_s, ClusterSpec.parse(cluster), {job.id: job for job in jobs}
        )

    def plan(self, round_index: int) -> RoundPlan:
        self.view.round_index, self.clock[0] = round_index, round_index * self.view.round_seconds
        return self.policy.plan(self.view)


def on(gpu_type: str, gpus: int, *job_ids: int) -> tuple[Assignment, ...]:
    return tuple(Assignment((j,), gpu_type, gpus) for j in job_ids)


# -- rho and valuations ----------------------------------------------------------------------------------------------
def test_isolated_rate_rho_and_lease_valuations_by_hand() -> None:
    cluster = ClusterSpec.parse("v100:2,k80:2")
    job = make_job(0, 2, 3000, v100=2.0, k80=1.0)
    # 2 jobs on 4 GPUs: s = min(1, 4/2) = 1; half the share is V100s, half K80s: r_iso = 0.5*2 + 0.5*1 = 1.5.
    r_iso = isolated_rate(job, cluster, active_jobs=2)
    assert r_iso == pytest.approx(1.5)
    # 8 jobs on 4 GPUs: s = 0.5.
    assert isolated_rate(job, cluster, active_jobs=8) == pytest.approx(0.75)
    assert current_rho(job, 0.0, r_iso) == pytest.approx(1.0)  # just arrived: on track
    # A 600 s lease, nothing done yet: without it the job finishes at 600 + 3000/1.5 = 2600 s; with the V100s at
    # 600 + (3000 - 1200)/1.5 = 1800 s, with the K80s at 600 + (3000 - 600)/1.5 = 2200 s.
    assert finish_after_lease(job, 0.0, r_iso, 600.0, 0.0) == pytest.approx(2600.0)
    values = lease_values(job, 0.0, r_iso, 600.0, {"v100": 2, "k80": 2})
    assert values == pytest.approx({"v100": math.log(2600 / 1800), "k80": math.log(2600 / 2200)})
    # Half done after 500 s: rho = (500 + 1500/1.5) / (3000/1.5) = 0.75 (it got more than its share).
    job.steps_done = 1500
    assert current_rho(job, 500.0, r_iso) == pytest.approx(0.75)
    # 600 steps left finish inside the lease on the V100s: 500 + 300 s, against 500 + 600 + 600/1.5 = 1500 s.
    job.steps_done = 2400
    assert lease_values(job, 500.0, r_iso, 600.0, {"v100": 2})["v100"] == pytest.approx(math.log(1500 / 800))


def test_types_a_job_cannot_use_are_worth_nothing() -> None:
    job = make_job(0, 2, 3000, v100=2.0, k80=0.0)
    r_iso = isolated_rate(job, ClusterSpec.parse("v100:2,k80:2"), 2)
    assert set(lease_values(job, 0.0, r_iso, 600.0, {"v100": 2, "k80": 2})) == {"v100"}
    assert lease_values(job, 0.0, r_iso, 600.0, {"v100": 1}) == {}  # its gang does not fit
    job.steps_done = 3000
    assert lease_values(job, 0.0, r_iso, 600.0, {"v100": 2}) == {}  # nothing left to do


# -- the auction -----------------------------------------------------------------------------------------------------
def bid(job_id: int, gang: int, **values: float) -> Bid:
    return Bid(job_id, gang, {t: math.log(v) for t, v in values.items()})


def test_pa_on_one_type_by_hand() -> None:
    # 4 GPUs. a (gang 2) values its gang 4x, b (gang 2) 3x, c (gang 4) 10x. Products: {a, b} 12, {c} 10: a and b win.
    # Without a the others' best is c alone (10, b and c need 6 GPUs): c_a = v_b / 10 = 0.3.
    # Without b: c alone (10) beats a alone (4): c_b = v_a / 10 = 0.4.
    bids = [bid(0, 2, v100=4), bid(1, 2, v100=3), bid(2, 4, v100=10)]
    outcome = partial_allocation(bids, {"v100": 4})
    assert outcome.won == {0: "v100", 1: "v100"}
    assert outcome.fractions == pytest.approx({0: 0.3, 1: 0.4})
    assert outcome.welfare == pytest.approx(math.log(12))


def test_pa_on_two_types_by_hand() -> None:
    # v100:2, k80:2, gangs of 2. a values V100 5x and K80 2x; b V100 4x and K80 3x.
    # a-V100 with b-K80: 15; a-K80 with b-V100: 8: x* = a on V100, b on K80.
    # Without a, b takes the V100s (4): c_a = 3/4. Without b, a still takes the V100s (5): c_b = 5/5 = 1.
    bids = [bid(0, 2, v100=5, k80=2), bid(1, 2, v100=4, k80=3)]
    outcome = partial_allocation(bids, {"v100": 2, "k80": 2})
    assert outcome.won == {0: "v100", 1: "k80"}
    assert outcome.fractions == pytest.approx({0: 0.75, 1: 1.0})


def test_a_gang_too_big_for_the_free_gpus_loses_and_no_bids_win_nothing() -> None:
    outcome = partial_allocation([bid(0, 8, v100=100), bid(1, 1, v100=1.5)], {"v100": 4})
    assert outcome.won == {1: "v100"} and outcome.fractions == {1: 1.0}
    assert partial_allocation([], {"v100": 4}).won == {}


def brute_force(bids: list[Bid], free: dict[str, int]) -> float:
    best = 0.0
    for choice in itertools.product(*[[None, *b.values] for b in bids]):
        used = dict.fromkeys(free, 0)
        for b, t in zip(bids, choice, strict=True):
            if t is not None:
                used[t] += b.gang
        if all(used[t] <= free[t] for t in free):
            best = max(best, sum(b.values[t] for b, t in zip(bids, choice, strict=True) if t is not None))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_dynamic_program_and_milp_find_the_brute_force_optimum_and_pa_fractions(seed: int) -> None:
    rng = random.Random(seed)
    types = ["v100", "k80"][: rng.randint(1, 2)]
    free = {t: rng.randint(1, 6) for t in types}
    bids = [
        Bid(i, rng.choice([1, 1, 2, 4]), {t: rng.uniform(0.05, 2.0) for t in types if rng.random() < 0.8})
        for i in range(rng.randint(1, 6))
    ]
    best = brute_force(bids, free)
    for method in ("dp", "milp"):
        won = max_nash_welfare(bids, free, method)
        assert welfare_of(bids, won) == pytest.approx(best, abs=1e-9), method
        for t in free:
            assert sum(b.gang for b in bids if won.get(b.job_id) == t) <= free[t]
    outcome = partial_allocation(bids, free)
    for i, b in enumerate(bids):
        if b.job_id in outcome.won:
            others = bids[:i] + bids[i + 1 :]
            expected = math.exp(outcome.welfare - b.values[outcome.won[b.job_id]] - brute_force(others, free))
            assert outcome.fractions[b.job_id] == pytest.approx(expected), b.job_id


def test_large_auctions_go_to_highs_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    bids = [Bid(i, rng.choice([1, 2, 4]), {"v100": rng.uniform(0.1, 1.0)}) for i in range(12)]
    dp = partial_allocation(bids, {"v100": 10})
    monkeypatch.setattr(auction, "DP_BUDGET", 0)
    milp = partial_allocation(bids, {"v100": 10})
    assert (dp.method, milp.method) == ("dp", "milp")
    assert milp.welfare == pytest.approx(dp.welfare)
    assert milp.fractions == pytest.approx(dp.fractions)


# -- lease periods ---------------------------------------------------------------------------------------------------
def four_jobs() -> list[JobState]:
    """On v100:4 (N = G = 4: s = 1, r_iso = rate = 1 step/s), all arrived at 0. A 600 s lease is worth
    v = (600 + R) / R to a job with R <= 600 steps left: a (gang 2, R 200) 4, b (gang 2, R 300) 3, c (gang 4,
    R 120) 6. d (gang 2) is half done, so rho_d = 500/1000 = 0.5 against 1 for the others."""
    return [
        make_job(0, 2, 200),
        make_job(1, 2, 300),
        make_job(2, 4, 120),
        make_job(3, 2, 1000, done=500),
    ]


def test_a_lease_period_by_hand() -> None:
    # f = 0.25: ceil(0.75 * 4) = 3 bidders, the highest rho: a, b, c (d is ahead of its fair share).
    # The auction (as in test_pa_on_one_type_by_hand, c now 6x): a and b win; c_a = 3/6 = 0.5, c_b = 4/6.
    # The lease is 6 rounds: a holds its gang for 3 rounds, b for 4. Withheld GPUs go first to d (it did not bid),
    # then to c (it lost, but needs 4 GPUs), then to winners whose lease ended: a in round 4.
    h = Harness(ThemisPolicy(lease_s=600.0, fairness_knob=0.25), "v100:4", four_jobs())
    plans = [h.plan(r).assignments for r in range(6)]
    assert h.policy.roles == {0: "winner", 1: "winner", 2: "bidder"}
    assert plans[0] == plans[1] == plans[2] == on("v100", 2, 0, 1)
    assert plans[3] == on("v100", 2, 1, 3)  # a's 3 rounds are over: d takes its GPUs to the end of the lease
    assert plans[4] == on("v100", 2, 3, 0)  # b's too: c does not fit in 2 GPUs, a (a winner) takes them
    assert plans[5] == on("v100", 2, 0, 3)
    assert h.policy.stats.gpu_rounds_withheld == 2 * (6 - 3) + 2 * (6 - 4)
    assert h.policy.stats.fraction_sum == pytest.approx(0.5 + 4 / 6)
    # Round 6 starts a new period: every lease has ended and a second auction is held.
    h.plan(6)
    assert h.policy.stats.auctions == 2 and h.policy.period_start == 6
    assert all(end <= 12 for _, end in h.policy.leases.values())


def test_a_finished_jobs_gpus_are_given_out_at_the_next_round() -> None:
    jobs = four_jobs()
    h = Harness(ThemisPolicy(lease_s=600.0, fairness_knob=0.25), "v100:4", jobs)
    assert h.plan(0).assignments == on("v100", 2, 0, 1)
    finished = h.view.jobs.pop(0)  # a completes during round 0
    h.policy.job_removed(h.view, finished)
    assert h.plan(1).assignments == on("v100", 2, 1, 3)  # d, which did not bid, takes a's GPUs


def test_pa_rounding_carries_over_so_winners_hold_their_fraction_on_average() -> None:
    h = Harness(ThemisPolicy(lease_s=500.0, fairness_knob=0.25), "v100:4", four_jobs())
    policy = h.policy
    policy.carry[0], policy.carry[1] = 0.3, 0.2
    h.plan(0)
    # A 500 s lease is worth (500 + R) / R: a 7/2, b 8/3, c 31/6; a and b win, c_a = v_b / v_c = 16/31 and
    # c_b = v_a / v_c = 21/31. a: 16/31 of 5 rounds (2.58) + 0.3 carried = 2.88 -> 3 rounds, -0.12 carried on;
    # b: 21/31 of 5 rounds (3.39) + 0.2 = 3.59 -> 4 rounds (3 without what it was owed), -0.41 carried on.
    assert policy.leases[0] == ("v100", 3) and policy.carry[0] == pytest.approx(5 * 16 / 31 + 0.3 - 3)
    assert policy.leases[1] == ("v100", 4) and policy.carry[1] == pytest.approx(5 * 21 / 31 + 0.2 - 4)


@pytest.mark.parametrize(("knob", "bidders"), [(0.0, 10), (0.5, 5), (0.8, 2), (0.95, 1)])
def test_the_one_minus_f_fraction_with_the_highest_rho_bids(knob: float, bidders: int) -> None:
    # At t = 1000 s, job k arrived at 100 k s and did nothing: rho_k = 1 + (1000 - 100 k) r_iso / steps, highest for
    # the earliest.
    jobs = [make_job(k, 1, 5000, arrival=100.0 * k) for k in range(10)]
    h = Harness(ThemisPolicy(lease_s=600.0, fairness_knob=knob), "v100:4", jobs)
    h.clock[0], h.view.round_index = 1000.0, 10
    h.policy.plan(h.view)
    assert sorted(h.policy.roles) == list(range(bidders))
    assert h.policy.stats.bidders == bidders


def test_bundles_are_per_type_on_a_heterogeneous_cluster() -> None:
    # v100:2, k80:2, 2 jobs: s = 1. a runs at 2 steps/s on V100 and 1 on K80 (r_iso 1.5), b at 2 on both (r_iso 2);
    # 3000 steps each, 600 s lease. v_a(V100) = 2600/1800, v_a(K80) = 2600/2200, v_b = 2100/1500 on either:
    # a-V100 with b-K80 beats a-K80 with b-V100; nobody is displaced, so both keep all of it (c = 1).
    jobs = [make_job(0, 2, 3000, v100=2.0, k80=1.0), make_job(1, 2, 3000, v100=2.0, k80=2.0)]
    h = Harness(ThemisPolicy(lease_s=600.0, fairness_knob=0.0), "v100:2,k80:2", jobs)
    assert set(h.plan(0).assignments) == {Assignment((0,), "v100", 2), Assignment((1,), "k80", 2)}
    assert h.policy.leases == {0: ("v100", 6), 1: ("k80", 6)}


# -- state, registry -------------------------------------------------------------------------------------------------
def test_state_dict_goes_through_json_and_the_copy_plans_the_same() -> None:
    h = Harness(ThemisPolicy(lease_s=300.0, fairness_knob=0.25), "v100:4", four_jobs())
    for r in range(4):
        h.plan(r)
    copy = ThemisPolicy(lease_s=300.0, fairness_knob=0.25)
    copy.load_state_dict(json.loads(json.dumps(h.policy.state_dict())))
    assert copy.state_dict() == h.policy.state_dict()
    twin = Harness(copy, "v100:4", [])
    twin.view.jobs = h.view.jobs
    for r in range(4, 12):
        assert twin.plan(r) == h.plan(r), r
    assert copy.state_dict() == h.policy.state_dict()


def test_registry_entry_parameters_and_alias() -> None:
    assert "themis" in POLICIES and "themis" not in ALIASES and "finish_time_fairness" in POLICIES
    policy = make_policy("themis", lease_s=240, fairness_knob=0.5)
    assert isinstance(policy, ThemisPolicy) and (policy.lease_s, policy.fairness_knob) == (240.0, 0.5)
    with pytest.raises(InputError, match="fairness_knob must be in"):
        make_policy("themis", fairness_knob=1.0)
    with pytest.raises(InputError, match="lease_s must be"):
        make_policy("themis", lease_s=0.0)
    with pytest.raises(InputError, match="has no parameter 'f'"):
        make_policy("themis", f=0.5)


# -- in the simulator ------------------------------------------------------------------------------------------------
class WorkConserving(Policy):
    """Wraps a policy and checks each of its plans: no job is left out that fits on idle GPUs of a type it runs on."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.name, self.plans_gpu_types = policy, policy.name, policy.plans_gpu_types
        self.rounds, self.types_used = 0, set[str]()

    def plan(self, view: SchedulerView) -> RoundPlan:
        plan = self.policy.plan(view)
        idle = {t: view.cluster.pool(t).gpus - plan.gpus_by_type()[t] for t in view.cluster.types}
        for job in view.jobs.values():
            if job.id not in plan.job_ids:
                fits = [t for t in idle if job.rate(t) > 0 and job.scale_factor <= idle[t]]
                assert not fits, f"round {view.round_index}: job {job.id} waits beside idle {fits} GPUs"
        self.rounds += 1
        self.types_used |= {a.gpu_type for a in plan.assignments}
        return plan

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        self.policy.job_added(view, job)

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        self.policy.job_removed(view, job)

    def summary(self) -> dict[str, Any]:
        return self.policy.summary()


def small_trace(jobs: int = 24) -> list[TraceJob]:
    params = GeneratorParams(jobs=jobs, min_hours=0.1, max_hours=0.5, lam=60.0, seed=3, gpu_mix=(0.5, 0.3, 0.2, 0.0))
    return generate(params, load_throughputs(None))


def small_workload(jobs: int = 24) -> tuple[list[Job], list[JobProfile]]:
    described = [line.job() for line in small_trace(jobs)]
    return described, [build_profile(job, load_throughputs(None)) for job in described]


@pytest.mark.parametrize("cluster", ["v100:4", "v100:2,p100:2,k80:4"])
def test_every_round_is_work_conserving_and_every_job_finishes(cluster: str) -> None:
    checked = WorkConserving(ThemisPolicy(lease_s=360.0))
    spec = ClusterSpec.parse(cluster)
    result = Simulator(*small_workload(), load_throughputs(None), spec, checked, preset("corrected")).run()
    assert result.summary["unfinished_jobs"] == [] and checked.rounds > 20
    assert checked.types_used == set(spec.types)
    assert result.summary["themis"]["auctions"] > 3


def test_simulate_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "small.trace"
    write_trace(small_trace(16), path)
    result = simulate(path, "themis", "v100:4")
    assert result.complete and result.policy == "themis" and len(result.jobs) == 16
    extra = result.to_json_dict()["themis"]
    assert extra["lease_s"] == 600.0 and extra["fairness_knob"] == 0.8 and extra["auctions"] > 0
    assert 0 < extra["mean_fraction"] <= 1


def test_the_runtime_runs_it(tmp_path: Path) -> None:
    trace = write_runtime_trace(tmp_path / "rt8.trace")
    req = RunRequest(trace=trace, policy="themis", gpus=4, out=tmp_path / "run", round_seconds=0.1, time_scale=4)
    result = run(req, lambda r: FakeBackend(r.gpus, steps_per_s=400.0))
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 8 and result["policy"] == "themis"
