"""Cost: prices files, the throughput-per-dollar policies (with and without SLOs, packed), and the GPU-hours, dollars
and SLO violations every simulated result reports, on cases worked out by hand."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import require_reference, shockwave
from shockwave.api import simulate
from shockwave.core.errors import InputError
from shockwave.policies.gavel.cost import (
    MaxSumThroughputNormalizedByCost,
    MaxSumThroughputNormalizedByCostPackedSLOs,
    MaxSumThroughputNormalizedByCostSLOs,
)
from shockwave.policies.gavel.max_sum_throughput import MaxSumThroughput
from shockwave.policies.gavel.mechanism import AllocationInputs
from shockwave.workload_model.gavel_generator import GavelWorkload, generate_gavel
from shockwave.workload_model.prices import DEFAULT_PRICES, Prices, read_prices
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import catalog_job, write_trace

CHEAP_K80 = Prices({"k80": 0.1, "v100": 1.0}, "test")
"""A k80 costs a tenth of a v100: a job at 2 steps/s there (20 per dollar) beats 10 steps/s on a v100 (10 per $)."""
R18, R50 = "ResNet-18 (batch size 32)", "ResNet-50 (batch size 32)"
TOL = 1e-4


def inputs(
    rates: dict[int, tuple[float, float]],
    gpus: tuple[int, int] = (1, 1),
    remaining: dict[int, int] | None = None,
    deadlines: dict[int, float] | None = None,
    pairs: dict[tuple[int, int], dict[str, tuple[float, float]]] | None = None,
) -> AllocationInputs:
    """Jobs with (k80, v100) rates on a cluster of k80 and v100 GPUs; `deadlines`: seconds left to each SLO's."""
    ids = sorted(rates)
    return AllocationInputs(
        ids,
        ("k80", "v100"),
        gpus,
        {j: {"k80": rates[j][0], "v100": rates[j][1]} for j in ids},
        dict.fromkeys(ids, 1),
        remaining or dict.fromkeys(ids, 1000),
        dict.fromkeys(ids, 0.0),
        dict.fromkeys(ids, 1.0),
        pairs=pairs or {},
        time_to_deadline_s=deadlines or {},
    )


def rows(allocation: dict[Any, dict[str, float]]) -> dict[Any, tuple[float, float]]:
    return {e: (round(x["k80"], 4), round(x["v100"], 4)) for e, x in allocation.items()}


# -- the policies ---------------------------------------------------------------------------------------------------
def test_the_cost_policy_puts_work_where_throughput_per_dollar_is_highest() -> None:
    # Two jobs at (k80 2, v100 10) steps/s, two GPUs of each type. Per dollar a k80 gives 20, a v100 10: both jobs
    # on k80s, the v100s idle; raw throughput puts both on v100s.
    two = inputs({0: (2.0, 10.0), 1: (2.0, 10.0)}, gpus=(2, 2))
    assert rows(MaxSumThroughputNormalizedByCost(CHEAP_K80).allocate(two)) == {0: (1, 0), 1: (1, 0)}
    assert rows(MaxSumThroughput().allocate(two)) == {0: (0, 1), 1: (0, 1)}


def test_an_slo_moves_a_job_onto_the_faster_dearer_type_just_enough() -> None:
    # 1000 steps in 500 s: 2 steps/s needed. Alone on a k80 it does 1. Time a on the v100 (10/s) and 1 - a on the k80
    # (2/s): 2 + 8a >= 2 holds at a = 0 -- so make it 1000 steps in 250 s, 4/s: 2 + 8a >= 4, a = 1/4; every bit more
    # v100 costs 20 - 10 = 10 throughput-per-dollar, so the optimum sits on the bound.
    one = inputs({0: (2.0, 10.0)}, remaining={0: 1000}, deadlines={0: 250.0})
    assert rows(MaxSumThroughputNormalizedByCost(CHEAP_K80).allocate(one)) == {0: (1, 0)}
    slo = MaxSumThroughputNormalizedByCostSLOs(CHEAP_K80)
    assert rows(slo.allocate(one)) == {0: (0.75, 0.25)} and slo.slo_fallbacks == 0


def test_infeasible_slos_fall_back_to_the_program_without_them() -> None:
    # 1000 steps in 50 s needs 20 steps/s: more than the v100 gives. No allocation meets it; solved without SLOs.
    slo = MaxSumThroughputNormalizedByCostSLOs(CHEAP_K80)
    assert rows(slo.allocate(inputs({0: (2.0, 10.0)}, deadlines={0: 50.0}))) == {0: (1, 0)}
    assert slo.slo_fallbacks == 1 and slo.state_dict() == {"slo_fallbacks": 1}
    # a deadline already passed sets no bound (the reference's is negative): no fallback either
    assert rows(slo.allocate(inputs({0: (2.0, 10.0)}, deadlines={0: -5.0}))) == {0: (1, 0)}
    assert slo.slo_fallbacks == 1


def test_the_packed_cost_policy_shares_a_gpu_when_it_pays_and_an_slo_limits_sharing() -> None:
    # One k80 only (no v100s). Alone each job does 1 step/s; together 0.8 each (1.6 for the GPU): share all the time.
    pair = {(0, 1): {"k80": (0.8, 0.8), "v100": (0.0, 0.0)}}
    shared = inputs({0: (1.0, 0.0), 1: (1.0, 0.0)}, gpus=(1, 0), pairs=pair)
    packed = MaxSumThroughputNormalizedByCostPackedSLOs(CHEAP_K80)
    assert rows(packed.allocate(shared)) == {0: (0, 0), 1: (0, 0), (0, 1): (1, 0)}
    # Job 0 needs 900 steps in 1000 s (0.9/s > 0.8): alone a, shared 1 - a; a + 0.8 (1 - a) >= 0.9 gives a >= 1/2,
    # and every bit alone loses 0.6 steps/s, so a = 1/2.
    late = dataclasses.replace(shared, remaining_steps={0: 900, 1: 1000}, time_to_deadline_s={0: 1000.0})
    assert rows(packed.allocate(late)) == {0: (0.5, 0), 1: (0, 0), (0, 1): (0.5, 0)}


def test_the_cost_policies_need_a_price_for_every_type() -> None:
    with pytest.raises(InputError, match="no price for GPU type 'v100'"):
        MaxSumThroughputNormalizedByCost(Prices({"k80": 1.0}, "k80 only")).allocate(inputs({0: (1.0, 2.0)}))


# -- prices files ---------------------------------------------------------------------------------------------------
def test_the_default_prices_are_gavels_gcp_prices() -> None:
    assert dict(DEFAULT_PRICES.by_type) == {"v100": 0.74, "p100": 0.43, "k80": 0.135}


def test_a_prices_file_reads_as_json_or_toml(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"name": "mine", "prices": {"V100": 2, "k80": 0.5}}')
    (tmp_path / "p.toml").write_text("[prices]\nv100 = 2\nk80 = 0.5\n")
    json_prices, toml_prices = read_prices(tmp_path / "p.json"), read_prices(tmp_path / "p.toml")
    assert json_prices.by_type == toml_prices.by_type == {"v100": 2.0, "k80": 0.5}
    assert json_prices.name == "mine" and toml_prices.name == "p.toml"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"prices": {"v100": -1}}', "field 'prices.v100': a price must be a positive number, got -1"),
        ('{"prices": {"v100": 0}}', "field 'prices.v100': a price must be a positive number"),
        ('{"prices": {"v100": "cheap"}}', "field 'prices.v100': a price is a number"),
        ('{"prices": {"v100": 1}, "currency": "EUR"}', "field 'currency': unknown key"),
        ('{"v100": 1}', "field 'v100': unknown key"),
        ('{"name": "x"}', "field 'prices': no 'prices'"),
        ('{"prices": {}}', "field 'prices': expected an object"),
        ("[1]", "expected an object"),
        ('{"prices": ', "not valid JSON"),
    ],
)
def test_a_bad_prices_file_is_refused_naming_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError, match=r"bad\.json") as caught:
        read_prices(path)
    assert message in str(caught.value)


def test_a_missing_prices_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.json: prices file not found"):
        read_prices(tmp_path / "nope.json")


# -- results --------------------------------------------------------------------------------------------------------
def two_job_case(tmp_path: Path, slo: float = -1.0) -> tuple[Path, Path, Path]:
    """A v100 and a k80. Job 0 (ResNet-18, 3600 steps): v100 10/s, k80 2/s. Job 1 (ResNet-50, 1800 steps): v100 5/s,
    k80 0.1/s. Both with SLO `slo` x 360 s. Prices v100 $1, k80 $0.1 per GPU-hour."""
    table = {
        "v100": {str((R18, 1)): {"null": 10.0}, str((R50, 1)): {"null": 5.0}},
        "k80": {str((R18, 1)): {"null": 2.0}, str((R50, 1)): {"null": 0.1}},
    }
    (tmp_path / "t.json").write_text(json.dumps(table))
    (tmp_path / "p.json").write_text(json.dumps({"name": "test", "prices": {"v100": 1.0, "k80": 0.1}}))
    jobs = [catalog_job("ResNet-18", 32, 1, 3600, "static", 0.0), catalog_job("ResNet-50", 32, 1, 1800, "static", 0.0)]
    write_trace([dataclasses.replace(j, slo=slo, duration=360) for j in jobs], tmp_path / "two.trace")
    return tmp_path / "two.trace", tmp_path / "t.json", tmp_path / "p.json"


def test_results_report_gpu_hours_and_their_cost_per_type(tmp_path: Path) -> None:
    trace, table, prices = two_job_case(tmp_path, slo=2.0)
    run = {
        p: simulate(trace, p, "v100:1,k80:1", throughputs=table, prices=prices, round_seconds=100).to_json_dict()
        for p in ("max_sum_throughput_perf", "max_sum_throughput_normalized_by_cost_perf")
    }
    # Raw throughput: job 0 on the v100 (10 - 2 = 8 gained vs 5 - 0.1), done at 360 s; job 1 on the k80 for the 4
    # rounds to 400 s (40 steps), then on the v100, where its move costs the 20 s restart: 20 + 1760 / 5 = 372 s more,
    # done at 772 s: v100 busy 712 s (a restart's seconds are not busy ones), k80 400 s.
    # Per dollar: job 0's k80 (20/$) beats job 1's (1/$): job 1 on the v100, done at 360 s; job 0 on the k80 to 400 s
    # (800 steps), then 20 + 2800 / 10 = 300 s on the v100, done at 700 s: v100 busy 640 s, k80 400 s.
    for policy, v100_s, jcts in (
        ("max_sum_throughput_perf", 712.0, [360.0, 772.0]),
        ("max_sum_throughput_normalized_by_cost_perf", 640.0, [700.0, 360.0]),
    ):
        result = run[policy]
        assert [j["jct_s"] for j in result["jobs"]] == pytest.approx(jcts)
        hours = result["gpu_hours_by_type"]
        assert hours == pytest.approx({"v100": v100_s / 3600, "k80": 400 / 3600})
        assert result["cost_by_type"] == pytest.approx({"v100": hours["v100"] * 1.0, "k80": hours["k80"] * 0.1})
        assert result["total_cost"] == pytest.approx(sum(result["cost_by_type"].values()))
        assert result["prices"] == {"name": "test", "usd_per_gpu_hour": {"v100": 1.0, "k80": 0.1}}
    assert (
        run["max_sum_throughput_normalized_by_cost_perf"]["total_cost"] < run["max_sum_throughput_perf"]["total_cost"]
    )
    # SLOs of 2 x 360 s: job 1's 772 s misses its 720 s under raw throughput; job 0's 700 s meets it per dollar.
    assert run["max_sum_throughput_perf"]["slo_violations"] == 1
    assert run["max_sum_throughput_normalized_by_cost_perf"]["slo_violations"] == 0
    assert run["max_sum_throughput_perf"]["slo_jobs"] == 2


def test_results_default_to_gavels_prices_and_leave_out_slos_a_trace_lacks(tmp_path: Path) -> None:
    trace, table, _ = two_job_case(tmp_path)
    result = simulate(trace, "max_sum_throughput_perf", "v100:1,k80:1", throughputs=table, round_seconds=100)
    summary = result.to_json_dict()
    assert summary["prices"]["usd_per_gpu_hour"] == {"v100": 0.74, "p100": 0.43, "k80": 0.135}
    assert result.total_cost == pytest.approx(712 / 3600 * 0.74 + 400 / 3600 * 0.135)
    assert "slo_violations" not in summary and "slo_jobs" not in summary


def test_a_prices_file_must_price_every_type_of_the_cluster(tmp_path: Path) -> None:
    trace, table, _ = two_job_case(tmp_path)
    (tmp_path / "v.json").write_text('{"prices": {"v100": 1}}')
    with pytest.raises(InputError, match=r"v\.json: field 'prices': no price for GPU type 'k80'"):
        simulate(trace, "max_sum_throughput_perf", "v100:1,k80:1", throughputs=table, prices=tmp_path / "v.json")


def test_the_gavel_generator_draws_the_references_slos() -> None:
    workload = GavelWorkload(30, 1800.0, seed=0, slos=True)
    table = load_throughputs(require_reference("gavel", "simulation_throughputs.json"))
    jobs = generate_gavel(workload, table)
    plain = generate_gavel(dataclasses.replace(workload, slos=False), table)
    assert {j.slo for j in jobs} == {1.2, 2.0, 10.0} and {j.slo for j in plain} == {-1.0}
    assert [dataclasses.replace(j, slo=-1.0) for j in jobs] == plain  # the SLOs draw from a stream of their own
    assert workload.file_name().endswith("_slos.trace")


# -- the CLI --------------------------------------------------------------------------------------------------------
def test_simulate_prices_end_to_end(tmp_path: Path) -> None:
    trace, table, prices = two_job_case(tmp_path, slo=2.0)
    common = ("--trace", trace, "--cluster", "v100:1,k80:1", "--throughputs", table, "--round-seconds", 100)
    policy = ("--policy", "max_sum_throughput_normalized_by_cost_perf")
    done = shockwave("simulate", *common, *policy, "--prices", prices, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["total_cost"] == pytest.approx(640 / 3600 + 400 / 3600 * 0.1)  # as in the case above
    assert result["prices"]["name"] == "test" and result["slo_violations"] == 0
    shown = shockwave("simulate", *common, *policy, "--prices", prices)
    assert shown.returncode == 0 and "$0.19 (v100 0.2 GPU-h $0.18, k80 0.1 GPU-h $0.01; prices: test)" in shown.stdout
    assert "0 of 2 jobs with SLOs" in shown.stdout
    # the SLO policy given its prices as a parameter: the result is counted in them too
    slos = ("--policy", "max_sum_throughput_normalized_by_cost_perf_SLOs", "--policy-param", f"prices={prices}")
    done = shockwave("simulate", *common, *slos, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    hours = result["gpu_hours_by_type"]
    # Its allocation would meet both SLOs, but it moves job 0 between the types and each move costs a restart:
    # job 0 ends at 748 s, past its 720 s.
    assert result["prices"]["name"] == "test" and result["slo_violations"] == 1
    assert [job["jct_s"] for job in result["jobs"]] == pytest.approx([748.0, 596.8])
    assert result["total_cost"] == pytest.approx(hours["v100"] * 1.0 + hours["k80"] * 0.1)
    (tmp_path / "other.json").write_text('{"prices": {"v100": 2, "k80": 1}}')
    clash = shockwave("simulate", *common, *slos[:2], "--prices", tmp_path / "other.json", *slos[2:])
    assert clash.returncode != 0 and "disagree" in clash.stderr
