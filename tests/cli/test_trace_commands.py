"""The `shockwave trace` commands end to end, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CANONICAL_TRACE, require_reference, shockwave


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
    # each job counted to its last step (20518 and 19869 to the end of its last epoch)
    assert round(summary["lower_bound_arrival_plus_t_iso_s"]) == 20505
    assert round(summary["lower_bound_work_over_gpus_s"]) == 19725


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


GAVEL_LINES = (
    "ResNet-50 (batch size 64)\tpython3 main.py -b 64 %s/imagenet/\timage_classification/imagenet\t--num_minibatches\t"
    "1\t2931\t1\t1\t-1.000000\t0\n"
    "A3C\tpython3 main.py --env PongDeterministic-v4\trl\t--max-steps\t0\t60000\t1\t5\t-1.000000\t30\n"
)


def test_convert_gavel_to_gavel_keeps_the_bytes(tmp_path: Path) -> None:
    source = tmp_path / "g.trace"
    source.write_text(GAVEL_LINES)
    result = shockwave("trace", "convert", source, "--format", "gavel", "-o", tmp_path / "out.trace")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.trace").read_text() == GAVEL_LINES
    assert "wrote 2 jobs" in result.stderr and "from Gavel's 10-column format" in result.stderr


def test_convert_ours_to_gavel_and_back(tmp_path: Path, canonical_trace: Path) -> None:
    gavel = shockwave("trace", "convert", canonical_trace, "--format", "gavel", cwd=tmp_path)
    assert gavel.returncode == 0, gavel.stderr
    written = tmp_path / f"{canonical_trace.stem}.gavel.trace"
    assert {len(line.split("\t")) for line in written.read_text().splitlines()} == {10}
    assert "116 adaptive job(s) written without their mode and duration" in gavel.stderr
    back = shockwave("trace", "convert", written, "--format", "shockwave", "-o", tmp_path / "ours.trace")
    assert back.returncode == 0, back.stderr
    ours = [line.split("\t") for line in (tmp_path / "ours.trace").read_text().splitlines()]
    original = [line.split("\t") for line in canonical_trace.read_text().splitlines()]
    assert [r[:7] + r[8:10] + r[11:] for r in ours] == [r[:7] + r[8:10] + r[11:] for r in original]
    assert {(r[7], r[10]) for r in ours} == {("static", "0")}


def test_convert_refuses_unknown_formats_and_overwriting_its_input(tmp_path: Path) -> None:
    source = tmp_path / "g.trace"
    source.write_text(GAVEL_LINES)
    result = shockwave("trace", "convert", source, "--format", "gavel-msr")
    assert result.returncode == 2 and "unknown --format 'gavel-msr'; choose shockwave or gavel" in result.stderr
    result = shockwave("trace", "convert", source, "--format", "gavel", "-o", source)
    assert result.returncode == 2 and "would overwrite the trace being converted" in result.stderr
    assert source.read_text() == GAVEL_LINES
    bad = tmp_path / "bad.trace"
    bad.write_text(GAVEL_LINES.replace("\t2931\t", "\tmany\t"))
    result = shockwave("trace", "convert", bad, "--format", "shockwave", "-o", tmp_path / "x.trace")
    assert result.returncode == 2 and f"{bad}:1: field 'total_steps': expected an integer" in result.stderr
    assert not (tmp_path / "x.trace").exists()


def test_check_of_an_msr_trace_lists_the_estimated_throughputs(reference: Path) -> None:
    trace = require_reference("gavel", "traces", "msr_seed0", "2869ce.trace")
    table = require_reference("gavel", "simulation_throughputs.json")
    result = shockwave("trace", "check", trace, "--throughputs", table, "--cluster", "v100:32,p100:32,k80:32", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["summary"]["jobs"] == 533 and data["summary"]["modes"] == {"static": 533}
    estimated = data["estimated"]
    assert {e["gpu_type"] for e in estimated} == {"v100", "p100", "k80"}
    a3c = [e for e in estimated if (e["model"], e["gpus"], e["gpu_type"]) == ("A3C", 32, "k80")]
    assert [e["basis"] for e in a3c] == ["the table's 1-GPU rate: does not train distributed"]
    readable = shockwave("trace", "check", trace, "--throughputs", table)
    assert readable.returncode == 0, readable.stderr
    assert "throughput(s) estimated on v100: not in" in readable.stdout
    strict = shockwave("trace", "check", trace)  # the built-in model knows no A3C or CycleGAN
    assert strict.returncode == 2 and "unknown model: no throughput for A3C" in strict.stderr


def test_a_gavel_trace_carries_its_seed_to_simulate(tmp_path: Path) -> None:
    """Gavel's simulator draws its workload and its policies' choices from one seed: a trace generated with seed 3
    is simulated with seed 3 unless --seed says otherwise (with seed 0 instead, FIFO on seed 3's workload at 4
    jobs/h was 19.5% off the reference), and the preset's rounds are Gavel's 360 s."""
    made = shockwave(
        "trace", "generate", "--style", "gavel", "--jobs", 40, "--jobs-per-hour", 4, "--seed", 3, "--throughputs",
        "gavel", "-o", tmp_path / "g.trace",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "g.trace").read_text().startswith("# generator: style=gavel jobs=40 lam=900.0 seed=3 ")
    run = ("simulate", "--trace", tmp_path / "g.trace", "--policy", "max_min_fairness", "--cluster",
           "v100:4,p100:4,k80:4", "--throughputs", "gavel", "--mechanics", "gavel", "--json")  # fmt: skip
    own, other = shockwave(*run), shockwave(*run, "--seed", 0)
    assert own.returncode == 0 and other.returncode == 0, own.stderr + other.stderr
    mine, theirs = json.loads(own.stdout), json.loads(other.stdout)
    assert (mine["seed"], theirs["seed"], mine["round_seconds"]) == (3, 0, 360)
    assert mine["avg_jct_s"] != theirs["avg_jct_s"]  # the agnostic policies shuffle the types from the seeded stream
