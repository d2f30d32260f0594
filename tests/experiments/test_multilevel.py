"""Multi-level fairness: water-filling max-min (GAVEL_SPEC §3.7), entities sharing the cluster by weight (Gavel
§4.2), the strategy-proof variant (§3.8), the entities side file, `--policy-param`, and Gavel's Figure 11 experiment
measured in the simulator."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

from conftest import shockwave
from shockwave.core.errors import InputError
from shockwave.experiments.multilevel import (
    WEIGHTS,
    MultilevelRun,
    share_errors,
    simulate_multilevel,
    write_figure11_inputs,
)
from shockwave.policies.gavel.hierarchical import entity_shares, normalised_throughputs
from shockwave.policies.gavel.max_min_fairness import MaxMinFairnessPerf
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs
from shockwave.policies.gavel.strategy_proof import MaxMinFairnessStrategyProof
from shockwave.policies.gavel.water_filling import (
    MaxMinFairnessWaterFilling,
    MaxMinFairnessWaterFillingPerf,
    WaterFillingProblem,
)
from shockwave.policies.registry import make_policy, parse_policy_params
from shockwave.workload_model.entities import Entities, read_entities

TOL = 1e-6


def inputs(
    types: tuple[str, ...],
    gpus: tuple[int, ...],
    throughputs: dict[int, dict[str, float]],
    gangs: dict[int, int] | None = None,
    weights: dict[int, float] | None = None,
    since: dict[int, float] | None = None,
) -> AllocationInputs:
    ids = sorted(throughputs)
    return AllocationInputs(
        ids,
        types,
        gpus,
        throughputs,
        gangs or dict.fromkeys(ids, 1),
        dict.fromkeys(ids, 1000),
        since or {j: 100.0 - j for j in ids},  # earlier ids arrived earlier
        weights or dict.fromkeys(ids, 1.0),
    )


def one_type(gpus: int, jobs: int, **kwargs: Any) -> AllocationInputs:
    return inputs(("v100",), (gpus,), {j: {"v100": 1.0} for j in range(jobs)}, **kwargs)


def v100_share(allocation: Allocation, job: int) -> float:
    return allocation[job]["v100"]


def entities(raw: dict[str, Any]) -> Entities:
    return Entities.from_mapping(raw, Path("teams.json"))


# -- water-filling -------------------------------------------------------------------------------------------------
SLACK_CASE = inputs(
    ("k80", "v100"),
    (1, 1),
    {0: {"k80": 0.0, "v100": 1.0}, 1: {"k80": 0.0, "v100": 1.0}, 2: {"k80": 1.0, "v100": 0.0}},
)
"""Jobs 0 and 1 run only on the V100, job 2 only on the K80: the max-min level is set by the V100 pair (1/2 each);
the K80 can only help job 2."""


@pytest.mark.parametrize("allocator", [MaxMinFairnessWaterFilling(), MaxMinFairnessWaterFillingPerf()])
def test_water_filling_gives_what_the_worst_off_cannot_use_to_the_job_that_can(allocator: Any) -> None:
    x = allocator.allocate(SLACK_CASE)
    assert x[0] == pytest.approx({"k80": 0.0, "v100": 0.5}, abs=TOL)
    assert x[1] == pytest.approx({"k80": 0.0, "v100": 0.5}, abs=TOL)
    assert x[2] == pytest.approx({"k80": 1.0, "v100": 0.0}, abs=TOL)
    # Plain max-min stops at the level: its solver leaves part of the K80 idle (and lends the rest to jobs that
    # cannot run there).
    plain = MaxMinFairnessPerf().allocate(SLACK_CASE)
    assert plain[2]["k80"] < 0.9 and plain[0]["k80"] > 0.1


def test_water_filling_follows_priority_weights_and_gangs() -> None:
    # 6 GPUs; GPU shares sf x grow 1:1:2 for job 0 (1 GPU), job 1 (a gang of 2) and job 2 (a gang of 4, weight 2).
    # Job 0 saturates at 1 GPU; jobs 1 and 2 then grow until the cluster is full: 1 + L + 2L = 6, L = 5/3.
    case = one_type(6, 3, gangs={0: 1, 1: 2, 2: 4}, weights={0: 1.0, 1: 1.0, 2: 2.0})
    x = MaxMinFairnessWaterFilling().allocate(case)
    assert [v100_share(x, j) for j in range(3)] == pytest.approx([1.0, 5 / 6, 5 / 6], abs=TOL)
    x = MaxMinFairnessWaterFilling().allocate(one_type(2, 2, weights={0: 3.0, 1: 1.0}))
    assert [v100_share(x, 0), v100_share(x, 1)] == pytest.approx([1.0, 1.0], abs=TOL)  # room for both
    x = MaxMinFairnessWaterFilling().allocate(one_type(1, 2, weights={0: 3.0, 1: 1.0}))
    assert [v100_share(x, 0), v100_share(x, 1)] == pytest.approx([0.75, 0.25], abs=TOL)


def _could_rise(case: AllocationInputs, problem: WaterFillingProblem, x: np.ndarray, j: int) -> float:
    """How much more job j could get while every job at or below its weighted level keeps what it has (an LP of
    its own, with scipy): 0 for a max-min fair allocation."""
    m, n = problem.shape
    a, sf, w = problem.coefficients, problem.scale_factors, case.column(case.weights)
    u = problem.throughputs(x)
    rows, bounds = [], []
    for k in range(n):  # capacity
        row = np.zeros(m * n)
        row[k::n] = sf
        rows.append(row), bounds.append(problem.gpus[k])
    for i in range(m):  # time
        row = np.zeros(m * n)
        row[i * n : (i + 1) * n] = 1
        rows.append(row), bounds.append(1.0)
        if i != j and u[i] / w[i] <= u[j] / w[j] + 1e-7:  # the worse off keep their throughput
            row = np.zeros(m * n)
            row[i * n : (i + 1) * n] = -a[i]
            rows.append(row), bounds.append(-u[i] + 1e-9)
    cost = np.zeros(m * n)
    cost[j * n : (j + 1) * n] = -a[j]
    box = [(0.0, 1.0 if problem.open.reshape(-1)[c] else 0.0) for c in range(m * n)]
    best = linprog(cost, A_ub=np.array(rows), b_ub=np.array(bounds), bounds=box, method="highs")
    assert best.status == 0
    return -best.fun - u[j]


@pytest.mark.parametrize("seed", range(6))
def test_water_filling_is_weighted_max_min_fair_on_random_heterogeneous_clusters(seed: int) -> None:
    """The defining property, checked by an independent LP per job: no job can get more without taking from a job
    that is at most as well off (relative to its weight)."""
    rng = random.Random(seed)
    types = ("k80", "p100", "v100")
    rates = {}
    for j in range(8):
        speed = sorted(rng.uniform(0.1, 1.0) for _ in types)
        rates[j] = dict(zip(types, speed, strict=True))
        if rng.random() < 0.2:
            rates[j][rng.choice(types)] = 0.0  # a job that cannot run on one type
    gangs = {j: rng.choice((1, 1, 2, 4)) for j in rates}
    weights = {j: float(rng.choice((1, 1, 2, 3))) for j in rates}
    case = inputs(types, (rng.randint(1, 4), rng.randint(2, 6), rng.randint(1, 4)), rates, gangs, weights)
    problem = WaterFillingProblem.of(case, case.throughput_matrix())
    allocation = MaxMinFairnessWaterFillingPerf().allocate(case)
    x = np.array([[allocation[j][t] for t in types] for j in case.job_ids])
    sf = case.column(case.scale_factors)
    assert np.all(x >= 0) and np.all(x.sum(axis=1) <= 1 + TOL)
    assert np.all((sf[:, None] * x).sum(axis=0) <= np.array(case.gpus_by_type) + TOL)
    gains = [_could_rise(case, problem, x, j) for j in range(len(rates))]
    assert max(gains) < 1e-3, gains


# -- entities ------------------------------------------------------------------------------------------------------
def test_entities_share_by_weight_and_split_among_jobs_by_priority() -> None:
    # 6 GPUs, entity a (weight 1) with jobs 0-3, entity b (weight 2) with jobs 4-9 whose priorities are 2,2,1,1,1,1:
    # a holds 2 GPUs (1/2 each), b 4 GPUs split 2:2:1:1:1:1.
    teams = entities({"entities": {"a": 1, "b": 2}, "jobs": {"0-3": "a", "4-9": "b"}})
    case = one_type(6, 10, weights={j: 2.0 if j in (4, 5) else 1.0 for j in range(10)})
    x = MaxMinFairnessWaterFillingPerf(teams).allocate(case)
    shares = [v100_share(x, j) for j in range(10)]
    assert shares == pytest.approx([0.5] * 4 + [1.0, 1.0] + [0.5] * 4, abs=TOL)
    assert entity_shares(normalised_throughputs(case, x), teams) == pytest.approx({"a": 1 / 3, "b": 2 / 3})


def test_a_fifo_entity_gives_its_share_to_its_earliest_jobs() -> None:
    # As above, but b is FIFO and job 9 arrived first: b's 4 GPUs go to jobs 9, 4, 5, 6; jobs 7 and 8 wait.
    teams = entities({"entities": {"a": 1, "b": {"weight": 2, "policy": "fifo"}}, "jobs": {"0-3": "a", "4-9": "b"}})
    since = {j: 100.0 - j for j in range(10)} | {9: 500.0}
    x = MaxMinFairnessWaterFillingPerf(teams).allocate(one_type(6, 10, since=since))
    shares = [v100_share(x, j) for j in range(10)]
    assert shares == pytest.approx([0.5] * 4 + [1.0, 1.0, 1.0, 0.0, 0.0, 1.0], abs=TOL)


def test_what_an_entity_cannot_use_goes_to_the_others_by_weight() -> None:
    # Weights 3:1:1 on 6 GPUs, but a has one job: it holds 1 GPU, b and c split the other 5 equally.
    teams = entities({"entities": {"a": 3, "b": 1, "c": 1}, "jobs": {"0": "a", "1-4": "b", "5-8": "c"}})
    case = one_type(6, 9)
    x = MaxMinFairnessWaterFilling(teams).allocate(case)
    assert v100_share(x, 0) == pytest.approx(1.0, abs=TOL)
    assert [v100_share(x, j) for j in range(1, 9)] == pytest.approx([5 / 8] * 8, abs=TOL)


def test_one_entity_per_job_is_plain_water_filling() -> None:
    case = inputs(
        ("k80", "v100"),
        (2, 3),
        {j: {"k80": 0.2 + 0.1 * j, "v100": 1.0} for j in range(6)},
        weights={j: 1.0 + j % 3 for j in range(6)},
    )
    teams = entities(
        {"entities": {f"e{j}": case.weights[j] for j in range(6)}, "jobs": {str(j): f"e{j}" for j in range(6)}}
    )
    alone, grouped = (
        MaxMinFairnessWaterFillingPerf().allocate(case),
        MaxMinFairnessWaterFillingPerf(teams).allocate(case),
    )
    for j in range(6):
        assert grouped[j] == pytest.approx(alone[j], abs=1e-6)


# -- the side file -------------------------------------------------------------------------------------------------
def write(path: Path, raw: object) -> Path:
    path.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return path


def test_entities_files_in_json_and_toml(tmp_path: Path) -> None:
    toml = write(
        tmp_path / "teams.toml",
        'default = "b"\n[entities]\na = 1\nb = { weight = 2.5, policy = "fifo" }\n[jobs]\n0 = "a"\n"3-5" = "a"\n',
    )
    teams = read_entities(toml)
    assert teams.entities["b"].weight == 2.5 and teams.entities["b"].policy == "fifo"
    assert [teams.entity_of(j).name for j in range(7)] == ["a", "b", "b", "a", "a", "a", "b"]
    same = read_entities(write(tmp_path / "teams.json", {"entities": {"a": 1, "b": 2}, "jobs": {"0": "a", "1": "b"}}))
    assert same.entity_of(1).weight == 2.0 and same.entity_of(0).policy == "fairness"


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [
        ({"entities": {"a": -1}}, "entities.a", "positive"),
        ({"entities": {"a": {"weight": 0}}}, "entities.a.weight", "positive"),
        ({"entities": {"a": {"weight": "2"}}}, "entities.a.weight", "positive number"),
        ({"entities": {"a": {"weight": 1, "policy": "lottery"}}}, "entities.a.policy", "fairness, fifo"),
        ({"entities": {"a": {"wieght": 1}}}, "entities.a.wieght", "unknown key"),
        ({"entities": {}}, "entities", "entity name"),
        ({"jobs": {"0": "a"}}, "entities", "no 'entities'"),
        ({"entities": {"a": 1}, "jobs": {"0": "b"}}, "jobs.0", "'b' is not an entity"),
        ({"entities": {"a": 1}, "jobs": {"x": "a"}}, "jobs.x", "not a job id"),
        ({"entities": {"a": 1}, "jobs": {"5-2": "a"}}, "jobs.5-2", "upwards"),
        ({"entities": {"a": 1}, "jobs": {"0-3": "a", "2": "a"}}, "jobs.2", "job 2 is listed twice"),
        ({"entities": {"a": 1}, "default": "z"}, "default", "not an entity"),
        ({"entities": {"a": 1}, "weights": {}}, "weights", "unknown key"),
    ],
)
def test_a_bad_entities_file_names_the_file_and_field(
    tmp_path: Path, raw: dict[str, Any], field: str, says: str
) -> None:
    path = write(tmp_path / "teams.json", raw)
    with pytest.raises(InputError) as caught:
        read_entities(path)
    assert caught.value.path == str(path) and caught.value.field == field, str(caught.value)
    assert says in str(caught.value)


def test_missing_unreadable_and_incomplete_entities_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="entities file not found") as caught:
        make_policy("max_min_fairness_water_filling", entities=str(tmp_path / "nowhere.json"))
    assert caught.value.path == str(tmp_path / "nowhere.json")
    with pytest.raises(InputError, match="not valid TOML"):
        read_entities(write(tmp_path / "bad.toml", "[entities\n"))
    with pytest.raises(InputError, match="not valid JSON"):
        read_entities(write(tmp_path / "bad.json", "{"))
    # A job the file does not place (and no default): named when the allocator meets it.
    policy = make_policy("max_min_fairness_water_filling_perf", entities=str(write(tmp_path / "t.json", TWO_TEAMS)))
    with pytest.raises(InputError, match="job 4 belongs to no entity") as caught:
        policy.allocator.allocate(one_type(2, 5))
    assert caught.value.path == str(tmp_path / "t.json") and caught.value.field == "jobs"


TWO_TEAMS = {"entities": {"a": 1, "b": 2}, "jobs": {"0-1": "a", "2-3": "b"}}


# -- parameters from the command line ------------------------------------------------------------------------------
def test_policy_params_are_read_as_their_declared_types() -> None:
    name = "max_min_fairness_water_filling_perf"
    assert parse_policy_params(name, ["entities=teams.toml", "min_realloc_interval_s = 240", "seed=3"]) == {
        "entities": "teams.toml",
        "min_realloc_interval_s": 240.0,
        "seed": 3,
    }
    assert parse_policy_params("fifo", ["reference_quirks=true"]) == {"reference_quirks": True}
    assert parse_policy_params(name, ["entities=none"]) == {"entities": None}
    for bad, says in [
        (["entitie=x"], "has no parameter 'entitie'"),
        (["seed=x"], "expected int"),
        (["seed"], "expected KEY=VALUE"),
        (["seed=1", "seed=2"], "given twice"),
    ]:
        with pytest.raises(InputError, match=says):
            parse_policy_params(name, bad)


@pytest.fixture(scope="module")
def figure11(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_figure11_inputs(tmp_path_factory.mktemp("multilevel"))


def test_simulate_takes_policy_params(figure11: tuple[Path, Path], tmp_path: Path) -> None:
    trace, teams = figure11
    run = ("simulate", "--trace", trace, "--gpus", "9", "--policy", "max_min_fairness_water_filling_perf")
    done = shockwave(*run, "--policy-param", f"entities={teams}", "--round-seconds", "720", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["policy_params"] == {"entities": str(teams)} and result["unfinished_jobs"] == []
    partial = write(tmp_path / "partial.json", TWO_TEAMS)
    for params, says in [
        (["--policy-param", "entities=nowhere.json"], "nowhere.json: entities file not found"),
        (["--policy-param", f"entities={partial}"], f"{partial}: field 'jobs': job 4 belongs to no entity"),
        (["--policy-param", "weights=1"], "has no parameter 'weights'"),
    ]:
        bad = shockwave(*run, *params)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


# -- Gavel's Figure 11, measured ------------------------------------------------------------------------------------
CLUSTERS = ("v100:9", "v100:3,p100:3,k80:3")


@pytest.fixture(scope="module")
def runs(figure11: tuple[Path, Path]) -> dict[str, MultilevelRun]:
    trace, teams = figure11
    return {cluster: simulate_multilevel(trace, teams, cluster, round_seconds=120.0) for cluster in CLUSTERS}


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_each_entity_gets_its_weight_share_of_effective_throughput_while_it_has_demand(
    runs: dict[str, MultilevelRun], cluster: str
) -> None:
    run = runs[cluster]
    assert run.summary["unfinished_jobs"] == []
    shared = [row for row in share_errors(run) if row.target < 1]  # phases where two or more entities have demand
    assert {row.entity for row in shared} == set(WEIGHTS)
    three = [row for row in shared if len({r.entity for r in shared if r.start_s == row.start_s}) == 3]
    assert {row.entity: row.target for row in three} == pytest.approx(
        {"entity0": 1 / 6, "entity1": 1 / 3, "entity2": 1 / 2}
    )
    # The allocation gives each entity its weight share exactly, in every phase.
    assert max(row.allocated_error for row in shared) < 1e-6
    # Measured over the rounds: within 5% over every stretch with the same entities in demand, and in every phase
    # long enough (20 rounds) for the round mechanism to give a job its fraction of time.
    stretches = [row for row in share_errors(run, merge=True) if row.target < 1]
    assert max(row.error for row in stretches) < 0.05, [(r.entity, r.measured, r.target) for r in stretches]
    long_phases = [row for row in shared if row.rounds >= 20]
    assert len(long_phases) >= 10 and max(row.error for row in long_phases) < 0.05


def test_without_entities_max_min_shares_by_job_count(figure11: tuple[Path, Path]) -> None:
    """The contrast: Gavel's entity-unaware max-min gives each entity its jobs' share, far from its weight."""
    run = simulate_multilevel(*figure11, "v100:9", policy="max_min_fairness_perf", round_seconds=120.0)
    stretches = [row for row in share_errors(run, merge=True) if row.target < 1]
    assert max(row.error for row in stretches) > 0.3


# -- strategy-proof ------------------------------------------------------------------------------------------------
def test_strategy_proof_discounts_each_job_by_what_it_costs_the_others() -> None:
    # Two jobs on one GPU: Nash welfare gives 1/2 each; without the other a job would have it all, so each keeps
    # (1/2)/1 of its share: 1/4. Three jobs on two GPUs: 2/3 each, kept (2/3)^2 -> 8/27. Jobs that fit lose nothing.
    sp = MaxMinFairnessStrategyProof()
    assert [v100_share(sp.allocate(one_type(1, 2)), j) for j in range(2)] == pytest.approx([0.25] * 2, abs=1e-6)
    assert [v100_share(sp.allocate(one_type(2, 3)), j) for j in range(3)] == pytest.approx([8 / 27] * 3, abs=1e-6)
    assert [v100_share(sp.allocate(one_type(3, 2)), j) for j in range(2)] == pytest.approx([1.0] * 2, abs=1e-6)
