"""Trace reading, writing and validation."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REFERENCE, require_reference
from shockwave.core.errors import InputError
from shockwave.workload_model.throughput import TableThroughputs
from shockwave.workload_model.trace import (
    COLUMNS,
    GAVEL_COLUMNS,
    GAVEL_FORMAT,
    GAVEL_MSR_COLUMNS,
    TraceError,
    format_gavel_line,
    format_line,
    generator_header,
    generator_seed,
    read_trace,
    trace_format,
    write_trace,
)

GOOD = (
    "ResNet-18 (batch size 32)\tpython3 main.py --data_dir=%s/cifar10 --batch_size 32\t"
    "image_classification/cifar10\t--num_steps\t1\t143450\t1\taccordion\t1\t-1.000000\t3338\t55"
)


def fields(**changes: str) -> str:
    values = dict(zip(COLUMNS, GOOD.split("\t"), strict=True))
    values.update(changes)
    return "\t".join(values.values())


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "t.trace"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _reference_traces() -> list[str]:
    """Names of the released traces; without ../shared one name that skips (fails in CI), not the whole module."""
    folder = REFERENCE / "traces"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else ["(none)"]


@pytest.mark.parametrize("name", _reference_traces())
def test_reference_traces_round_trip_byte_for_byte(name: str) -> None:
    path = require_reference("traces") / name
    text = path.read_text()
    jobs = read_trace(path)
    assert "".join(format_line(j) + "\n" for j in jobs) == text


def test_fields_are_typed(tmp_path: Path) -> None:
    (job,) = read_trace(write(tmp_path, GOOD))
    assert (job.model, job.batch_size, job.total_steps, job.scale_factor) == ("ResNet-18", 32, 143450, 1)
    assert (job.mode, job.duration, job.arrival, job.slo) == ("accordion", 3338, 55.0, -1.0)


def test_fractional_arrival_survives_round_trip(tmp_path: Path) -> None:
    (job,) = read_trace(write(tmp_path, fields(arrival_time="12.5")))
    assert job.arrival == 12.5
    assert format_line(job).endswith("\t12.5")


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        (fields(total_steps="many"), "total_steps", "expected an integer"),
        (fields(total_steps="-5"), "total_steps", "must be >= 1"),
        (fields(duration="-1"), "duration", "must be >= 0"),
        (fields(duration="1.5h"), "duration", "expected an integer"),
        (fields(arrival_time="-3"), "arrival_time", "must be >= 0"),
        (fields(arrival_time="soon"), "arrival_time", "expected a number"),
        (fields(arrival_time="nan"), "arrival_time", "finite"),
        (fields(scale_factor="0"), "scale_factor", "must be >= 1"),
        (fields(mode="elastic"), "mode", "unknown mode"),
        (fields(job_type="GPT-9 (batch size 32)"), "job_type", "unknown model"),
        (fields(job_type="ResNet-18"), "job_type", "batch size"),
        (fields(needs_data_dir="yes"), "needs_data_dir", "expected 0 or 1"),
    ],
)
def test_bad_field_names_file_line_and_field(tmp_path: Path, line: str, field: str, words: str) -> None:
    path = write(tmp_path, GOOD, line)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    problem = info.value.problems[0]
    assert (problem.path, problem.line, problem.field) == (str(path), 2, field)
    assert words in problem.reason
    assert f"{path}:2: field '{field}'" in str(info.value)


def test_wrong_column_count(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, GOOD + "\textra")
    with pytest.raises(TraceError, match="expected 12 tab-separated columns, found 13") as info:
        read_trace(path)
    assert info.value.problems[0].line == 2


def test_every_problem_is_listed(tmp_path: Path) -> None:
    path = write(tmp_path, fields(mode="x"), GOOD, fields(total_steps="-1", scale_factor="0"))
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert [(p.line, p.field) for p in info.value.problems] == [(1, "mode"), (3, "total_steps"), (3, "scale_factor")]
    assert "and 2 more" in str(info.value)


def test_unknown_throughput_is_unknown_model(tmp_path: Path, tacc_path: Path) -> None:
    table = TableThroughputs.from_json(tacc_path)
    path = write(tmp_path, GOOD, fields(job_type="Transformer (batch size 256)"))
    with pytest.raises(TraceError, match="unknown model: no throughput for Transformer") as info:
        read_trace(path, table)
    assert info.value.problems[0].line == 2


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="trace is empty"):
        read_trace(write(tmp_path))
    with pytest.raises(InputError, match="not found"):
        read_trace(tmp_path / "nope.trace")


def test_out_of_order_arrivals_are_sorted_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, fields(arrival_time="90"), fields(arrival_time="10"), fields(arrival_time="50"))
    with caplog.at_level(logging.WARNING):
        jobs = read_trace(path)
    assert [j.arrival for j in jobs] == [10, 50, 90]
    assert "out of order" in caplog.text


# -- Gavel's formats ------------------------------------------------------------------------------------------------

GAVEL = (
    "ResNet-50 (batch size 64)\tpython3 main.py -j 2 -a resnet50 -b 64 %s/imagenet/\timage_classification/imagenet\t"
    "--num_minibatches\t1\t2931\t2\t5\t-1.000000\t120"
)
MSR = (
    "Transformer (batch size 256)\tcd %s/translation && python3 train.py -data %s/multi30k.pt -batch_size 256\t"
    "-step\t1\t981830\t352430.000000\t32"
)


def gavel_fields(**changes: str) -> str:
    values = dict(zip(GAVEL_COLUMNS, GAVEL.split("\t"), strict=True))
    values.update(changes)
    return "\t".join(values.values())


def msr_fields(**changes: str) -> str:
    values = dict(zip(GAVEL_MSR_COLUMNS, MSR.split("\t"), strict=True))
    values.update(changes)
    return "\t".join(values.values())


def test_gavel_10_column_lines_are_static_jobs_of_unstated_duration(tmp_path: Path) -> None:
    (job,) = read_trace(write(tmp_path, GAVEL))
    assert (job.model, job.batch_size, job.total_steps, job.scale_factor) == ("ResNet-50", 64, 2931, 2)
    assert (job.mode, job.duration, job.priority_weight, job.slo, job.arrival) == ("static", 0, 5.0, -1.0, 120.0)
    assert job.working_directory == "image_classification/imagenet" and job.num_steps_arg == "--num_minibatches"
    assert trace_format(tmp_path / "t.trace") is GAVEL_FORMAT


def test_gavel_msr_7_column_lines_end_with_the_gang(tmp_path: Path) -> None:
    """Transformer at batch 256 is beyond the catalog's 128 but a static job: accepted."""
    (job,) = read_trace(write(tmp_path, MSR))
    assert (job.model, job.batch_size, job.total_steps, job.scale_factor) == ("Transformer", 256, 981830, 32)
    assert (job.mode, job.duration, job.arrival, job.priority_weight, job.slo) == ("static", 0, 352430.0, 1.0, -1.0)
    assert job.working_directory == "" and job.num_steps_arg == "-step"


def test_gavel_names_a_one_batch_size_family_bare(tmp_path: Path) -> None:
    jobs = read_trace(write(tmp_path, msr_fields(job_type="A3C", needs_data_dir="0", scale_factor="8")))
    assert (jobs[0].model, jobs[0].batch_size, jobs[0].scale_factor, jobs[0].needs_data_dir) == ("A3C", 4, 8, False)
    assert format_gavel_line(jobs[0]).startswith("A3C\t")


def test_msr_jobs_of_no_gpu_are_skipped_as_gavel_did(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        jobs = read_trace(write(tmp_path, MSR, msr_fields(scale_factor="0"), MSR))
    assert len(jobs) == 2
    assert "skipped 1 job(s) of 0 GPUs (first on line 2)" in caplog.text


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        (gavel_fields(priority_weight="high"), "priority_weight", "expected a number"),
        (gavel_fields(SLO="inf"), "SLO", "finite"),
        (gavel_fields(scale_factor="0"), "scale_factor", "must be >= 1"),
        (gavel_fields(total_steps="2,931"), "total_steps", "expected an integer"),
        (gavel_fields(arrival_time="-1"), "arrival_time", "must be >= 0"),
        (gavel_fields(job_type="GPT-9 (batch size 8)"), "job_type", "unknown model"),
        (gavel_fields(needs_data_dir="2"), "needs_data_dir", "expected 0 or 1"),
        (msr_fields(arrival_time="later"), "arrival_time", "expected a number"),
        (msr_fields(scale_factor="-4"), "scale_factor", "must be >= 1"),
        (msr_fields(total_steps="0"), "total_steps", "must be >= 1"),
    ],
)
def test_bad_gavel_field_names_file_line_and_field(tmp_path: Path, line: str, field: str, words: str) -> None:
    good = GAVEL if len(line.split("\t")) == len(GAVEL_COLUMNS) else MSR
    path = write(tmp_path, good, line)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.field) == (str(path), 2, field)
    assert words in problem.reason
    assert f"{path}:2: field '{field}'" in str(info.value)


def test_the_format_is_the_one_most_lines_have(tmp_path: Path) -> None:
    """A broken first line does not turn the file into another format: the majority decides."""
    path = write(tmp_path, GOOD, GAVEL, GAVEL, GAVEL)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    (problem,) = info.value.problems
    assert problem.line == 1
    assert (
        problem.reason == "expected 10 tab-separated columns, found 12 (the file's other lines are in Gavel's "
        "10-column format)"
    )


def test_a_file_of_no_known_format_says_which_there_are(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as info:
        read_trace(write(tmp_path, "a\tb\tc", "d"))
    assert [p.line for p in info.value.problems] == [1, 2]
    reason = info.value.problems[0].reason
    assert "12 (shockwave's 12-column format)" in reason and "10 (Gavel's" in reason and "7 (the 7-column" in reason
    assert reason.endswith("found 3")


def test_adaptive_jobs_cannot_hold_a_gang_their_family_cannot_train_on(tmp_path: Path) -> None:
    """Static jobs can (Gavel's Philly traces give every family gangs): the throughput model decides their rate."""
    line = fields(job_type="Recommendation (batch size 512)", scale_factor="4")
    with pytest.raises(TraceError, match="does not train distributed: its gang size must be 1"):
        read_trace(write(tmp_path, line))
    (job,) = read_trace(
        write(tmp_path, fields(job_type="Recommendation (batch size 512)", scale_factor="4", mode="static"))
    )
    assert job.scale_factor == 4


def test_gavel_lines_round_trip_byte_for_byte(tmp_path: Path) -> None:
    lines = [gavel_fields(arrival_time=t) for t in ("0", "7", "7", "12.25", "3600")]
    path = write(tmp_path, *lines)
    out = tmp_path / "out.trace"
    write_trace(read_trace(path), out, "gavel")
    assert out.read_bytes() == path.read_bytes()


LINE_BREAKS = "\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines() breaks, and the tab
FREE_TEXT = st.text(st.characters(blacklist_characters=LINE_BREAKS, blacklist_categories=("Cs",)), max_size=12)
ARRIVAL = st.one_of(
    st.integers(min_value=0, max_value=10**7),
    st.floats(min_value=0, max_value=1e7).filter(lambda x: not x.is_integer()),
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["ResNet-18 (batch size 16)", "Transformer (batch size 256)", "A3C", "CycleGAN"]),
            FREE_TEXT,
            st.booleans(),
            st.integers(min_value=1, max_value=10**12),
            st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
            st.integers(min_value=0, max_value=10),
            st.one_of(st.just(-1.0), st.floats(min_value=0.1, max_value=100.0)),
        ),
        min_size=1,
        max_size=6,
    ),
    arrivals=st.lists(ARRIVAL, min_size=6, max_size=6).map(sorted),
)
def test_any_trace_in_gavels_formatting_round_trips(
    tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, str, bool, int, int, int, float]], arrivals: list
) -> None:
    """What Gavel's generator writes (%d integers, %f SLO; an arrival as an integer or, if fractional, exactly)
    reads and writes back to the same bytes."""
    lines = [
        "\t".join(
            (job_type, command, "folder", "--steps", str(int(data)), str(steps), str(gang), str(prio), f"{slo:f}")
        )
        + "\t"
        + (str(arrival) if isinstance(arrival, int) else repr(arrival))
        for (job_type, command, data, steps, gang, prio, slo), arrival in zip(rows, arrivals, strict=False)
    ]
    folder = tmp_path_factory.mktemp("gavel")
    path = write(folder, *lines)
    out = folder / "out.trace"
    write_trace(read_trace(path), out, "gavel")
    assert out.read_bytes() == path.read_bytes()


def test_our_trace_in_gavels_format_keeps_all_but_mode_and_duration(tmp_path: Path) -> None:
    ours = read_trace(write(tmp_path, GOOD, fields(arrival_time="60.5", priority_weight="0.5")))
    out = tmp_path / "gavel.trace"
    write_trace(ours, out, "gavel")
    back = read_trace(out)
    assert trace_format(out) is GAVEL_FORMAT
    assert [replace(j, mode="static", duration=0) for j in ours] == back


def test_writing_an_unknown_or_read_only_format_is_refused(tmp_path: Path) -> None:
    jobs = read_trace(write(tmp_path, GOOD))
    for name in ("gavel-msr", "csv"):
        with pytest.raises(InputError, match="choose shockwave or gavel"):
            write_trace(jobs, tmp_path / "x.trace", name)


@pytest.fixture(scope="module")
def msr_traces() -> list[Path]:
    return sorted(require_reference("gavel", "traces", "msr_seed0").glob("*.trace"))


def test_every_msr_trace_reads_and_its_columns_mean_what_we_say(msr_traces: list[Path]) -> None:
    """Column 6 is the arrival (non-decreasing in every file), column 7 Philly's GPU count (its odd 7, 12, 20, 24
    GPUs included), never 0 in these files."""
    gangs: set[int] = set()
    for path in msr_traces:
        rows = [line.split("\t") for line in path.read_text().splitlines()]
        arrivals = [float(r[5]) for r in rows]
        assert arrivals == sorted(arrivals), path.name
        jobs = read_trace(path)
        assert len(jobs) == len(rows) and all(j.mode == "static" for j in jobs)
        assert [j.arrival for j in jobs] == arrivals
        gangs |= {j.scale_factor for j in jobs}
    assert gangs == {1, 2, 4, 7, 8, 12, 16, 20, 24, 32, 64}


def test_msr_traces_convert_to_gavels_format_and_back(tmp_path: Path, msr_traces: list[Path]) -> None:
    for path in msr_traces[:4]:
        jobs = read_trace(path)
        out = tmp_path / path.name
        write_trace(jobs, out, "gavel")
        assert read_trace(out) == jobs
        again = tmp_path / f"again-{path.name}"
        write_trace(read_trace(out), again, "gavel")
        assert again.read_bytes() == out.read_bytes()


def test_comment_lines_are_skipped_and_line_numbers_kept(tmp_path: Path) -> None:
    path = tmp_path / "c.trace"
    path.write_text(f"# a note\n{GOOD}\n# another\n{fields(scale_factor='0')}\n")
    with pytest.raises(TraceError) as caught:
        read_trace(path)
    assert caught.value.line == 4 and caught.value.field == "scale_factor"
    path.write_text(f"# a note\n{GOOD}\n")
    assert len(read_trace(path)) == 1 and trace_format(path) is not None


def test_a_generated_trace_names_its_seed_on_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "g.trace"
    job = read_trace(_written(tmp_path, GOOD))[0]
    write_trace([job], path, generator=generator_header("gavel", {"jobs": 1, "lam": 900.0, "seed": 7}))
    assert path.read_text().splitlines()[0] == "# generator: style=gavel jobs=1 lam=900.0 seed=7"
    assert generator_seed(path) == 7 and read_trace(path) == [job]
    assert generator_seed(_written(tmp_path, GOOD)) is None  # any other trace names none
    path.write_text(f"# generator: style=gavel seed=x7\n{GOOD}\n")
    with pytest.raises(InputError, match="generator's seed") as caught:
        generator_seed(path)
    assert (caught.value.line, caught.value.field) == (1, "seed")


def test_gavels_format_is_written_without_comments(tmp_path: Path) -> None:
    job = read_trace(_written(tmp_path, GOOD))[0]
    with pytest.raises(ValueError, match="job lines only"):
        write_trace([job], tmp_path / "g.trace", "gavel", generator="# generator: seed=1")


def _written(folder: Path, text: str) -> Path:
    path = folder / "plain.trace"
    path.write_text(text + "\n")
    return path
