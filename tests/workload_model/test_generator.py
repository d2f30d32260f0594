"""Trace generator: byte-identical regeneration of the released traces, and its knobs."""

from __future__ import annotations

import itertools

import pytest

from conftest import require_reference
from shockwave.core.errors import InputError
from shockwave.workload_model.builtin_throughput import BuiltinThroughputs
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.throughput import TableThroughputs
from shockwave.workload_model.trace import format_line

REFERENCE_TRACES = sorted(p.name for p in require_reference("traces").iterdir())


def params_from_name(name: str) -> GeneratorParams:
    jobs, lo, hi, n, lam, seed, modes, gpus, *_ = name.split("_")
    return GeneratorParams(
        jobs=int(jobs),
        min_hours=float(lo),
        max_hours=float(hi),
        num_durations=int(n),
        lam=float(lam),
        seed=int(seed),
        mode_mix=tuple(map(float, modes.split(","))),  # type: ignore[arg-type]
        gpu_mix=tuple(map(float, gpus.split(","))),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("name", REFERENCE_TRACES)
def test_regenerates_reference_trace_byte_for_byte(name: str) -> None:
    table_name = "tacc" if name.startswith("120_") else "wisr"  # spec §1.1: which table made which trace
    table = TableThroughputs.from_json(require_reference("throughputs", f"{table_name}_throughputs.json"))
    params = params_from_name(name)
    assert params.file_name() == name
    text = "".join(format_line(job) + "\n" for job in generate(params, table))
    assert text == require_reference("traces", name).read_text()


def test_builtin_model_generates_deterministically() -> None:
    params = GeneratorParams(jobs=50, seed=3)
    first = generate(params, BuiltinThroughputs())
    assert first == generate(params, BuiltinThroughputs())
    assert len(first) == 50 and first[0].arrival == 0
    assert all(a.arrival <= b.arrival for a, b in itertools.pairwise(first))
    assert all(j.total_steps > 0 for j in first)
    assert generate(GeneratorParams(jobs=50, seed=4), BuiltinThroughputs()) != first


def test_mixes_are_respected() -> None:
    jobs = generate(GeneratorParams(jobs=200, mode_mix=(1, 0, 0), gpu_mix=(0, 0, 1, 0)), BuiltinThroughputs())
    assert {j.mode for j in jobs} == {"static"}
    assert {j.scale_factor for j in jobs if j.model != "Recommendation"} == {4}
    assert {j.scale_factor for j in jobs if j.model == "Recommendation"} == {1}


def test_zero_lambda_means_all_arrive_at_once() -> None:
    assert {j.arrival for j in generate(GeneratorParams(jobs=10, lam=0), BuiltinThroughputs())} == {0.0}


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"jobs": 0}, "--jobs"),
        ({"min_hours": 3, "max_hours": 1}, "--min-hours"),
        ({"lam": -1}, "--lam"),
        ({"mode_mix": (0.5, 0.5, 0.5)}, "--mode-mix"),
        ({"gpu_mix": (1.0, 0.0)}, "--gpu-mix"),
        ({"num_durations": 4}, "--num-durations"),
    ],
)
def test_bad_parameters(changes: dict, words: str) -> None:
    with pytest.raises(InputError, match=words):
        generate(GeneratorParams(**changes), BuiltinThroughputs())
