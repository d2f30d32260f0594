"""Gavel's LAS and FIFO policies on the Philly-derived per-virtual-cluster traces (Gavel's msr traces, seed 0): a study
on real production-derived arrivals, on a heterogeneous cluster and a V100-only one of about the same capacity.

Each trace gets its own cluster: the V100-only one holds the trace's mean GPU demand (the sum over jobs of gang x
run time on V100s, over the arrival span) times `--load-headroom`, rounded up to a power of two and at least the
largest gang; the heterogeneous one has that many GPUs of each of V100, P100 and K80 divided by two (so it holds
1.5x the GPUs, most of them slower). Gangs the table does not list (16-64 GPUs) are estimated (see
`TableWithFallback`); the count is printed.

    python benchmarks/gavel_msr.py [--traces DIR] [--throughputs FILE] [--out results/gavel_msr.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from shockwave.api import simulate
from shockwave.workload_model.profile import load_workload

SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference" / "gavel"
POLICIES = ("max_min_fairness", "max_min_fairness_perf", "fifo", "fifo_perf")


def cluster_sizes(trace: Path, throughputs: Path, headroom: float) -> tuple[str, str]:
    _, jobs, profiles = load_workload(trace, throughputs)
    span = max(jobs[-1].arrival - jobs[0].arrival, 1.0)
    work = sum(job.scale_factor * profile.t_isolated for job, profile in zip(jobs, profiles, strict=True))
    largest = max(job.scale_factor for job in jobs)
    v100 = max(largest, 2 ** math.ceil(math.log2(max(work / span * headroom, 1.0))))
    each = max(largest, v100 // 2)
    return f"v100:{v100}", f"v100:{each},p100:{each},k80:{each}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=SHARED / "traces" / "msr_seed0")
    parser.add_argument("--throughputs", type=Path, default=SHARED / "simulation_throughputs.json")
    parser.add_argument("--load-headroom", type=float, default=1.5)
    parser.add_argument("--round-seconds", type=float, default=360.0)
    parser.add_argument("--out", type=Path, default=Path("results/gavel_msr.json"))
    args = parser.parse_args()
    console = Console()
    rows = []
    table = Table(title=f"Gavel's msr traces, {args.round_seconds:g} s rounds, gavel mechanics")
    for column in ("trace", "jobs", "cluster", "policy", "avg JCT h", "makespan h", "util", "util by type", "wall s"):
        table.add_column(column, justify="left" if column in ("trace", "cluster", "policy") else "right")
    for trace in sorted(args.traces.glob("*.trace")):
        for cluster in cluster_sizes(trace, args.throughputs, args.load_headroom):
            for policy in POLICIES:
                started = time.perf_counter()
                result = simulate(
                    trace, policy, cluster, throughputs=args.throughputs, mechanics="gavel",
                    round_seconds=args.round_seconds,
                )  # fmt: skip
                by_type = result.utilization_by_type or {}
                row = {
                    "trace": trace.stem,
                    "jobs": len(result.jobs),
                    "cluster": cluster,
                    "policy": policy,
                    "avg_jct_s": result.avg_jct_s,
                    "makespan_s": result.makespan_s,
                    "utilization": result.utilization,
                    "utilization_by_type": by_type,
                    "complete": result.complete,
                    "estimated": len(result.estimated_throughputs or []),
                    "wall_s": time.perf_counter() - started,
                }
                rows.append(row)
                table.add_row(
                    trace.stem, str(row["jobs"]), cluster, policy, f"{result.avg_jct_s / 3600:.1f}",
                    f"{result.makespan_s / 3600:.0f}", f"{result.utilization:.2f}",
                    " ".join(f"{t}:{u:.2f}" for t, u in by_type.items()), f"{row['wall_s']:.1f}",
                )  # fmt: skip
            table.add_section()
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    wins = {
        kind: sum(
            a["avg_jct_s"] < b["avg_jct_s"]
            for a in rows
            for b in rows
            if a["policy"] == "max_min_fairness_perf"
            and b["policy"] == "max_min_fairness"
            and (a["trace"], a["cluster"]) == (b["trace"], b["cluster"])
            and ("," in a["cluster"]) == (kind == "heterogeneous")
        )
        for kind in ("heterogeneous", "V100-only")
    }
    console.print(f"max_min_fairness_perf beats max_min_fairness on average JCT: {wins} (traces per cluster kind)")


if __name__ == "__main__":
    main()
