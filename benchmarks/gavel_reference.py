"""The reference Gavel simulator's published runs (../shared/reference/gavel/reference_results.json) reproduced by
`simulate --mechanics gavel`, row by row, with our wall time; with `--reference-scheduler`, the reference simulator
itself runs the same row beside ours, for a wall-time ratio.

The reference needs a scratch checkout of Gavel's `scheduler/` (outside this project) runnable by some Python; its
gRPC stubs and `matrix_completion` submodule are not needed in simulation and can be empty modules on PYTHONPATH:

    python benchmarks/gavel_reference.py                                    # ours only
    python benchmarks/gavel_reference.py --reference-scheduler /tmp/gavel_full/scheduler \
        --reference-python /tmp/gavel_venv/bin/python --reference-pythonpath /tmp/gavel_full/scheduler/stubs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from shockwave.api import simulate
from shockwave.core.errors import InputError
from shockwave.workload_model.gavel_generator import GavelWorkload
from shockwave.workload_model.throughput import TableThroughputs

GAVEL = Path(__file__).resolve().parents[2] / "shared" / "reference" / "gavel"
RESULTS = re.compile(r"Results: average JCT=([0-9.]+), utilization=([0-9.]+)")


def ours(row: dict[str, Any], folder: Path, table: Path) -> tuple[dict[str, float], float]:
    trace = GavelWorkload.of_reference_run(row).write(TableThroughputs.from_json(table), folder)
    started = time.perf_counter()
    result = simulate(
        trace, row["policy"], "v100:36,p100:36,k80:36", throughputs=table, mechanics="gavel", round_seconds=360,
        window=tuple(row["window_job_ids"]) if "window_job_ids" in row else None, seed=int(row["seed"]),
    )  # fmt: skip
    numbers = {"avg_jct_s": result.avg_jct_s, "utilization": result.utilization, "makespan_s": result.makespan_s}
    return numbers, time.perf_counter() - started


def theirs(row: dict[str, Any], scheduler: Path, python: str, pythonpath: str) -> float | None:
    """The reference's wall time on the row (its generated-jobs driver; static rows are skipped)."""
    if row["experiment"] == "static_multi_gpu":
        return None
    command = [
        python, "scripts/drivers/simulate_scheduler_with_generated_jobs.py", "-c", "36:36:36", "-p", row["policy"],
        "--seed", str(row["seed"]), "-l", str(row["lam_mean_interarrival_s"]), "-s", "400", "-e", "600",
        "-i", "360", "--throughputs_file", "simulation_throughputs.json", "--solver", "ECOS", "-v",
        *(["--generate-multi-gpu-jobs"] if row["multi_gpu_jobs"] else []),
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=scheduler, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": pythonpath}
    )
    wall = time.perf_counter() - started
    found = RESULTS.search(done.stderr + done.stdout)
    if found is None:
        raise SystemExit(f"the reference did not run {row['policy']}:\n{done.stderr[-2000:]}")
    expected = (row["avg_jct_s"], row["utilization"])
    got = (float(found.group(1)), float(found.group(2)))
    if abs(got[0] - expected[0]) > 1e-3 * expected[0]:
        raise SystemExit(f"the reference's checkout gives {got}, its published row {expected}: not the same code")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gavel", type=Path, default=GAVEL, help="../shared/reference/gavel")
    parser.add_argument("--policies", default="", help="comma-separated; default: every row")
    parser.add_argument("--reference-scheduler", type=Path)
    parser.add_argument("--reference-python", default="python3")
    parser.add_argument("--reference-pythonpath", default="")
    args = parser.parse_args()
    rows = json.loads((args.gavel / "reference_results.json").read_text())["runs"]
    wanted = set(filter(None, args.policies.split(",")))
    table = Table(title="The reference Gavel simulator's runs, reproduced (36:36:36, 360 s rounds, --mechanics gavel)")
    for column in ("policy", "workload", "avg JCT s", "reference", "diff", "util", "ref", "ours s", "ref s", "x"):
        table.add_column(column, justify="left" if column in ("policy", "workload") else "right")
    with tempfile.TemporaryDirectory() as scratch:
        for row in rows:
            if wanted and row["policy"] not in wanted:
                continue
            workload = row["experiment"].replace("_", " ") + f" {row.get('lam_mean_interarrival_s') or row['jobs']:g}"
            try:
                numbers, wall = ours(row, Path(scratch), args.gavel / "simulation_throughputs.json")
            except InputError as exc:  # a policy we do not have yet (gandiva): say so and go on
                table.add_row(row["policy"], workload, f"not run: {exc}"[:60], *[""] * 7)
                continue
            reference = (
                theirs(row, args.reference_scheduler, args.reference_python, args.reference_pythonpath)
                if args.reference_scheduler
                else None
            )
            diff = numbers["avg_jct_s"] / row["avg_jct_s"] - 1
            table.add_row(
                row["policy"], workload, f"{numbers['avg_jct_s']:.1f}", f"{row['avg_jct_s']:.1f}", f"{diff:+.2e}",
                f"{numbers['utilization']:.3f}", f"{row['utilization']:.3f}", f"{wall:.1f}",
                "" if reference is None else f"{reference:.1f}", "" if reference is None else f"{reference / wall:.1f}",
            )  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
