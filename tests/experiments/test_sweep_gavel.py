"""Sweeps of Gavel-style workloads: generated per seed and rate, measured over a window, drawn against the rate."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from conftest import require_reference, shockwave

TABLE = require_reference("gavel", "simulation_throughputs.json")


def spec(tmp_path: Path, generate: str, window: str = '"10:30"') -> Path:
    path = tmp_path / "load.toml"
    path.write_text(
        f"""policies = ["fifo_perf", "max_min_fairness_perf"]
seeds = [0, 1]
clusters = ["v100:4,p100:4,k80:4"]
throughputs = "{TABLE}"
mechanics = "gavel"
round_seconds = 360
window = {window}
generate = [{generate}]
"""
    )
    return path


def test_a_load_study_sweeps_rates_and_seeds_and_draws_jct_against_the_rate(tmp_path: Path) -> None:
    rates = '{ style = "gavel", jobs = 60, jobs_per_hour = 2 }, { style = "gavel", jobs = 60, lam = 900 }'
    done = shockwave("sweep", spec(tmp_path, rates), "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out" / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert sorted((float(r["jobs_per_hour"]), r["policy"], r["cells"]) for r in rows) == [
        (2.0, "fifo_perf", "2"), (2.0, "max_min_fairness_perf", "2"),
        (4.0, "fifo_perf", "2"), (4.0, "max_min_fairness_perf", "2"),
    ]  # fmt: skip
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(results) == 8 and all(r["window"] == [10, 30] and len(r["jobs"]) == 20 for r in results)
    assert all(r["cell"]["window"] == [10, 30] and r["cell"]["generator"]["style"] == "gavel" for r in results)
    assert (tmp_path / "out" / "figures" / "load.png").stat().st_size > 0
    again = shockwave("sweep", spec(tmp_path, rates), "--out", tmp_path / "out")
    assert again.returncode == 0 and "8 already finished" in again.stdout + again.stderr


def test_bad_gavel_workloads_and_windows_are_refused_naming_the_key(tmp_path: Path) -> None:
    for generate, window, says in (
        ('{ style = "gavel", jobs = 60, mode_mix = [1, 0, 0], lam = 60 }', '"1:2"', "mode_mix"),
        ('{ style = "gavel", jobs = 60 }', '"1:2"', "exactly one of 'lam'"),
        ('{ style = "gavel", jobs = 60, lam = -5 }', '"1:2"', "'lam' must be"),
        ('{ style = "other", jobs = 60 }', '"1:2"', "unknown style"),
        ('{ style = "gavel", jobs = 60, lam = 60 }', '"5:2"', "'window'"),
    ):
        refused = shockwave("sweep", spec(tmp_path, generate, window), "--out", tmp_path / "bad")
        assert refused.returncode == 2 and says in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
