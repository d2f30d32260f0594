"""The `shockwave trace` commands end to end, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CANONICAL_TRACE, shockwave


def test_version_and_help() -> None:
    assert shockwave("--version").stdout.startswith("shockwave ")
    assert "trace" in shockwave("--help").stdout


def test_generate_regenerates_canonical_trace(tmp_path: Path, tacc_path: Path, canonical_trace: Path) -> None:
    result = shockwave(
        "trace",
        "generate",
        "--jobs",
        120,
        "--min-hours",
        0.2,
        "--max-hours",
        5,
        "--num-durations",
        100,
        "--lam",
        40,
        "--seed",
        25,
        "--mode-mix",
        "0,0.5,0.5",
        "--gpu-mix",
        "0.6,0.3,0.09,0.01",
        "--throughputs",
        tacc_path,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / CANONICAL_TRACE).read_bytes() == canonical_trace.read_bytes()


def test_check_json(tmp_path: Path, tacc_path: Path, canonical_trace: Path) -> None:
    result = shockwave("trace", "check", canonical_trace, "--throughputs", tacc_path, "--gpus", 32, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert len(data["jobs"]) == 120
    assert set(data["jobs"][0]) == {
        "id",
        "model",
        "batch_size",
        "scale_factor",
        "mode",
        "arrival_s",
        "total_steps",
        "epochs",
        "t_isolated_s",
        "batch_sizes",
    }
    summary = data["summary"]
    assert summary["jobs"] == 120
    assert summary["modes"] == {"accordion": 59, "gns": 57, "static": 4}  # spec §1.3
    assert summary["scale_factors"] == {"1": 92, "2": 20, "4": 8}
    assert round(summary["total_gpu_hours"] * 3600) == 635795
    assert round(summary["lower_bound_arrival_plus_t_iso_s"]) == 20518
    assert round(summary["lower_bound_work_over_gpus_s"]) == 19869


def test_check_readable_summary_with_builtin_model(tmp_path: Path) -> None:
    trace = tmp_path / "small.trace"
    assert shockwave("trace", "generate", "--jobs", 12, "-o", trace).returncode == 0
    result = shockwave("trace", "check", trace, "--gpus", 4)
    assert result.returncode == 0, result.stderr
    assert "makespan lower bound" in result.stdout


def test_check_lists_every_problem_and_exits_nonzero(tmp_path: Path, canonical_trace: Path) -> None:
    lines = canonical_trace.read_text().splitlines()
    lines[2] = lines[2].replace("\tgns\t", "\tturbo\t")
    lines[5] = "\t".join(lines[5].split("\t")[:11])
    bad = tmp_path / "bad.trace"
    bad.write_text("\n".join(lines) + "\n")
    result = shockwave("trace", "check", bad)
    assert result.returncode == 2
    assert f"{bad}:3: field 'mode': unknown mode 'turbo'" in result.stderr
    assert f"{bad}:6: expected 12 tab-separated columns, found 11" in result.stderr
    assert result.stdout == ""


def test_missing_files_are_clear_errors(tmp_path: Path) -> None:
    result = shockwave("trace", "check", tmp_path / "none.trace")
    assert result.returncode == 2 and "trace file not found" in result.stderr
    result = shockwave("trace", "generate", "--throughputs", tmp_path / "none.json", "-o", tmp_path / "x.trace")
    assert result.returncode == 2 and "throughput file not found" in result.stderr
    result = shockwave("trace", "generate", "--gpu-mix", "a,b", "-o", tmp_path / "x.trace")
    assert result.returncode == 2 and "--gpu-mix" in result.stderr
