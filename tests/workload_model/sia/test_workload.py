"""Sia's workload CSV: every column checked, errors with file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from shockwave.core.errors import InputError
from shockwave.workload_model.sia.workload import read_workload


def test_jobs_in_file_order_with_their_category(sia_workload: Path) -> None:
    jobs = read_workload(sia_workload)
    assert [(j.name, j.arrival_s, j.application, j.replicas, j.batch_size) for j in jobs] == [
        ("toy-0", 0.0, "toy", 2, 64),
        ("toy-1", 30.5, "toy", 1, 64),
        ("toy-2", 60.0, "toy", 4, 128),
        ("toy-3", 90.0, "toy", 8, 256),
    ]
    assert {j.category for j in jobs} == {"adaptive"} and jobs[1].line == 3


@pytest.mark.parametrize(
    ("row", "field", "reason"),
    [
        ("toy-9,-1,toy,2,64", "time", ">= 0"),
        ("toy-9,0,toy,0,64", "num_replicas", "whole number >= 1"),
        ("toy-9,0,toy,2.5,64", "num_replicas", "whole number"),
        ("toy-9,0,toy,2,1e9", "batch_size", "at most"),
        ("toy-9,0,,2,64", "application", "empty"),
        ("toy-0,0,toy,2,64", "name", "also on line 2"),
    ],
)
def test_a_bad_line_is_named(tmp_path: Path, row: str, field: str, reason: str) -> None:
    path = tmp_path / "w.csv"
    path.write_text(f"name,time,application,num_replicas,batch_size\ntoy-0,0,toy,2,64\n{row}\n")
    with pytest.raises(InputError, match=reason) as error:
        read_workload(path)
    assert (error.value.line, error.value.field) == (3, field)


def test_category_header_and_shape_errors(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size,category\ntoy-0,0,toy,2,64,elastic\n")
    with pytest.raises(InputError, match="adaptive, scale-gpus, rigid") as error:
        read_workload(path)
    assert error.value.field == "category"
    path.write_text("name,time,application,num_replicas,batch_size,category\ntoy-0,0,toy,2,64,rigid\n")
    assert read_workload(path)[0].category == "rigid"
    path.write_text("name,time,application,batch_size\ntoy-0,0,toy,64\n")
    with pytest.raises(InputError, match="no column 'num_replicas'"):
        read_workload(path)
    path.write_text("name,time,application,num_replicas,batch_size\ntoy-0,0,toy,2\n")
    with pytest.raises(InputError, match="expected 5 comma-separated values") as error:
        read_workload(path)
    assert error.value.line == 2
    path.write_text("name,time,application,num_replicas,batch_size\n")
    with pytest.raises(InputError, match="no data lines"):
        read_workload(path)
    path.write_text("")
    with pytest.raises(InputError, match="empty"):
        read_workload(path)


def test_an_application_name_is_a_plain_folder_name(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,num_replicas,batch_size\nx-0,0,../etc,2,64\n")
    with pytest.raises(InputError, match="an application is named by") as error:
        read_workload(path)
    assert (error.value.line, error.value.field) == (2, "application")
