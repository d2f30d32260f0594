"""Trace reading, writing and validation."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conftest import require_reference
from shockwave.errors import InputError
from shockwave.workload_model.throughput import TableThroughputs
from shockwave.workload_model.trace import COLUMNS, TraceError, format_line, read_trace

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


@pytest.mark.parametrize("name", sorted(p.name for p in (require_reference("traces").iterdir())))
def test_reference_traces_round_trip_byte_for_byte(name: str) -> None:
    path = require_reference("traces", name)
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
