"""Issue 15's defects, each reproduced as a user met it: dropped jobs, results reused by path, work lost to an
unwritable output, numbers that float with the install, and noisy or mangled output."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from conftest import CANONICAL_TRACE, ROOT, require_reference, shockwave
from shockwave.core.errors import InputError
from shockwave.experiments import store
from shockwave.experiments.cell import without_timing


@pytest.fixture(scope="module")
def gappy_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The issue's repro: 30 jobs an average 1200 s apart leave 32 GPUs empty between arrivals."""
    path = tmp_path_factory.mktemp("gappy") / "l.trace"
    done = shockwave("trace", "generate", "--jobs", 30, "--lam", 1200, "--seed", 1, "-o", path)
    assert done.returncode == 0, done.stderr
    return path


def _generated(path: Path, seed: int) -> Path:
    from shockwave.workload_model.generator import GeneratorParams, generate
    from shockwave.workload_model.throughput import load_throughputs
    from shockwave.workload_model.trace import write_trace

    params = GeneratorParams(jobs=12, min_hours=0.1, max_hours=0.4, lam=60.0, seed=seed)
    write_trace(generate(params, load_throughputs(None)), path)
    return path


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 short jobs, gangs of 1-4 (built-in throughput model)."""
    return _generated(tmp_path_factory.mktemp("small") / "small.trace", seed=3)


# -- 1. no silently dropped jobs -------------------------------------------------------------------------------------
def test_the_default_mechanics_run_every_job(gappy_trace: Path) -> None:
    done = shockwave("simulate", "--trace", gappy_trace, "--policy", "gavel", "--gpus", 32, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["mechanics"] == "corrected" and result["complete"] is True
    assert len(result["jobs"]) == 30 and result["makespan_s"] >= result["makespan_lower_bound_s"]


def test_unfinished_jobs_are_named_and_fail_the_run(gappy_trace: Path) -> None:
    args = ("simulate", "--trace", gappy_trace, "--policy", "gavel", "--gpus", 32, "--mechanics", "reference")
    done = shockwave(*args, "--json")
    assert done.returncode == 3
    result = json.loads(done.stdout)
    assert result["complete"] is False and len(result["unfinished_jobs"]) == 29
    assert "29 of 30 never finished" in done.stderr and "Traceback" not in done.stderr
    table = shockwave(*args)
    assert table.returncode == 3 and "unfinished jobs" in table.stdout and "x the lower bound" not in table.stdout
    assert shockwave(*args, "--allow-unfinished").returncode == 0


def test_comparisons_flag_policies_that_left_jobs_unfinished(gappy_trace: Path, tmp_path: Path) -> None:
    args = ("compare", "--trace", gappy_trace, "--gpus", 32, "--policies", "gavel,fifo", "--mechanics", "reference")
    done = shockwave(*args, "--out", tmp_path / "cmp")
    assert done.returncode == 3, done.stderr
    assert "(29 unfinished)" in done.stdout
    assert shockwave(*args, "--out", tmp_path / "cmp", "--allow-unfinished").returncode == 0


# -- 4. work is reused whatever the path -----------------------------------------------------------------------------
def test_sweep_cells_are_found_by_content_not_by_path(small_trace: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    shutil.copy(small_trace, first / "w.trace")
    out = tmp_path / "sweep"
    args = ("--gpus", "4,8", "--policies", "gavel,fifo", "--out", out)
    done = shockwave("-q", "sweep", "--trace", "w.trace", *args, cwd=first)
    assert done.returncode == 0, done.stderr
    assert "4 computed, 0 reused" in done.stdout
    assert (
        "4 of 4 cells finished" in done.stdout and "cells finished" not in done.stderr
    )  # where compare puts its table
    again = shockwave("-q", "sweep", "--trace", first / "w.trace", *args, cwd=second)  # absolute, elsewhere
    assert "0 computed, 4 reused" in again.stdout, again.stderr
    moved = tmp_path / "moved"
    first.rename(moved)
    renamed = moved / "renamed.trace"
    (moved / "w.trace").rename(renamed)
    assert "0 computed, 4 reused" in shockwave("-q", "sweep", "--trace", renamed, *args).stdout


def test_an_output_folder_has_one_writer_and_one_kind_of_results(small_trace: Path, tmp_path: Path) -> None:
    sweep_out, cmp_out = tmp_path / "sweep", tmp_path / "cmp"
    compare = ("compare", "--gpus", 4, "--policies", "gavel")
    made = shockwave("-q", "sweep", "--trace", small_trace, "--gpus", 4, "--policies", "gavel", "--out", sweep_out)
    assert made.returncode == 0, made.stderr
    into_sweep = shockwave(*compare, "--trace", small_trace, "--out", sweep_out)
    assert into_sweep.returncode == 2 and "holds a sweep's results" in into_sweep.stderr
    assert shockwave(*compare, "--trace", small_trace, "--out", cmp_out).returncode == 0
    assert shockwave(*compare, "--trace", small_trace, "--out", cmp_out).returncode == 0  # the same again: fine
    other = _generated(tmp_path / "other.trace", seed=4)
    mixed = shockwave(*compare, "--trace", other, "--out", cmp_out)
    assert mixed.returncode == 2 and "another trace, cluster or settings" in mixed.stderr
    identity = json.loads((cmp_out / store.MARKER).read_text())["identity"]
    with store.claimed(cmp_out, "comparison", identity):  # as a running comparison of the same inputs holds it
        busy = shockwave(*compare, "--trace", small_trace, "--out", cmp_out)
    assert busy.returncode == 2 and "another shockwave sweep or comparison is writing" in busy.stderr


# -- 5. check before working -----------------------------------------------------------------------------------------
def test_output_locations_are_checked_before_any_work(small_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import shockwave.api
    import shockwave.cli.trace
    from shockwave.cli import app

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("work started before the output location was checked")

    monkeypatch.setattr(shockwave.api, "simulate", never)  # what `simulate` calls, looked up when it runs
    monkeypatch.setattr(shockwave.cli.trace, "generate", never)
    runner = CliRunner()
    for args in (
        ["simulate", "--trace", str(small_trace), "--policy", "gavel", "--gpus", "4", "--out", "/proc/x"],
        ["trace", "generate", "-o", "/proc/x/l.trace"],
    ):
        result = runner.invoke(app, args)
        assert isinstance(result.exception, InputError), result.output
        assert "/proc/x" in str(result.exception)


# -- 8. the same numbers on every install, whatever the load ---------------------------------------------------------
def test_the_installed_solver_stack_is_the_pinned_one() -> None:
    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line)
    assert {"highspy", "scipy", "numpy", "cvxpy"} <= pins.keys()
    assert {name: version(name) for name in pins} == pins


def test_every_result_says_what_made_it(small_trace: Path) -> None:
    done = shockwave("simulate", "--trace", small_trace, "--policy", "fifo", "--gpus", 4, "--json")
    provenance = json.loads(done.stdout)["provenance"]
    assert provenance["versions"]["highspy"] == version("highspy")
    assert provenance["mechanics"]["name"] == "corrected" and "stop_when_cluster_empty" in provenance["mechanics"]
    assert provenance["command"][:2] == ["shockwave", "simulate"]


def test_no_solve_is_limited_by_the_clock() -> None:
    import highspy
    import numpy as np

    from shockwave.policies.shockwave.config import ShockwaveConfig
    from shockwave.policies.shockwave.market import _solver

    lp = highspy.HighsLp()
    solver = _solver(lp, ShockwaveConfig(solver_timeout=0.001))
    options = {name: solver.getOptionValue(name)[1] for name in ("time_limit", "threads", "mip_max_nodes")}
    assert options == {"time_limit": np.inf, "threads": 1, "mip_max_nodes": 10_000}


def _burn(seconds: float) -> None:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.slow
def test_the_canonical_run_is_identical_under_a_cpu_hog_and_quiet(tmp_path: Path) -> None:
    """README's own Shockwave command: no banner, no warning for a job that finished, and the same JSON when two
    processes burn both cores beside it."""
    reference = require_reference()
    args = (
        "simulate",
        "--trace",
        reference / "traces" / CANONICAL_TRACE,
        "--throughputs",
        reference / "throughputs" / "tacc_throughputs.json",
        "--gpus",
        32,
        "--policy",
        "shockwave",
        "--config",
        reference / "configurations" / "tacc_32gpus.json",
        "--mechanics",
        "reference",
        "--json",
    )
    calm = shockwave(*args)
    assert calm.returncode == 0, calm.stderr
    assert calm.stderr == "", calm.stderr  # no HiGHS banner, no "giving up" on a finished job
    hogs = [mp.get_context("spawn").Process(target=_burn, args=(600,)) for _ in range(2)]
    for hog in hogs:
        hog.start()
    try:
        loaded = shockwave(*args)
    finally:
        for hog in hogs:
            hog.kill()
    assert without_timing(json.loads(calm.stdout)) == without_timing(json.loads(loaded.stdout))


def test_docs_results_table_is_the_simulations_own() -> None:
    require_reference()
    done = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "docs_tables.py", "--check", "--traces", "120"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# -- 10. quiet, clear output -----------------------------------------------------------------------------------------
def test_help_is_for_users() -> None:
    for command in ([], ["simulate"], ["sweep"], ["compare"], ["run"]):
        text = shockwave(*command, "--help").stdout
        assert "<bool>" not in text and "InputError" not in text, command
    assert "--allow-unfinished" in shockwave("simulate", "--help").stdout


def test_verbosity_flags_change_what_is_logged(small_trace: Path) -> None:
    args = ("simulate", "--trace", small_trace, "--policy", "themis", "--gpus", 4, "--json")
    assert "DEBUG" in shockwave("-v", *args).stderr
    assert shockwave("-q", *args).stderr == ""


def test_paths_in_messages_are_printed_literally(small_trace: Path, tmp_path: Path) -> None:
    folder = tmp_path / "results[v2]"
    folder.mkdir()
    trace = folder / "my.trace"
    shutil.copy(small_trace, trace)
    done = shockwave("simulate", "--trace", trace, "--policy", "gavel", "--gpus", 1)
    assert done.returncode == 2 and str(trace) in done.stderr, done.stderr
    generated = shockwave("trace", "generate", "--jobs", 3, "-o", folder / "g[1].trace")
    assert str(folder / "g[1].trace") in generated.stderr


def test_sweeps_and_comparisons_print_a_line_per_result_into_a_pipe(small_trace: Path, tmp_path: Path) -> None:
    done = shockwave("sweep", "--trace", small_trace, "--gpus", "4,8", "--policies", "fifo", "--out", tmp_path / "s")
    assert done.returncode == 0, done.stderr
    finished = [line for line in done.stderr.splitlines() if line.startswith(("[1/2]", "[2/2]"))]
    assert len(finished) == 2 and all("makespan" in line for line in finished), done.stderr
    compared = shockwave("compare", "--trace", small_trace, "--gpus", 4, "--policies", "fifo", "--out", tmp_path / "c")
    assert any(line.startswith("fifo: makespan") for line in compared.stderr.splitlines()), compared.stderr
    assert "0:00:" not in done.stderr + compared.stderr  # no progress bars (their elapsed-time column) in a log


def test_nothing_reaches_stdout_but_the_json(small_trace: Path) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "shockwave",
            "simulate",
            "--trace",
            small_trace,
            "--policy",
            "shockwave",
            "--gpus",
            "4",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["policy"] == "shockwave"
    assert "HiGHS" not in done.stderr
