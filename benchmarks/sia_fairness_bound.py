"""How fair can any schedule be on Sia's settings? `python benchmarks/sia_fairness_bound.py --artifact DIR` (or `make
sia-bound SIA_ARTIFACT=DIR`), DIR the `sia-simulator/` folder of a copy of `siasosp23/artifacts`.

For each Philly workload on Sia's homogeneous cluster and each Saturn workload on its heterogeneous one
(`sia_table.settings`; `--philly`, `--saturn`) it prints the least worst rho any schedule of its goodput-adaptive
jobs can reach (`workload_model/sia/fairness_bound.py`: restarts and rounds left out, so a real schedule does no
better), alone and with every job done by Sia's last finish, and the most GPU-time a
schedule may spend (a factor over each job's least) and still reach worst rho 1.2 (`--rho`) by Sia's last finish;
beside each policy's worst rho, unfair share and GPU-time factor (its GPU-hours over the least in which each job
could have taken its JCT) in `make sia-table` / `make sia-held-out` (read from their result folders, `--results`,
where they exist).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from sia_table import BAR_WORKLOADS, HELD_OUT, settings, workload_folder

PHILLY = tuple(sorted({*BAR_WORKLOADS["philly"], *HELD_OUT["philly"]}))
SATURN = (1, 2, 3, 4, 5, 6)
"""The heterogeneous workloads of the elastic Shockwave issue's bars."""
FAMILY_OF = {"homogeneous": "philly", "heterogeneous": "saturn"}
"""The trace family each setting is bounded on."""
POLICIES = ("sia", "pollux", "shockwave", "themis")
RIGID = {"themis": " (rigid jobs)"}
"""Policies that run the workload's jobs at their request: the bound is for the goodput-adaptive jobs."""
RHO = 1.2
"""The elastic Shockwave issue's bar."""


def policy_results(results: list[Path], setting: str, workload: str) -> dict[str, dict[str, Any]]:
    """Each policy's result.json for a workload in a setting, from the first folder that has it."""
    found: dict[str, dict[str, Any]] = {}
    for folder in results:
        for path in sorted(workload_folder(folder, setting, workload).glob("*s/*/result.json")):
            found.setdefault(path.parent.name, json.loads(path.read_text()))
    return found


def cell(result: dict[str, Any] | None, jobs: list[Any]) -> str:
    """A policy's 'worst rho / unfair % / GPU-time factor' ('-': not run; no factor where a job did not finish)."""
    from shockwave.workload_model.sia.fairness_bound import gpu_time_factor

    if result is None:
        return "-"
    fairness = f"{result['worst_ftf']:.2f} / {100 * result['unfair_fraction']:.1f}"
    if not result.get("complete") or len(result["jobs"]) != len(jobs):
        return f"{fairness} / -"
    spent = 3600 * sum((result.get("gpu_hours_by_type") or {}).values())
    return f"{fairness} / {gpu_time_factor(jobs, [job['jct_s'] for job in result['jobs']], spent):.2f}"


def windows_of(artifact: Path, workload: str, cluster: str) -> list[Any]:
    """The workload's jobs as the bound sees them."""
    from shockwave.core.cluster import ClusterSpec
    from shockwave.workload_model.sia.fairness_bound import windows
    from shockwave.workload_model.sia.rigid import read_sia_workload

    spec = ClusterSpec.parse(cluster)
    jobs, profiles, tm = read_sia_workload(artifact / "workloads" / workload, artifact / "traces", spec, elastic=True)
    models, arrivals = [job.model for job in jobs], [job.arrival for job in jobs]
    return windows(tm.goodput, models, arrivals, [profile.t_isolated for profile in profiles], spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifact", type=Path, required=True, help="the sia-simulator/ folder of the artifact")
    parser.add_argument(
        "--results",
        type=Path,
        nargs="*",
        default=[Path("results/sia-table"), Path("results/sia-held-out")],
        help="make sia-table's and sia-held-out's --out folders",
    )
    parser.add_argument("--philly", type=int, nargs="*", default=list(PHILLY), help="homogeneous Philly numbers")
    parser.add_argument("--saturn", type=int, nargs="*", default=list(SATURN), help="heterogeneous Saturn numbers")
    parser.add_argument("--rho", type=float, default=RHO, help="the worst rho asked of the GPU-time factor")
    args = parser.parse_args()
    numbers = {"philly": tuple(args.philly), "saturn": tuple(args.saturn)}
    for setting, (cluster, files) in settings(numbers).items():
        family = FAMILY_OF[setting]
        chosen = [f for f in files if f.startswith(f"{family}/")]
        if chosen:
            print_setting(args, setting, cluster, family, chosen)


def print_setting(args: argparse.Namespace, setting: str, cluster: str, family: str, files: list[str]) -> None:
    """One setting's table: each workload's bounds beside each policy's worst rho, unfair share and GPU-time."""
    from shockwave.core.cluster import ClusterSpec
    from shockwave.workload_model.sia.fairness_bound import least_worst_rho, most_gpu_time_factor

    table = Table(title=f"How fair any schedule can be, {setting} {family.title()} ({cluster})", title_justify="left")
    headers = ("workload", "least worst rho", "by Sia's end", f"most GPU-time for rho {args.rho:g} by Sia's end")
    for header in (*headers, *(f"{p}{RIGID.get(p, '')}: rho / unfair % / GPU-time" for p in POLICIES)):
        table.add_column(header, justify="left" if header == "workload" else "right")
    gpus = [pool.gpus for pool in ClusterSpec.parse(cluster).pools]
    for workload in files:
        results = policy_results(args.results, setting, workload)
        sia = results.get("sia")
        by = max(job["finish_s"] for job in sia["jobs"]) if sia else float("inf")
        jobs = windows_of(args.artifact, workload, cluster)
        table.add_row(
            f"{family.title()} {workload.removesuffix('.csv').rpartition('-')[2]}",
            f"{least_worst_rho(jobs, gpus):.2f}",
            f"{least_worst_rho(jobs, gpus, by=by):.2f}" if sia else "-",
            f"{most_gpu_time_factor(jobs, gpus, args.rho, by=by):.2f}x" if sia else "-",
            *(cell(results.get(policy), jobs) for policy in POLICIES),
        )
    Console(width=200).print(table)


if __name__ == "__main__":
    from shockwave.core.errors import InputError

    try:
        main()
    except InputError as exc:  # a missing or malformed artifact: one line, no traceback
        raise SystemExit(f"error: {exc}") from None
