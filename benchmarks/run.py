"""Wall time and peak memory of each policy on the reference traces (`make bench`); printed, never asserted.

Each simulation runs in a fresh process so its peak RSS is its own. Reference numbers for comparison (spec and
issue notes, 2-core machine): the reference simulator needs 4-9 s per baseline on the 120-job trace and 24-59 s on
the 900-job trace.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference"
CASES = [
    ("120_0.2_5_100_40_25_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace", "tacc", 32),
    ("900_0.2_5_1000_5_15_0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace", "wisr", 256),
]


def _one(trace: str, table: str, gpus: int, policy: str, queue: mp.Queue) -> None:
    import logging

    logging.disable(logging.WARNING)
    from shockwave.cluster import ClusterSpec
    from shockwave.simulator.mechanics import preset
    from shockwave.simulator.run import simulate

    started = time.perf_counter()
    result, _ = simulate(REFERENCE / "traces" / trace, policy, ClusterSpec(gpus), preset("reference"),
                         REFERENCE / "throughputs" / f"{table}_throughputs.json")
    wall = time.perf_counter() - started
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put((wall, peak_mib, result["makespan_s"], result["avg_jct_s"]))


def main() -> None:
    from shockwave.policies.registry import POLICIES

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policy names")
    args = parser.parse_args()
    if not REFERENCE.exists():
        sys.exit(f"reference data not found at {REFERENCE}")
    table = Table(title="simulation wall time and peak memory (reference mechanics, one process per run)")
    for column in ("trace", "GPUs", "policy", "wall s", "peak MiB", "makespan s", "avg JCT s"):
        table.add_column(column, justify="right" if column not in ("trace", "policy") else "left")
    ctx = mp.get_context("spawn")
    for trace, throughputs, gpus in CASES:
        for policy in args.policies.split(","):
            queue: mp.Queue = ctx.Queue()
            proc = ctx.Process(target=_one, args=(trace, throughputs, gpus, policy, queue))
            proc.start()
            wall, peak, makespan, jct = queue.get()
            proc.join()
            table.add_row(trace.split("_")[0] + " jobs", str(gpus), policy, f"{wall:.2f}", f"{peak:.0f}",
                          f"{makespan:.1f}", f"{jct:.1f}")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
