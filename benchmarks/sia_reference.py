"""Our runs of Sia's workloads beside the Sia artifact's own simulator (issue 34's reproduction benchmark; printed,
never asserted): `python benchmarks/sia_reference.py --artifact DIR`, DIR the `sia-simulator/` folder of a copy of
`siasosp23/artifacts` (it has no licence, so none of its files ship here; `make bench` runs this when
SIA_ARTIFACT names such a folder).

`sia_reference.json` holds what the artifact measured on this machine kind (2 cores, Python 3.11), each with the
command that produced it and the artifact's commit. For each entry whose policy the project has, the same workload
runs here on the same cluster with the same round length, and both are printed: average and p99 JCT (hours, the
artifact's `print_run_stats.py` definitions), makespan (last finish less first arrival, hours), and CPU seconds.
Sia's "gavel" is our `max_sum_throughput_perf` with rigid jobs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "sia_reference.json"
OURS = {"gavel": "max_sum_throughput_perf", "sia": "sia", "pollux": "pollux"}
"""The artifact's policy names the project implements, by our name."""
CLUSTERS = {"default-hetero": "aws:24:4,rtx:24:8,dgx-ext:16:8", "homogeneous-aws64": "aws:64:4"}


def simulated(artifact: Path, workload: Path, entry: dict[str, Any]) -> tuple[Any, float]:
    """Our run of a workload as the entry ran it, and its CPU seconds."""
    from shockwave.api import simulate

    started = time.process_time()
    result = simulate(
        workload,
        OURS[entry["policy"]],
        CLUSTERS[entry["cluster"]],
        trace_format="sia",
        profiles=artifact / "traces",
        round_seconds=entry["interval_s"],
    )
    return result, time.process_time() - started


def ours(artifact: Path, entry: dict[str, Any]) -> dict[str, float]:
    """Our run of the entry's workload, in the artifact's measures."""
    result, cpu = simulated(artifact, artifact / "workloads" / entry["workload"], entry)
    jcts = sorted(job.jct_s for job in result.jobs)
    first = min(job.arrival_s for job in result.jobs)
    return {
        "avg_jct_h": sum(jcts) / len(jcts) / 3600,
        "p99_jct_h": jcts[int(0.99 * len(jcts))] / 3600,
        "makespan_h": (max(job.finish_s for job in result.jobs) - first) / 3600,
        "cpu_s": cpu,
    }


def print_partial(artifact: Path | None, entry: dict[str, Any]) -> None:
    """A reference run that did not finish: our average JCT over the jobs it finished, on the same first jobs."""
    import csv
    import tempfile

    done = entry["completed_jcts_s"]
    line = f"{entry['policy']} on the first {entry['first_jobs']} jobs of {entry['workload']}: the reference finished "
    line += f"{len(done)} in {entry['wall_s']:.0f} s wall, their average JCT {sum(done.values()) / len(done):.0f} s"
    if artifact is None:
        print(line)
        return
    source = artifact / "workloads" / entry["workload"]
    with source.open() as handle:
        rows = sorted(csv.DictReader(handle), key=lambda row: float(row["time"]))[: entry["first_jobs"]]
    with tempfile.TemporaryDirectory() as scratch:
        cut = Path(scratch) / "cut.csv"
        with cut.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        result, cpu = simulated(artifact, cut, entry)
    ours = {row["name"]: job.jct_s for row, job in zip(rows, result.jobs, strict=True)}
    mine = sum(ours[name] for name in done) / len(done)
    print(f"{line}; ours {mine:.0f} s ({mine / (sum(done.values()) / len(done)):.3f}x), all done in {cpu:.1f} CPU-s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifact", type=Path, help="the sia-simulator/ folder of a copy of siasosp23/artifacts")
    args = parser.parse_args()
    entries = json.loads(REFERENCE.read_text())["runs"]
    table = Table(title="Sia's workloads: the artifact's simulator (ref) and ours, rigid jobs where ours is rigid")
    for column in (
        "policy",
        "workload",
        "cluster",
        "JCT h ref / ours",
        "p99 h ref / ours",
        "makespan h ref / ours",
        "CPU s ref / ours",
    ):
        table.add_column(column)
    for entry in entries:
        mine = ours(args.artifact, entry) if args.artifact is not None and entry["policy"] in OURS else None

        def pair(key: str, fmt: str, mine: dict[str, float] | None = mine, entry: dict[str, Any] = entry) -> str:
            ref = fmt.format(entry[key])
            return ref if mine is None else f"{ref} / {fmt.format(mine[key])} ({mine[key] / entry[key]:.2f}x)"

        table.add_row(
            entry["policy"],
            entry["workload"],
            entry["cluster"],
            pair("avg_jct_h", "{:.3f}"),
            pair("p99_jct_h", "{:.2f}"),
            pair("makespan_h", "{:.2f}"),
            pair("cpu_s", "{:.1f}"),
        )
    Console(width=200).print(table)
    for entry in json.loads(REFERENCE.read_text()).get("partial", []):
        print_partial(args.artifact, entry)
    if args.artifact is None:
        print("reference numbers only: give --artifact DIR (a copy of sia-simulator/) to run ours beside them")


if __name__ == "__main__":
    main()
