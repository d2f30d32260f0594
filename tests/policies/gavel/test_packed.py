"""Space sharing (two jobs on the same GPUs): the table's pair entries, pairs in Gavel's mechanism, pairs in the
simulator, and the packing policies (gandiva, max_min_fairness_packed, fifo_packed) on cases worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shockwave.api import simulate
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.plan import validate_plan
from shockwave.core.policy import SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.gavel.fifo import FifoPacked
from shockwave.policies.gavel.finish_time_fairness import FinishTimeFairnessPacked
from shockwave.policies.gavel.gandiva import Gandiva
from shockwave.policies.gavel.max_min_fairness import MaxMinFairnessPacked
from shockwave.policies.gavel.mechanism import AllocationInputs, GavelPolicy
from shockwave.policies.gavel.min_total_duration import MinTotalDurationPacked
from shockwave.policies.gavel.packed import Combinations
from shockwave.workload_model.profile import build_profile
from shockwave.workload_model.throughput import TableThroughputs, load_throughputs
from shockwave.workload_model.trace import catalog_job, write_trace

R18, R50 = "ResNet-18 (batch size 32)", "ResNet-50 (batch size 32)"


def table(path: Path, pairs: dict[tuple[str, str], list[float]], alone: dict[str, float] | None = None) -> Path:
    """A one-type (v100) table: 1-GPU rates alone, and co-located pairs (first job's rate first)."""
    alone = alone or {R18: 10.0, R50: 5.0}
    entries: dict[str, dict[str, Any]] = {str((job, 1)): {"null": rate} for job, rate in alone.items()}
    for (job, other), rates in pairs.items():
        entries[str((job, 1))][str((other, 1))] = rates
    path.write_text(json.dumps({"v100": entries}))
    return path


# -- the table -----------------------------------------------------------------------------------------------------
def test_the_table_answers_pairs_it_lists_zeros_included(tmp_path: Path) -> None:
    tm = TableThroughputs.from_json(table(tmp_path / "t.json", {(R18, R50): [8.0, 3.0], (R50, R50): [0.0, 0.0]}))
    assert tm.colocated("ResNet-18", 32, "ResNet-50", 32, 1, "v100") == (8.0, 3.0)
    assert tm.colocated("ResNet-50", 32, "ResNet-50", 32, 1, "v100") == (0.0, 0.0)
    with pytest.raises(LookupError, match="sharing 1 GPU"):
        tm.colocated("ResNet-50", 32, "ResNet-18", 32, 1, "v100")  # the table lists (R18, R50) only
    assert tm.throughput("ResNet-18", 32, 1, "v100") == 10.0


@pytest.mark.parametrize("bad", [[8.0], [8.0, -1.0], [8.0, "fast"], "8,3", [8.0, float("nan")]])
def test_a_malformed_pair_entry_is_refused_naming_its_field(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"v100": {str((R18, 1)): {"null": 10.0, str((R50, 1)): bad}}}).replace("NaN", "NaN"))
    with pytest.raises(InputError, match=r"co-location entry") as refused:
        TableThroughputs.from_json(path)
    assert "v100/" in str(refused.value) and "ResNet-50" in str(refused.value)


# -- the mechanism --------------------------------------------------------------------------------------------------
def job(job_id: int, model: str = "ResNet-18", gang: int = 1) -> JobState:
    spec = catalog_job(model, 32, gang, 1000, "static", 0.0).job()
    rate = {"ResNet-18": 10.0, "ResNet-50": 5.0}[model]
    return JobState.admit(job_id, spec, build_profile(spec, load_throughputs(None)), rates={"v100": rate})


PAIRS = {("ResNet-18", "ResNet-50"): (8.0, 3.0), ("ResNet-18", "ResNet-18"): (6.0, 6.0)}


def colocated(a: JobState, b: JobState, gpu_type: str) -> tuple[float, float] | None:
    return PAIRS.get((a.family.name, b.family.name))


class FixedPacking:
    """Hands the mechanism a fixed allocation over jobs and pairs."""

    name, heterogeneity_aware, packs = "fixed", True, True

    def __init__(self, allocation: dict[Any, float]) -> None:
        self.allocation = allocation
        self.inputs: list[AllocationInputs] = []

    def allocate(self, inputs: AllocationInputs) -> dict[Any, dict[str, float]]:
        self.inputs.append(inputs)
        return {e: {"v100": self.allocation.get(e, 0.0)} for e in [*inputs.job_ids, *inputs.pairs]}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to take up."""


def view(gpus: int) -> SchedulerView:
    return SchedulerView(lambda: 0.0, 120.0, ClusterSpec.of(gpus), colocation=colocated)


def test_pairs_are_formed_only_where_the_table_knows_them_and_queue_after_their_later_job() -> None:
    v, policy = view(2), GavelPolicy(FixedPacking({}))
    for j in (job(0), job(1, "ResNet-50"), job(2, "ResNet-50"), job(3, gang=2)):
        v.jobs[j.id] = j
        policy.job_added(v, j)
    # (1, 2) is two ResNet-50s, which the table does not list; job 3's gang of 2 pairs with nobody
    assert list(policy.job_time["v100"]) == [0, 1, (0, 1), 2, (0, 2), 3]
    assert policy.job_time["v100"][(0, 1)] == 0.0 and policy.job_time["v100"][0] == 60.0
    policy.job_removed(v, v.jobs.pop(0))
    assert list(policy.job_time["v100"]) == [1, 2, 3]


def test_a_pair_runs_on_one_gang_and_its_round_is_counted_once_for_both_jobs() -> None:
    v, policy = view(1), GavelPolicy(FixedPacking({(0, 1): 0.6, 0: 0.4}))
    for j in (job(0), job(1, "ResNet-50")):
        v.jobs[j.id] = j
        policy.job_added(v, j)
    plan = policy.plan(v)
    validate_plan(plan, v.cluster, v.jobs, policy.name)
    # the recompute at 0 s resets every entry to half a round (60 s of 180): priorities 3 x 0.6 and 3 x 0.4
    assert [(a.jobs, a.gpus) for a in plan.assignments] == [((0, 1), 1)]
    assert policy.allocator.inputs[0].pairs == {(0, 1): {"v100": (8.0, 3.0)}}  # type: ignore[attr-defined]
    for member in (0, 1):
        policy.round_executed(v, v.jobs[member], 100.0, 1)
    assert policy.job_time["v100"][(0, 1)] == 160.0 and policy.worker_time["v100"] == 180.0 + 100.0
    state = json.loads(json.dumps(policy.state_dict()))
    again = GavelPolicy(FixedPacking({}))
    again.load_state_dict(state)
    assert again.job_time == policy.job_time and again.allocation == policy.allocation


# -- the packing allocators -----------------------------------------------------------------------------------------
def inputs(jobs: list[int], gpus: int, pairs: dict[tuple[int, int], tuple[float, float]], gangs: int = 1) -> Any:
    rates = {0: 10.0, 1: 5.0, 2: 10.0, 3: 5.0}
    return AllocationInputs(
        job_ids=jobs,
        gpu_types=("v100",),
        gpus_by_type=(gpus,),
        throughputs={j: {"v100": rates[j]} for j in jobs},
        scale_factors=dict.fromkeys(jobs, gangs),
        remaining_steps=dict.fromkeys(jobs, 1000),
        times_since_start=dict.fromkeys(jobs, 0.0),
        weights=dict.fromkeys(jobs, 1.0),
        pairs={p: {"v100": r} for p, r in sorted(pairs.items())},
    )


def test_max_min_packed_puts_two_jobs_that_share_well_together() -> None:
    # 1 GPU. Alone each job gets half the time: normalised throughput 0.5 each. Shared they run at 0.8 of their
    # rate alone (8/10, 4/5) all the time: 0.8 each, the max-min optimum.
    x = MaxMinFairnessPacked().allocate(inputs([0, 1], 1, {(0, 1): (8.0, 4.0)}))
    assert x[(0, 1)]["v100"] == pytest.approx(1.0, abs=1e-6)
    assert x[0]["v100"] == pytest.approx(0.0, abs=1e-6) and x[1]["v100"] == pytest.approx(0.0, abs=1e-6)


def test_max_min_packed_shares_nothing_when_sharing_is_slower() -> None:
    # Shared at 0.3 of their rates alone: worse than half the time alone each.
    x = MaxMinFairnessPacked().allocate(inputs([0, 1], 1, {(0, 1): (3.0, 1.5)}))
    assert x[(0, 1)]["v100"] == pytest.approx(0.0, abs=1e-6)
    assert x[0]["v100"] == pytest.approx(0.5, abs=1e-4) and x[1]["v100"] == pytest.approx(0.5, abs=1e-4)


def test_the_packed_rows_sum_each_jobs_own_rows_when_jobs_have_different_numbers_of_pairs() -> None:
    rows = Combinations.of(inputs([0, 1, 2], 2, {(0, 1): (8.0, 4.0)}))
    assert rows.entries == [0, 1, 2, (0, 1)] and rows.counts == [2, 2, 1]
    assert rows.index == [0, 3, 1, 3, 2]
    assert rows.rates.ravel().tolist() == [10.0, 8.0, 5.0, 4.0, 10.0]
    # job 2 has no pair: max-min still gives it its full GPU-equivalent share
    x = MaxMinFairnessPacked().allocate(inputs([0, 1, 2], 2, {(0, 1): (8.0, 4.0)}))
    assert sum(x[e]["v100"] for e in (0, 1, 2, (0, 1))) == pytest.approx(2.0, abs=1e-4)


def test_min_total_duration_packed_shares_where_it_shortens_the_horizon() -> None:
    # 1 GPU, 1000 steps left each, rates 10 and 5 alone, (8, 4) shared. Alone: x0 = 100/T, x1 = 200/T, so T = 300.
    # With the pair (dual: max u + v, 10u <= 1, 5v <= 1, 8u + 4v <= 1 -> 0.225): the pair for job 0's whole need
    # (8 xp = 1000/T) and job 1 alone for the rest, xp + x1 = 0.225 x 1000 / T <= 1: T = 225 (bisection: within 5%;
    # at a horizon above the optimum the program has slack, so the allocation is only pinned down by its horizon).
    x = MinTotalDurationPacked().allocate(inputs([0, 1], 1, {(0, 1): (8.0, 4.0)}))
    rate0 = 10 * x[0]["v100"] + 8 * x[(0, 1)]["v100"]
    rate1 = 5 * x[1]["v100"] + 4 * x[(0, 1)]["v100"]
    assert 225 <= max(1000 / rate0, 1000 / rate1) <= 225 * 1.05 + 1e-6
    assert x[(0, 1)]["v100"] > 0.3  # alone, the best horizon is 300 s


def test_finish_time_fairness_packed_shares_when_both_finish_sooner_together() -> None:
    # Two jobs at 10 steps/s alone, 8 each when shared, on 1 GPU: alone each gets half (rho 1), shared all the time
    # each runs at 8 against its isolated 5 (rho 0.625): the optimum shares throughout.
    x = FinishTimeFairnessPacked().allocate(inputs([0, 2], 1, {(0, 2): (8.0, 8.0)}))
    assert x[(0, 2)]["v100"] == pytest.approx(1.0, abs=1e-4)


def test_gandiva_shares_isolated_without_packing_while_the_jobs_fit() -> None:
    x = Gandiva(seed=0).allocate(inputs([0, 1], 2, {(0, 1): (8.0, 4.0)}))
    assert x == {0: {"v100": 1.0}, 1: {"v100": 1.0}, (0, 1): {"v100": 0.0}}


def test_gandiva_pairs_when_demand_exceeds_the_cluster_and_drops_pairs_that_do_not_pay() -> None:
    gandiva = Gandiva(seed=0)
    good = {(0, 1): (8.0, 4.0), (0, 2): (8.0, 8.0), (0, 3): (8.0, 4.0), (1, 2): (4.0, 8.0), (1, 3): (4.0, 4.0)}
    good |= {(2, 3): (8.0, 4.0)}
    x = gandiva.allocate(inputs([0, 1, 2, 3], 2, good))
    assert len(gandiva.pairs) == 2 and {j for p in gandiva.pairs for j in p} == {0, 1, 2, 3}
    # two pairs share 2 GPUs: one each, all the time
    assert [x[p]["v100"] for p in gandiva.pairs] == [1.0, 1.0] and all(x[j]["v100"] == 0.0 for j in range(4))
    kept = list(gandiva.pairs)
    assert gandiva.allocate(inputs([0, 1, 2, 3], 2, good)) == x and gandiva.pairs == kept  # pairs persist
    # with room for all (4 GPUs) no pair is drawn, and pairs that stopped paying (0.2 + 0.2 < 1) are dropped
    gandiva.allocate(inputs([0, 1, 2, 3], 4, good))
    assert gandiva.pairs == kept
    gandiva.allocate(inputs([0, 1, 2, 3], 4, {p: (r[0] / 4, r[1] / 4) for p, r in good.items()}))
    assert gandiva.pairs == []


def test_fifo_packed_pairs_a_queued_job_with_its_best_partner_above_the_threshold() -> None:
    # 2 GPUs: jobs 0 and 1 run; job 2 waits and pairs with job 0 (8/10 + 8/10 = 1.6 > 1.5), not job 1 (1.2)
    x = FifoPacked().allocate(inputs([0, 1, 2, 3], 2, {(0, 2): (8.0, 8.0), (1, 2): (2.0, 8.0), (0, 3): (9.0, 5.0)}))
    assert {e for e, v in x.items() if v["v100"] == 1.0} == {1, (0, 2)}
    # job 3 found no partner left (job 0 is taken): the pass stops there


# -- the simulator --------------------------------------------------------------------------------------------------
def test_a_pair_runs_at_its_colocated_rates_and_both_end_with_the_slower(tmp_path: Path) -> None:
    tm = table(tmp_path / "t.json", {(R18, R50): [8.0, 4.0]})
    trace = tmp_path / "two.trace"
    write_trace(
        [catalog_job("ResNet-18", 32, 1, 8000, "static", 0.0), catalog_job("ResNet-50", 32, 1, 2000, "static", 0.0)],
        trace,
    )
    result = simulate(trace, "max_min_fairness_packed", "v100:1", throughputs=tm, round_seconds=100)
    # together all the time: job 1 needs 2000 / 4 = 500 s, job 0 8000 / 8 = 1000 s (alone after 500 s: then 10/s)
    jct = {j.id: j.jct_s for j in result.jobs}
    assert jct[1] == pytest.approx(500.0) and jct[0] == pytest.approx(500.0 + (8000 - 4000) / 10.0)
    assert result.utilization == pytest.approx(1.0)  # busy time is counted once for the pair
    alone = simulate(trace, "max_min_fairness_perf", "v100:1", throughputs=tm, round_seconds=100)
    assert alone.avg_jct_s > result.avg_jct_s


def test_packed_policies_form_no_pairs_without_a_table_that_lists_them(tmp_path: Path) -> None:
    trace = tmp_path / "two.trace"
    write_trace(
        [catalog_job("ResNet-18", 32, 1, 800, "static", 0.0), catalog_job("ResNet-50", 32, 1, 200, "static", 0.0)],
        trace,
    )
    packed = simulate(trace, "max_min_fairness_packed", "v100:1", round_seconds=100)
    plain = simulate(trace, "max_min_fairness_perf", "v100:1", round_seconds=100)
    assert packed.complete and packed.avg_jct_s == pytest.approx(plain.avg_jct_s)
