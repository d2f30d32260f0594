"""How fair can any schedule be on Sia's homogeneous setting? `python benchmarks/sia_fairness_bound.py --artifact DIR`
(or `make sia-bound SIA_ARTIFACT=DIR`), DIR the `sia-simulator/` folder of a copy of `siasosp23/artifacts`.

For each Philly workload on `aws:64:4` it prints the least worst rho any schedule of its goodput-adaptive jobs can
reach (`workload_model/sia/fairness_bound.py`: restarts and rounds left out, so a real schedule does no better),
alone and with every job done by Sia's last finish, beside the worst rho and unfair share each policy got in
`make sia-table` / `make sia-held-out` (read from their result folders, `--results`, where they exist).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

CLUSTER = "aws:64:4"
WORKLOADS = tuple(range(1, 9))
POLICIES = ("sia", "pollux", "shockwave", "themis")


def policy_results(results: list[Path], workload: int) -> dict[str, dict[str, Any]]:
    """Each policy's result.json for a homogeneous Philly workload, from the first folder that has it."""
    found: dict[str, dict[str, Any]] = {}
    for folder in results:
        for path in sorted((folder / "homogeneous" / f"philly-workload-{workload}").glob("*s/*/result.json")):
            found.setdefault(path.parent.name, json.loads(path.read_text()))
    return found


def fairness(result: dict[str, Any] | None) -> str:
    """A policy's 'worst rho / unfair %' cell ('-': not run)."""
    return "-" if result is None else f"{result['worst_ftf']:.2f} / {100 * result['unfair_fraction']:.1f}"


def bounds(artifact: Path, workload: int, by: float) -> tuple[float, float]:
    """(least worst rho, least worst rho with every job done by `by`)."""
    from shockwave.core.cluster import ClusterSpec
    from shockwave.workload_model.sia.fairness_bound import least_worst_rho, windows
    from shockwave.workload_model.sia.rigid import read_sia_workload

    cluster = ClusterSpec.parse(CLUSTER)
    jobs, profiles, tm = read_sia_workload(
        artifact / "workloads" / "philly" / f"workload-{workload}.csv", artifact / "traces", cluster, elastic=True
    )
    found = windows(
        tm.goodput,
        [job.model for job in jobs],
        [job.arrival for job in jobs],
        [profile.t_isolated for profile in profiles],
        cluster,
    )
    return least_worst_rho(found, cluster.gpus), least_worst_rho(found, cluster.gpus, by=by)


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
    parser.add_argument("--workloads", type=int, nargs="*", default=list(WORKLOADS))
    args = parser.parse_args()
    table = Table(title=f"Least worst rho of any schedule, homogeneous Philly ({CLUSTER})", title_justify="left")
    for header in ("workload", "bound", "bound, done by Sia's end", *(f"{p} rho / unfair %" for p in POLICIES)):
        table.add_column(header, justify="left" if header == "workload" else "right")
    for workload in args.workloads:
        results = policy_results(args.results, workload)
        sia = results.get("sia")
        by = max(job["finish_s"] for job in sia["jobs"]) if sia else float("inf")
        alone, within = bounds(args.artifact, workload, by)
        cells = [fairness(results.get(policy)) for policy in POLICIES]
        table.add_row(f"Philly {workload}", f"{alone:.2f}", f"{within:.2f}" if sia else "-", *cells)
    Console().print(table)


if __name__ == "__main__":
    main()
