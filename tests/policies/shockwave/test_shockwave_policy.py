"""The Shockwave policy end to end: configuration, solver failures, determinism, and the published results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import require_reference, shockwave
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.simulator.mechanics import preset
from shockwave.simulator.run import simulate
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import write_trace


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 adaptive jobs, gangs of 1-4, arriving over ~10 minutes (built-in throughput model)."""
    path = tmp_path_factory.mktemp("trace") / "small.trace"
    params = GeneratorParams(jobs=24, min_hours=0.1, max_hours=0.6, lam=30.0, seed=3)
    write_trace(generate(params, load_throughputs(None)), path)
    return path


def run(
    trace: Path,
    config: ShockwaveConfig | None = None,
    gpus: int = 8,
    mechanics: str = "corrected",
    throughputs: Path | None = None,
) -> dict[str, Any]:
    result, _ = simulate(trace, "shockwave", ClusterSpec.of(gpus), preset(mechanics), throughputs, config)
    return result


def without_timing(result: dict[str, Any]) -> dict[str, Any]:
    solver = {k: v for k, v in result["solver"].items() if not k.endswith("_s")}
    return {**{k: v for k, v in result.items() if k != "wall_seconds"}, "solver": solver}


# -- configuration ---------------------------------------------------------------------------------------------------
def test_defaults_are_the_tacc_32gpus_file() -> None:
    path = require_reference("configurations", "tacc_32gpus.json")
    assert ShockwaveConfig.from_json(path) == ShockwaveConfig()


@pytest.mark.parametrize(
    "name", ["tacc_32gpus", "scale_64gpus", "scale_128gpus", "scale_256gpus", "shockwave_example_config"]
)
def test_every_reference_configuration_loads(name: str) -> None:
    config = ShockwaveConfig.from_json(require_reference("configurations", f"{name}.json"))
    assert config.future_rounds == 20 and config.to_json()["lambda"] == config.lam


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"future_round": 20}, "future_round", "unknown key"),
        ({"k": -1}, "k", "must be >= 0"),
        ({"lambda": True}, "lambda", "finite number"),
        ({"rhomax": float("nan")}, "rhomax", "finite number"),
        ({"future_rounds": 2.5}, "future_rounds", "integer"),
        ({"solver_timeout": 0}, "solver_timeout", "> 0"),
        ({"log_approximation_bases": [0.0, 0.5, 0.4, 1.0]}, "log_approximation_bases", "increase strictly"),
        ({"log_approximation_bases": [0.1, 1.0]}, "log_approximation_bases", "from 0.0 to 1.0"),
        ({"welfare_slack": 2}, "welfare_slack", "[0, 1]"),
        ({"typed_welfare_slack": -0.1}, "typed_welfare_slack", "[0, 1]"),
        ({"typed_greedy_jobs": 0}, "typed_greedy_jobs", "integer >= 1"),
        ({"elastic_min_stint": -1}, "elastic_min_stint", "[0, 100] restarts"),
        ({"elastic_min_stint": 101}, "elastic_min_stint", "[0, 100] restarts"),
    ],
)
def test_bad_configuration_names_file_and_field(tmp_path: Path, raw: dict, field: str, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError) as caught:
        ShockwaveConfig.from_json(path)
    assert caught.value.field == field and caught.value.path == str(path)
    assert words in str(caught.value)


def test_config_cli_errors_exit_2(tmp_path: Path, small_trace: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"k": 1e-3, "horizon": 20}')
    result = shockwave("simulate", "--trace", small_trace, "--policy", "shockwave", "--gpus", 8, "--config", bad)
    assert result.returncode == 2 and "unknown key 'horizon'" in result.stderr and str(bad) in result.stderr
    result = shockwave("simulate", "--trace", small_trace, "--policy", "gavel", "--gpus", 8, "--config", bad)
    assert result.returncode == 2 and "has none" in result.stderr
    missing = shockwave(
        "simulate", "--trace", small_trace, "--policy", "shockwave", "--gpus", 8, "--config", tmp_path / "nope.json"
    )
    assert missing.returncode == 2 and "not found" in missing.stderr


# -- behaviour -------------------------------------------------------------------------------------------------------
def test_simulate_json_reports_solver_latency(small_trace: Path) -> None:
    result = shockwave(
        "simulate", "--trace", small_trace, "--policy", "shockwave", "--gpus", 8, "--mechanics", "corrected", "--json"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    solver = data["solver"]
    assert {"solves", "fallbacks", "p50_s", "p95_s", "max_s", "infeasible"} <= solver.keys()
    assert solver["solves"] > 0 and solver["fallbacks"] == 0
    assert 0 < solver["p50_s"] <= solver["p95_s"] <= solver["max_s"]
    assert data["unfinished_jobs"] == [] and len(data["jobs"]) == 24


def test_same_inputs_same_result(small_trace: Path) -> None:
    assert without_timing(run(small_trace)) == without_timing(run(small_trace))


def test_solver_failures_fall_back_and_lose_no_job(small_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HiGHS given no time at all finds no plan (a limit of 0 stops it the same way on any machine): every re-solve
    fails, the run still completes."""
    from shockwave.policies.shockwave import market

    make_solver = market._solver

    def starved(*args: object) -> object:
        solver = make_solver(*args)  # type: ignore[arg-type]
        solver.setOptionValue("time_limit", 0.0)
        return solver

    monkeypatch.setattr(market, "_solver", starved)
    result = run(small_trace, ShockwaveConfig())
    assert result["solver"]["fallbacks"] == result["solver"]["solves"] > 0
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 24
    assert result["utilization"] > 0.5  # the fallback keeps GPUs busy (work-conserving fill)


def test_plans_fit_the_cluster_and_only_name_active_jobs(small_trace: Path) -> None:
    _, run_ = simulate(small_trace, "shockwave", ClusterSpec.of(8), preset("corrected"))
    assert max(r.busy_gpus for r in run_.rounds) <= 8
    assert sum(r.busy_gpus for r in run_.rounds) / (8 * len(run_.rounds)) > 0.7


# -- the published results ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_canonical_trace_at_least_as_good_as_published_and_repeatable(canonical_trace: Path, tacc_path: Path) -> None:
    config = ShockwaveConfig.from_json(require_reference("configurations", "tacc_32gpus.json"))
    first = run(canonical_trace, config, gpus=32, mechanics="reference", throughputs=tacc_path)
    assert first["makespan_s"] <= 24_200
    assert first["avg_jct_s"] <= 10_000
    assert first["worst_ftf"] <= 1.80
    assert first["unfair_fraction"] <= 0.05
    assert first["unfinished_jobs"] == [] and first["solver"]["fallbacks"] == 0
    second = run(canonical_trace, config, gpus=32, mechanics="reference", throughputs=tacc_path)
    assert without_timing(first) == without_timing(second)


@pytest.mark.slow
def test_64_gpus_beats_the_fair_baselines_like_the_paper(wisr_path: Path) -> None:
    """Fig. 9: about 1.3x shorter makespan and 2x better worst rho than max-min fairness and Themis."""
    trace = require_reference("traces", "220_0.2_5_100_25_4_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace")
    config = ShockwaveConfig.from_json(require_reference("configurations", "scale_64gpus.json"))
    ours = run(trace, config, gpus=64, mechanics="reference", throughputs=wisr_path)
    assert ours["unfinished_jobs"] == []
    for baseline in ("max_min_fairness", "finish_time_fairness"):
        theirs, _ = simulate(trace, baseline, ClusterSpec.of(64), preset("reference"), wisr_path)
        assert ours["makespan_s"] * 1.3 <= theirs["makespan_s"]
        assert ours["worst_ftf"] * 1.5 <= theirs["worst_ftf"]
        assert ours["unfair_fraction"] < theirs["unfair_fraction"]
