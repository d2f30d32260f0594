"""Bad input of every kind ends in one clear message (an InputError; exit 2 at the CLI), never a traceback.

The named tests reproduce defects of issue 15 (items 6 and 7) one by one. The property-based tests throw random
bytes, lines and values at every reader in-process (many examples) and at the CLI in subprocesses (few: each one is
a Python start-up). Hypothesis runs derandomized and without deadlines, so CI is reproducible and machine load
cannot fail a test.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from conftest import shockwave
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.experiments import store
from shockwave.experiments.compare import CompareRequest, build_cells
from shockwave.experiments.sweep import render
from shockwave.experiments.sweep_spec import TOP_KEYS, load_toml, parse_generator, spec_from
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.results.report import check_result, check_results
from shockwave.runtime.run import RunRequest, run
from shockwave.simulator.mechanics import preset
from shockwave.simulator.run import simulate
from shockwave.workload_model.generator import GeneratorParams
from shockwave.workload_model.profile import load_workload, read_schedules
from shockwave.workload_model.throughput import TableThroughputs, load_throughputs
from shockwave.workload_model.trace import COLUMNS, MAX_EPOCHS, TraceError, read_trace

GOOD = (
    "ResNet-18 (batch size 32)\tpython3 main.py --data_dir=%s/cifar10 --batch_size 32\t"
    "image_classification/cifar10\t--num_steps\t1\t143450\t1\taccordion\t1\t-1.000000\t3338\t55"
)
BOM = b"\xef\xbb\xbf"
LATIN1 = "R\xe9sNet".encode("latin-1")  # byte 0xe9: not UTF-8
READERS = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
CLI = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def line(**changes: str) -> str:
    values = dict(zip(COLUMNS, GOOD.split("\t"), strict=True))
    values.update(changes)
    return "\t".join(values.values())


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def table(entries: dict[str, Any]) -> str:
    """A Gavel throughput table of v100 entries {"('<job type>', <gang>)": it/s}."""
    return json.dumps({"v100": {key: {"null": rate} for key, rate in entries.items()}})


def assert_clean(error: InputError) -> None:
    """One readable line: no newline, no Python object dump."""
    message = str(error)
    assert message and "\n" not in message and "Traceback" not in message


def assert_cli_clean(result: Any, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip(), "an error message on stderr"
    for word in words:
        assert word in result.stderr


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch folder shared by a module's examples (hypothesis reruns a test body many times in one test)."""
    return tmp_path_factory.mktemp("bad-input")


@pytest.fixture(scope="module")
def good_trace(folder: Path) -> Path:
    return write(folder / "good.trace", GOOD + "\n")


# -- item 6: bounds and consistency ------------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [10**9, 10**12])
def test_steps_far_beyond_the_catalog_are_refused_at_once(tmp_path: Path, steps: int) -> None:
    """Today 10^9 steps took 22 s and 793 MB (a profile entry per epoch) and 10^12 never returned."""
    path = write(tmp_path / "t.trace", line(total_steps=str(steps), mode="gns") + "\n")
    start = time.perf_counter()
    with pytest.raises(TraceError) as caught:
        load_workload(path, None)
    assert time.perf_counter() - start < 5
    problem = caught.value.problems[0]
    assert (problem.line, problem.field) == (1, "total_steps")
    assert f"at most {MAX_EPOCHS}" in problem.reason


def test_trace_check_of_a_trillion_steps_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path / "t.trace", line(total_steps=str(10**12)) + "\n")
    assert_cli_clean(shockwave("trace", "check", path), "t.trace:1: field 'total_steps'")


def test_a_job_of_more_than_a_year_is_refused(tmp_path: Path) -> None:
    """Within the epoch bound, but 0.001 steps/s makes 143,450 steps take 4.5 years."""
    rates = tmp_path / "slow.json"
    rates.write_text(table({"('ResNet-18 (batch size 32)', 1)": 0.001, "('ResNet-18 (batch size 256)', 1)": 0.001}))
    path = write(tmp_path / "t.trace", GOOD + "\n")
    with pytest.raises(TraceError, match=r"days at 0\.001 steps/s; at most 365 days") as caught:
        load_workload(path, rates)
    assert caught.value.problems[0].field == "total_steps"


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"scale_factor": "3"}, "scale_factor", "on 3 GPU(s) in"),
        ({"scale_factor": "0"}, "scale_factor", "must be >= 1"),
        (
            {"job_type": "Recommendation (batch size 512)", "scale_factor": "2"},
            "scale_factor",
            "does not train distributed",
        ),
        ({"job_type": "ResNet-18 (batch size 0)"}, "job_type", "batch size must be >= 1"),
        ({"job_type": "ResNet-18 (batch size 48)"}, "job_type", "unknown model: no throughput"),
    ],
)
def test_a_bad_gang_or_batch_size_is_named_as_such(
    tmp_path: Path, changes: dict[str, str], field: str, words: str
) -> None:
    """A gang size the table lacks was reported as "unknown model" on the job_type field."""
    rates = tmp_path / "t.json"
    rates.write_text(table({f"('ResNet-18 (batch size {bs})', {g})": 10.0 for bs in (32, 256) for g in (1, 2)}))
    path = write(tmp_path / "t.trace", line(**changes) + "\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path, TableThroughputs.from_json(rates))
    problem = caught.value.problems[0]
    assert (problem.line, problem.field) == (1, field)
    assert words in problem.reason
    if field == "scale_factor" and "on 3" in words:
        assert "(only on 1, 2)" in problem.reason


def test_trace_check_refuses_gangs_larger_than_the_cluster_as_simulate_does(tmp_path: Path) -> None:
    path = write(tmp_path / "t.trace", line(scale_factor="4") + "\n")
    checked = shockwave("trace", "check", path, "--gpus", 2)
    simulated = shockwave("simulate", "--trace", path, "--policy", "fifo", "--gpus", 2)
    assert_cli_clean(checked, "field 'scale_factor'", "the cluster has only 2")
    assert_cli_clean(simulated)
    errors = [[x for x in r.stderr.splitlines() if x.startswith("error:")] for r in (checked, simulated)]
    assert errors[0] == errors[1] and len(errors[0]) == 1


UNKNOWN_TYPE = "the built-in throughput model has no rates for GPU type 'a100' of the cluster; it knows v100"


@pytest.mark.parametrize(
    "arguments",
    [
        ["trace", "check", "{trace}", "--cluster", "a100:32"],
        ["simulate", "--trace", "{trace}", "--policy", "fifo", "--cluster", "a100:32"],
        ["compare", "--trace", "{trace}", "--policies", "fifo,gavel", "--cluster", "a100:32", "--out", "{out}"],
        ["compare", "--trace", "{trace}", "--policies", "fifo", "--cluster", "v100:4,a100:32", "--out", "{out}"],
        ["sweep", "--trace", "{trace}", "--policies", "fifo", "--cluster", "a100:32", "--out", "{out}"],
    ],
    ids=["trace-check", "simulate", "compare", "compare-mixed", "sweep"],
)
def test_a_gpu_type_the_throughput_model_lacks_is_one_clear_refusal(
    good_trace: Path, tmp_path: Path, arguments: list[str]
) -> None:
    """Today: an UnknownThroughput traceback (simulate; compare twice, once per policy, after starting them), GPUs
    left idle beside known types, and `trace check` accepted the cluster."""
    filled = [a.format(trace=good_trace, out=tmp_path / "out") for a in arguments]
    result = shockwave(*filled)
    assert_cli_clean(result, UNKNOWN_TYPE)
    assert result.stderr.count("error:") == 1
    if arguments[0] == "compare":
        assert not (tmp_path / "out").exists()  # refused before any policy started


def test_a_gpu_type_a_table_lacks_is_refused_naming_the_table(good_trace: Path, tmp_path: Path) -> None:
    rates = write(
        tmp_path / "rates.json",
        table({"('ResNet-18 (batch size 32)', 1)": 12.5, "('ResNet-18 (batch size 256)', 1)": 3.0}),
    )
    with pytest.raises(InputError, match=f"the throughput table {rates} has no rates for GPU type 'k80'") as caught:
        simulate(good_trace, "fifo", ClusterSpec.parse("v100:2,k80:2"), preset("corrected"), rates)
    assert "it knows v100" in str(caught.value)


def test_report_prints_names_from_files_as_text_not_markup(saved_result: dict[str, Any], tmp_path: Path) -> None:
    """Today a results.json whose policy is `[red]x[/red]` printed red, and a `$` in a name failed the figures."""
    names = ["[red]x[/red]", "$\\foo$ [bold]y"]
    results = [{**saved_result, "policy": name, "trace": "/t/[i]t.trace"} for name in names]
    (tmp_path / "results.json").write_text(json.dumps(results))
    result = shockwave("report", tmp_path)
    assert result.returncode == 0, result.stderr
    for name in [*names, "[i]t.trace: 2 GPUs"]:
        assert name in result.stdout
    assert (tmp_path / "figures" / "metrics.png").exists()


def test_a_sweep_summary_prints_names_as_text(saved_result: dict[str, Any]) -> None:
    from shockwave.experiments.sweep import print_summary

    row = {"gpus": 2, "cluster": "[b]c[/b]", "policy": "[red]x[/red]", "cells": 1}
    row |= {
        f"{key}_{s}": 1.0
        for key in ("makespan_s", "avg_jct_s", "worst_ftf", "unfair_fraction")
        for s in ("mean", "min", "max")
    }
    console = Console(record=True, width=200)
    print_summary(console, [row], 1, 1)
    text = console.export_text()
    assert "[red]x[/red]" in text and "[b]c[/b]" in text


def test_simulate_round_seconds_inf_exits_2(good_trace: Path) -> None:
    """Today: OverflowError: cannot convert float infinity to integer (exit 1)."""
    result = shockwave("simulate", "--trace", good_trace, "--policy", "fifo", "--gpus", 2, "--round-seconds", "inf")
    assert_cli_clean(result, "--round-seconds must be > 0")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda m: m.with_round_seconds(math.inf), "--round-seconds must be > 0"),
        (lambda m: m.with_round_seconds(math.nan), "--round-seconds must be > 0"),
        (lambda m: m.with_round_seconds(-1.0), "--round-seconds must be > 0"),
        (lambda m: m.with_overrides(restart_cost_s=math.nan), "--restart-seconds: a restart cost must be >= 0"),
        (lambda m: m.with_overrides(restart_cost_s=math.inf), "--restart-seconds: a restart cost must be >= 0"),
        (lambda m: m.with_overrides(restart_cost_s=-1.0), "--restart-seconds: a restart cost must be >= 0"),
        (lambda m: m.with_overrides(min_realloc_interval_s=math.nan), "--realloc-seconds must be >= 0"),
        (lambda m: m.with_overrides(min_realloc_interval_s=math.inf), "--realloc-seconds must be >= 0"),
        (lambda m: m.with_overrides(restart_cost_by_gang={1: math.nan}), "--restart-seconds-by-gang"),
        (lambda m: m.with_overrides(restart_cost_by_gang={0: 5.0}), "gang sizes must be >= 1"),
    ],
)
def test_mechanics_refuse_times_that_are_not_finite(make: Callable[[Any], Any], words: str) -> None:
    """`--realloc-seconds nan` and `--restart-seconds inf` were accepted; the rest must keep failing."""
    with pytest.raises(InputError) as caught:
        make(preset("corrected"))
    assert words in str(caught.value)


def test_a_round_far_shorter_than_the_trace_is_refused(good_trace: Path) -> None:
    """1e-6 s rounds of a one-hour job: billions of rounds, a simulation that would never end."""
    mechanics = preset("corrected").with_round_seconds(1e-6).with_overrides(restart_cost_s=0.0)
    with pytest.raises(InputError, match="--round-seconds 1e-06 is too short for this trace"):
        simulate(good_trace, "fifo", ClusterSpec.of(2), mechanics)
    with pytest.raises(InputError, match="too short for this trace"):  # before any worker starts
        build_cells(CompareRequest(good_trace, 2, ["fifo"], round_seconds=1e-6))


@pytest.mark.parametrize(("flag", "value"), [("--gpus", "8.7"), ("--seeds", "1.5"), ("--gpus", "nan")])
def test_sweep_refuses_fractional_cluster_sizes_and_seeds(
    good_trace: Path, tmp_path: Path, flag: str, value: str
) -> None:
    """Today 8.7 GPUs silently became 8, 1.5 became seed 1, and nan was a traceback."""
    arguments = {"--gpus": "4", "--seeds": "0", flag: value}
    result = shockwave(
        "sweep", "--generate", "jobs=2", "--policies", "fifo", "--out", tmp_path / "out",
        *(item for pair in arguments.items() for item in pair),
    )  # fmt: skip
    assert_cli_clean(result, f"{flag} expects comma-separated whole numbers")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"jobs": 10**12}, "--jobs must be >= 1 and <= "),
        ({"num_durations": 10**12}, "--num-durations must be <= "),
        ({"max_hours": 1e308}, "--max-hours <= 8760"),
        ({"min_hours": math.nan}, "need 0 < --min-hours"),
        ({"lam": math.inf}, "--lam (mean inter-arrival seconds)"),
        ({"seed": -1}, "--seed must be >= 0"),
    ],
)
def test_generator_refuses_knobs_it_cannot_honour(change: dict[str, Any], words: str) -> None:
    """--jobs 10^12 ran out of memory, --max-hours 1e308 overflowed and --seed -1 failed inside NumPy."""
    with pytest.raises(InputError) as caught:
        replace(GeneratorParams(), **change).validate()
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("jobs=1.5", "'jobs' must be an integer"),
        ("jobs=nan", "'jobs' must be an integer"),
        ("lam=nan", "'lam' must be a finite number"),
        ("mode_mix=a/b/c", "'a' is not a number"),
        ("mode_mix=nan/0.5/0.5", "'mode_mix' must be a list of finite numbers"),
    ],
)
def test_sweep_generator_values_of_the_wrong_type_are_input_errors(text: str, words: str) -> None:
    """These were TypeError / ValueError tracebacks inside the generator."""
    with pytest.raises(InputError) as caught:
        parse_generator(text)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"future_rounds": 10**400}, "future_rounds"),
        ({"k": 10**400}, "k"),
        ({"future_rounds": 10**6}, "future_rounds"),
        ({"log_approximation_bases": [0, 10**400, 1]}, "log_approximation_bases"),
    ],
)
def test_config_numbers_python_cannot_hold_are_input_errors(raw: dict[str, Any], field: str) -> None:
    """A JSON integer of 400 digits was an OverflowError in the config reader."""
    with pytest.raises(InputError) as caught:
        ShockwaveConfig.from_mapping(raw, path="c.json")
    assert caught.value.field == field


@pytest.mark.parametrize(
    "entries",
    [
        {"('ResNet-18 (batch size 32)', True)": 10.0},
        {"('ResNet-18 (batch size 32)', 1)": True},
        {"('ResNet-18 (batch size 32)', 1)": 10**400},
        {"(" * 100_000: 10.0},
    ],
)
def test_throughput_tables_refuse_booleans_huge_numbers_and_deep_keys(tmp_path: Path, entries: dict[str, Any]) -> None:
    path = tmp_path / "t.json"
    path.write_text(table(entries))
    with pytest.raises(InputError) as caught:
        TableThroughputs.from_json(path)
    assert_clean(caught.value)


@pytest.mark.parametrize(
    "changes",
    [{"round_seconds": math.inf}, {"time_scale": math.nan}, {"realloc_seconds": math.nan}, {"realloc_seconds": -1.0}],
)
def test_run_refuses_times_that_are_not_finite(good_trace: Path, tmp_path: Path, changes: dict[str, float]) -> None:
    """`run --round-seconds inf` got past the `> 0` check; `--realloc-seconds` was not checked at all."""
    request = replace(RunRequest(trace=good_trace, policy="fifo", gpus=1, out=tmp_path / "out"), **changes)
    with pytest.raises(InputError, match=r"must be (a number from 0\.01|a number > 0|a finite number >= 0)"):
        run(request)


def test_a_byte_order_mark_is_accepted_everywhere(tmp_path: Path) -> None:
    """Trace, TOML, throughput and config files saved by Windows editors start with a UTF-8 byte-order mark."""
    trace = write(tmp_path / "t.trace", BOM + GOOD.encode() + b"\n")
    (job,) = read_trace(trace)
    assert job.model == "ResNet-18"
    sweep = write(tmp_path / "s.toml", BOM + b'policies = ["fifo"]\nseeds = [1]\n')
    assert load_toml(sweep) == {"policies": ["fifo"], "seeds": [1]}
    rates = write(tmp_path / "r.json", BOM + table({"('ResNet-18 (batch size 32)', 1)": 12.5}).encode())
    assert TableThroughputs.from_json(rates).throughput("ResNet-18", 32, 1) == 12.5
    config = write(tmp_path / "c.json", BOM + b'{"future_rounds": 10}')
    assert ShockwaveConfig.from_json(config).future_rounds == 10
    schedules = write(tmp_path / "b.json", BOM + b"{}")
    assert read_schedules(schedules, [job]) == {}


def test_sweep_of_a_latin1_trace_exits_2(tmp_path: Path) -> None:
    """Today: UnicodeDecodeError traceback (exit 1); `trace check` already said so."""
    trace = write(tmp_path / "latin1.trace", GOOD.replace("ResNet", "R\xe9sNet", 1).encode("latin-1") + b"\n")
    result = shockwave("sweep", "--trace", trace, "--gpus", 4, "--policies", "fifo", "--out", tmp_path / "out")
    assert_cli_clean(result, "latin1.trace:1: trace is not UTF-8 text: byte 0xe9")


def test_report_of_foreign_results_exits_2(tmp_path: Path) -> None:
    """Today: KeyError: 'policy' (exit 1)."""
    (tmp_path / "results.json").write_text('[{"hello": 1}]')
    assert_cli_clean(shockwave("report", tmp_path), "results.json: not a shockwave result", "'policy' is a required")


@pytest.mark.parametrize(
    "spec",
    ['{"cells": 5}', "[1]", '{"cells": [{"key": 3}]}', "", "\xe9"],
    ids=["int", "list", "key", "empty", "latin1"],
)
def test_report_of_a_foreign_sweep_json_is_an_input_error(tmp_path: Path, spec: str) -> None:
    (tmp_path / "sweep.json").write_bytes(spec.encode("latin-1"))
    with pytest.raises(InputError) as caught:
        render(tmp_path, Console(file=None, quiet=True))
    assert_clean(caught.value)


READ_FILE: dict[str, Callable[[Path], object]] = {
    "trace": read_trace,
    "throughputs": load_throughputs,
    "config": ShockwaveConfig.from_json,
    "sweep": load_toml,
    "results": store.read_json,
}


@pytest.mark.parametrize("reader", sorted(READ_FILE))
@pytest.mark.parametrize("kind", ["latin1", "folder", "missing", "empty", "nul"])
def test_every_reader_reports_unreadable_files(tmp_path: Path, reader: str, kind: str) -> None:
    """Non-UTF-8 bytes raised UnicodeDecodeError from every reader but the trace's."""
    path = tmp_path / "input"
    if kind == "folder":
        path.mkdir()
    elif kind != "missing":
        path.write_bytes({"latin1": LATIN1, "empty": b"", "nul": b"\x00\x00"}[kind])
    if reader == "sweep" and kind == "empty":
        assert load_toml(path) == {}  # an empty TOML file is an empty table; the sweep then names no workload
        return
    with pytest.raises(InputError) as caught:
        READ_FILE[reader](path)
    assert_clean(caught.value)
    assert str(path) in str(caught.value)


# -- item 7: no tracebacks, whatever the input (property-based) ---------------------------------------------------
def read_or_refuse(function: Callable[[], object]) -> None:
    """`function` succeeds or raises an InputError with one clean line; anything else fails the test."""
    try:
        function()
    except InputError as exc:
        assert_clean(exc)


FIELD_TEXT = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", " ", "1_000", "+5", "1e400", "-0", "nan", "inf", "\u00b2", "\u0663", "\x00", "\u2028"]),
    st.sampled_from(["ResNet-18 (batch size 0)", "A3C (batch size 4)", "LM (batch size 20)", "static", "gns"]),
)


@READERS
@given(data=st.binary(max_size=600), prefix=st.booleans())
def test_the_trace_reader_never_fails_on_random_bytes(folder: Path, data: bytes, prefix: bool) -> None:
    path = write(folder / "random.trace", (GOOD.encode() + b"\n" if prefix else b"") + data)
    read_or_refuse(lambda: load_workload(path, None))


@READERS
@given(
    changes=st.dictionaries(st.sampled_from(COLUMNS), FIELD_TEXT, max_size=4), extra=st.lists(FIELD_TEXT, max_size=2)
)
def test_the_trace_reader_never_fails_on_random_fields(folder: Path, changes: dict[str, str], extra: list[str]) -> None:
    fields = [*line(**changes).split("\t"), *extra]
    path = write(folder / "fields.trace", "\t".join(fields).replace("\n", " ") + "\n")
    read_or_refuse(lambda: load_workload(path, None))


def json_values(floats: st.SearchStrategy[float]) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none() | st.booleans() | st.integers() | floats | st.text(max_size=10),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
        max_leaves=12,
    )


JSON = json_values(st.floats())
JSON_NO_NAN = json_values(st.floats(allow_nan=False))
"""NaN compares false with every bound: JSON Schema lets it pass a minimum, our check (rightly) does not."""
THROUGHPUT_KEY = st.one_of(
    st.text(max_size=30),
    st.builds(
        lambda model, bs, gang: str((f"{model} (batch size {bs})", gang)),
        st.sampled_from(["ResNet-18", "LM", "A3C", "GPT"]),
        st.integers(min_value=-2, max_value=10**5),
        st.one_of(st.integers(min_value=-2, max_value=16), st.booleans(), st.floats()),
    ),
)


@READERS
@given(
    content=st.one_of(
        JSON.map(json.dumps),
        st.dictionaries(
            st.sampled_from(["v100", "k80"]),
            st.dictionaries(THROUGHPUT_KEY, st.one_of(JSON, st.fixed_dictionaries({"null": JSON})), max_size=4),
            max_size=2,
        ).map(json.dumps),
        st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    )
)
def test_the_throughput_reader_never_fails(folder: Path, content: str) -> None:
    path = folder / "rates.json"
    path.write_text(content, encoding="utf-8")
    read_or_refuse(lambda: TableThroughputs.from_json(path))


CONFIG_KEYS = [*ShockwaveConfig().to_json(), "lam", "unknown"]


@READERS
@given(
    raw=st.dictionaries(st.sampled_from(CONFIG_KEYS), JSON | st.integers(min_value=-(10**500), max_value=10**500)),
    raw_bytes=st.none() | st.binary(max_size=100),
)
def test_the_config_reader_never_fails(folder: Path, raw: dict[str, Any], raw_bytes: bytes | None) -> None:
    path = folder / "config.json"
    path.write_bytes(raw_bytes if raw_bytes is not None else json.dumps(raw).encode())
    read_or_refuse(lambda: ShockwaveConfig.from_json(path))


TOML_VALUE = st.recursive(
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.text(max_size=10)
    | st.sampled_from(["all", "fifo", "gavel", "reference", "corrected"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["jobs", "lam", "gpus", "trace", "generate", "mode_mix", "x"]), children)
    ),
    max_leaves=8,
)


@READERS
@given(
    raw=st.dictionaries(st.sampled_from([*sorted(TOP_KEYS), "other"]), TOML_VALUE, max_size=5),
    raw_bytes=st.none() | st.binary(max_size=200),
)
def test_the_sweep_reader_never_fails(folder: Path, raw: dict[str, Any], raw_bytes: bytes | None) -> None:
    """Random TOML bytes through the parser, and random tables (what a parser could give) through the checks."""
    path = folder / "sweep.toml"
    if raw_bytes is not None:
        path.write_bytes(raw_bytes)
        read_or_refuse(lambda: spec_from(load_toml(path), folder, path))
    read_or_refuse(lambda: spec_from(raw, folder, path))


@pytest.fixture(scope="module")
def saved_result(good_trace: Path) -> dict[str, Any]:
    result, run_ = simulate(good_trace, "fifo", ClusterSpec.of(2), preset("corrected"))
    return {**result, "timeline": [[r.time_s, r.running_jobs, r.busy_gpus] for r in run_.rounds]}


def test_a_saved_result_passes_the_check(saved_result: dict[str, Any], tmp_path: Path) -> None:
    assert check_results([saved_result], tmp_path / "results.json") == [saved_result]


@READERS
@given(data=st.data())
def test_a_damaged_result_is_refused_in_one_clean_line(saved_result: dict[str, Any], data: st.DataObject) -> None:
    """Any damage the result format forbids is refused with one clean message that says "not a shockwave result"."""
    result = copy.deepcopy(saved_result)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        target: Any = result
        while isinstance(target, dict | list) and target and data.draw(st.booleans()):
            keys = list(target) if isinstance(target, dict) else list(range(len(target)))
            key = data.draw(st.sampled_from(keys))
            if not isinstance(target[key], dict | list) or data.draw(st.booleans()):
                if isinstance(target, dict) and data.draw(st.booleans()):
                    del target[key]
                else:
                    target[key] = data.draw(JSON_NO_NAN)
                break
            target = target[key]
    try:
        check_result(result, Path("results.json"))
    except InputError as exc:
        assert_clean(exc)
        assert "not a shockwave result" in str(exc)


# -- the CLI: exit 0 or 2, never a traceback -----------------------------------------------------------------------
FLAG_VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e-300", "8.7", "1e308", "", "x", "1:nan", "0:1", "2:-1"]),
)


@CLI
@given(flag=st.sampled_from(["--round-seconds", "--restart-seconds", "--realloc-seconds", "--gpus",
                             "--gpus-per-server", "--restart-seconds-by-gang"]), value=FLAG_VALUE)  # fmt: skip
def test_simulate_flags_never_end_in_a_traceback(good_trace: Path, flag: str, value: str) -> None:
    result = shockwave("simulate", "--trace", good_trace, "--policy", "fifo", "--gpus", 2, f"{flag}={value}")
    assert result.returncode in (0, 2), result.stderr
    assert "Traceback" not in result.stderr
    if result.returncode == 2:
        assert result.stderr.strip()


@settings(CLI, max_examples=12)
@given(
    flag=st.sampled_from(["--gpus", "--seeds", "--generate"]),
    value=FLAG_VALUE | st.sampled_from(["jobs=1.5", "jobs=0", "lam=nan", "mode_mix=a/b", "jobs=2,seed=1", "=", ","]),
)
def test_sweep_flags_never_end_in_a_traceback(folder: Path, flag: str, value: str) -> None:
    """A good value runs a small sweep (finished cells are reused from one example to the next)."""
    arguments = {"--gpus": "4", "--seeds": "0", "--generate": "jobs=2", flag: value}
    if flag == "--generate":
        arguments[flag] = f"jobs=2,{value}"  # two jobs whatever else is set, or the sweep takes minutes
    result = shockwave(
        "sweep", "--policies", "fifo", "--out", folder / "sweep-out",
        *(item for pair in arguments.items() for item in pair),
    )  # fmt: skip
    assert result.returncode in (0, 2), result.stderr
    assert "Traceback" not in result.stderr


@CLI
@given(data=st.binary(max_size=300), gpus=st.none() | st.integers(min_value=-3, max_value=10**15))
def test_trace_check_never_ends_in_a_traceback(folder: Path, data: bytes, gpus: int | None) -> None:
    path = write(folder / "cli.trace", data)
    result = shockwave("trace", "check", path, *(("--gpus", gpus) if gpus is not None else ()))
    assert result.returncode in (0, 2), result.stderr
    assert "Traceback" not in result.stderr
