"""The typed result format (shockwave.results.model) and the typed configs: what a driver writes validates and comes
back unchanged, the generated JSON Schema says the same, and a damaged file is refused naming the file and the field."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.results.model import Result, result_schema
from shockwave.results.provenance import with_command
from shockwave.results.report import check_result, check_results
from shockwave.simulator.mechanics import preset
from shockwave.simulator.run import simulate
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import write_trace

HEADER = ("policy", "trace", "gpus", "mechanics", "round_seconds", "throughputs")
METRICS = ("makespan_s", "avg_jct_s", "worst_ftf", "unfair_fraction", "utilization", "num_rounds")
REQUIRED = {*HEADER, *METRICS, "makespan_lower_bound_s", "jobs", "complete", "unfinished_jobs", "wall_seconds"}


@pytest.fixture(scope="module", params=["fifo", "shockwave"])
def saved(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A result as compare writes it: simulate's object with its timeline and command."""
    trace = tmp_path_factory.mktemp("trace") / "small.trace"
    write_trace(generate(GeneratorParams(jobs=8, max_hours=0.3, lam=60.0, seed=2), load_throughputs(None)), trace)
    result, run = simulate(trace, request.param, ClusterSpec.of(4), preset("corrected"))
    result["timeline"] = [[r.time_s, r.running_jobs, r.busy_gpus] for r in run.rounds]
    return with_command(result, ["shockwave", "compare"])


def test_the_schema_is_generated_from_the_models_and_names_the_required_keys() -> None:
    schema = result_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["required"]) == REQUIRED | {"provenance"}
    assert set(schema["$defs"]["JobRow"]["required"]) == {
        "id", "arrival_s", "finish_s", "jct_s", "t_isolated_s", "ftf", "batch_size_changes",
    }  # fmt: skip
    assert schema["$defs"]["Provenance"]["required"] == ["versions"]


def test_a_simulated_result_validates_and_is_written_back_unchanged(saved: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    jsonschema.validate(saved, result_schema())
    assert check_results([saved], path) == [saved]
    model = Result.from_json_dict(saved, path)
    assert model.jobs[0].ftf == saved["jobs"][0]["ftf"] and model.provenance.command == ["shockwave", "compare"]
    assert json.dumps(model.to_json_dict()) == json.dumps(saved)  # keys, order and every float, bit for bit
    assert json.dumps(Result(**saved).to_json_dict()) == json.dumps(saved)
    if saved["policy"] == "shockwave":
        assert model.solver is not None and model.solver.solves >= 1


def test_driver_specific_keys_keep_their_place(saved: dict[str, Any], tmp_path: Path) -> None:
    """`shockwave run` puts its own keys among the header's and adds per-job details: all survive, in order, also
    in nested objects."""
    runtime: dict[str, Any] = {}
    for key, value in saved.items():
        runtime[key] = value
        if key == "round_seconds":
            runtime["realloc_seconds"] = value
        if key == "throughputs":
            runtime["time_scale"] = 4  # an integer where a number is expected stays one
        if key == "wall_seconds":
            runtime |= {"failed_jobs": {}, "restart_overhead_s": None, "future_key": {"any": [1, "thing"]}}
    runtime["jobs"] = [{"status": "done", **job, "preemptions": 2, "startup_s": [1.5, 2.25]} for job in saved["jobs"]]
    runtime["mechanics"] = "runtime"
    assert json.dumps(Result.from_json_dict(runtime, tmp_path / "r.json").to_json_dict()) == json.dumps(runtime)


def _set(result: dict[str, Any], where: tuple[str | int, ...], value: Any) -> None:
    *parents, last = where
    target: Any = result
    for key in parents:
        target = target[key]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("where", "value", "words"),
    [
        (("makespan_s",), _DELETE, "(result: 'makespan_s' is a required property)"),
        (("jobs", 0, "t_isolated_s"), _DELETE, "(result.jobs[0]: 't_isolated_s' is a required property)"),
        (("gpus",), "4", "(result.gpus: Input should be a valid integer)"),
        (("num_rounds",), True, "(result.num_rounds: Input should be a valid integer)"),
        (("makespan_s",), "12.5", "(result.makespan_s: Input should be a valid number)"),
        (("jobs", 0, "ftf"), math.nan, "(result.jobs[0].ftf: Input should be a finite number)"),
        (("jobs", 0, "ftf"), -1.0, "(result.jobs[0].ftf: Input should be greater than or equal to 0)"),
        (("utilization",), 1.5, "(result.utilization: Input should be less than or equal to 1)"),
        (
            ("provenance", "versions"),
            {"numpy": 2},
            "(result.provenance.versions.numpy: Input should be a valid string)",
        ),
        (("timeline", 0), [0.0, "3", 4], "(result.timeline[0][1]: Input should be a valid integer)"),
        (("jobs", 0), 7, "(result.jobs[0]: expected a JSON object)"),
    ],
)
def test_a_damaged_result_is_refused_naming_the_file_and_the_field(
    saved: dict[str, Any], where: tuple[str | int, ...], value: Any, words: str
) -> None:
    damaged = copy.deepcopy(saved)
    _set(damaged, where, value)
    with pytest.raises(InputError) as caught:
        check_result(damaged, Path("out/results.json"))
    assert str(caught.value).startswith(f"out/results.json: not a shockwave result {words}: ")
    assert caught.value.path == "out/results.json"


def test_a_reader_may_require_optional_keys(saved: dict[str, Any]) -> None:
    with pytest.raises(InputError, match=r"\(results\[2\]: 'cell' is a required property\)"):
        check_result(saved, Path("cells/x.json"), "results[2]", needs=("cell",))


# -- typed configs -------------------------------------------------------------------------------------------------
def test_mechanics_stay_frozen_hashable_and_checked_on_replace() -> None:
    corrected = preset("corrected")
    assert (
        hash(corrected) == hash(dataclasses.replace(corrected)) and dataclasses.asdict(corrected)["name"] == "corrected"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        corrected.round_seconds = 60.0  # type: ignore[misc]
    with pytest.raises(InputError, match="--round-seconds must be > 0"):
        dataclasses.replace(corrected, round_seconds=0.0)
    with pytest.raises(ValidationError):
        dataclasses.replace(corrected, round_seconds="fast")


def test_generator_parameters_are_checked_when_built() -> None:
    with pytest.raises(InputError, match="--gpu-mix needs 4"):
        GeneratorParams(gpu_mix=(1.0, 0.0))
    with pytest.raises(ValidationError):
        GeneratorParams(jobs="many")  # type: ignore[arg-type]
