"""`shockwave scale-study` end to end on tiny clusters: one trace per size with jobs in proportion, every policy on
each, and the JSON, table and figure it promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import shockwave
from shockwave.core.errors import InputError
from shockwave.experiments.scale import ScaleStudy


def test_traces_grow_with_the_cluster_at_the_same_load_per_gpu() -> None:
    study = ScaleStudy()
    assert [study.jobs(g) for g in (512, 2048)] == [2000, 8000]
    assert study.mean_gap_s(512) == pytest.approx(2.2) and study.mean_gap_s(2048) == pytest.approx(0.55)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [({"sizes": (4,)}, "at least 8 GPUs"), ({"policies": ()}, "no policy"), ({"jobs_per_gpu": 0.0}, "> 0")],
)
def test_bad_settings_are_named(kwargs: dict, words: str) -> None:
    with pytest.raises(InputError, match=words):
        ScaleStudy(**kwargs)


def test_cli_writes_one_row_per_size_and_policy_with_table_and_figure(tmp_path: Path) -> None:
    out = tmp_path / "study"
    done = shockwave(
        "-q", "scale-study", "--out", out, "--sizes", "8,16", "--policies", "shockwave,fifo", "--jobs-per-gpu", "1"
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads((out / "scale.json").read_text())["rows"]
    assert [(r["gpus"], r["jobs"], r["policy"]) for r in rows] == [
        (8, 8, "shockwave"),
        (8, 8, "fifo"),
        (16, 16, "shockwave"),
        (16, 16, "fifo"),
    ]
    assert all(r["makespan_over_bound"] >= 1.0 and r["wall_s"] > 0 for r in rows)
    assert rows[0]["p95_solve_s"] is not None and rows[1]["p95_solve_s"] is None
    assert "| GPUs | jobs | policy |" in (out / "scale.md").read_text()
    assert (out / "scale.png").stat().st_size > 0 and (out / "scale.svg").exists()
    assert len(list((out / "traces").iterdir())) == 2 and len(list((out / "results").iterdir())) == 4
    assert "| 16 | 16 | fifo |" in done.stdout


def test_a_missing_config_stops_before_anything_runs(tmp_path: Path) -> None:
    done = shockwave("scale-study", "--out", tmp_path / "out", "--sizes", "8", "--config", tmp_path / "none.json")
    assert done.returncode == 2 and "none.json" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "results").exists()
