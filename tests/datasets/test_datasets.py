"""The bundled datasets: each readable as its kind, named wherever a file is taken, identical to the references'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shockwave.api import simulate
from shockwave.datasets import DATASETS, locate, names
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.workload_model.throughput import TableThroughputs
from shockwave.workload_model.trace import read_trace

READERS = {"throughputs": TableThroughputs.from_json, "trace": read_trace, "config": ShockwaveConfig.from_json}


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_dataset_reads_as_its_kind(name: str) -> None:
    dataset = DATASETS[name]
    assert READERS[dataset.kind](dataset.path)


def test_the_interface_names_are_there_with_their_licences() -> None:
    assert {"tacc", "wisr", "gavel"} <= set(names("throughputs"))
    assert "canonical-120" in names("trace")
    folder = DATASETS["tacc"].path.parent
    for licence in ("LICENSE-shockwave", "LICENSE-gavel"):
        assert "MIT License" in (folder / licence).read_text()


def test_a_file_of_that_name_wins_and_kinds_do_not_mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert locate("tacc", "throughputs") == DATASETS["tacc"].path
    assert locate("tacc", "trace") == Path("tacc")  # a table is no trace: left for the reader to refuse
    (tmp_path / "tacc").write_text("{}")
    assert locate("tacc", "throughputs") == Path("tacc")


@pytest.mark.parametrize(
    ("name", "shared"),
    [
        ("tacc", "throughputs/tacc_throughputs.json"),
        ("wisr", "throughputs/wisr_throughputs.json"),
        ("gavel", "gavel/simulation_throughputs.json"),
        ("canonical-120", "traces/120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace"),
        ("tacc-32gpus", "configurations/tacc_32gpus.json"),
    ],
)
def test_bundled_files_are_the_references(name: str, shared: str, reference: Path) -> None:
    assert DATASETS[name].path.read_bytes() == (reference / shared).read_bytes()


def test_names_work_in_the_api_and_the_cli_from_an_empty_folder(tmp_path: Path) -> None:
    by_name = simulate("canonical-120", "max_min_fairness", 32, throughputs="tacc", mechanics="reference")
    by_path = simulate(
        DATASETS["canonical-120"].path, "max_min_fairness", 32, throughputs=DATASETS["tacc"].path, mechanics="reference"
    )
    assert by_name.avg_jct_s == by_path.avg_jct_s and len(by_name.jobs) == 120
    run = [sys.executable, "-m", "shockwave"]
    listed = subprocess.run([*run, "datasets", "--json"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert {"tacc", "wisr", "gavel", "canonical-120"} <= {d["name"] for d in json.loads(listed.stdout)}
    done = subprocess.run(
        [*run, "simulate", "--trace", "canonical-120", "--throughputs", "wisr", "--gpus", "32",
         "--policy", "shockwave", "--config", "tacc-32gpus", "--json"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["jobs"]) == 120


def test_an_unknown_name_is_a_missing_file(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shockwave", "simulate", "--trace", "canonical-121", "--gpus", "4", "--policy", "fifo"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and "canonical-121" in done.stderr and "Traceback" not in done.stderr
