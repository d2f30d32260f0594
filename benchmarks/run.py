"""Wall time, peak memory and Shockwave's solver latency on the reference traces (`make bench`); printed, never
asserted.

Each simulation runs in a fresh process so its peak RSS is its own. Baselines run on the 120- and 900-job traces,
Shockwave on all four with the reference configuration made for that cluster size; "900 3 types" is the 900-job
trace on 256 GPUs of three types (issue 19's bar: at most 2 minutes, p95 solve at most 1 s), against the
heterogeneity-aware baselines. "2000" and "8000" are generated traces of the same job mix, jobs and arrival rate in
proportion to the cluster (2,000 jobs on 512 GPUs arriving every 2.2 s; 8,000 on 2,048 every 0.55 s), under corrected
mechanics (issue 21's bars: at most 90 s with p95 solve at most 0.5 s, and at most 10 minutes with p95 at most 2 s;
under 2 GB; no solve stopped on a limit; makespan at most 1.15x its lower bound, worst rho at most 1.5, unfair at
most 3%). Reference numbers for
comparison (spec and issue notes, 2-core machine): the reference simulator needs 4-9 s per baseline on the 120-job
trace and 24-59 s on the 900-job trace; its Shockwave needs ~10 minutes on the 120-job trace with Gurobi on 24
threads, 12 minutes with HiGHS on 2 cores, and crashed after 23 minutes on the 220-job trace.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference"
MIX = "0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace"


@dataclass(frozen=True)
class Case:
    trace: str
    throughputs: str
    gpus: int
    config: str
    baselines: bool
    """Whether the baselines run on it too (they take seconds; the middle sizes are Shockwave's scale study)."""
    cluster: str = ""
    """GPU pools by type; empty: `gpus` of the default type."""
    mechanics: str = "reference"
    generated: tuple[int, float, int] | None = None
    """(jobs, mean gap s, seed) of a trace the generator writes (the reference's job mix), instead of `trace`."""

    @property
    def policies(self) -> tuple[str, ...] | None:
        """The policies that plan several types, when the cluster has them; None: any."""
        if "," not in self.cluster:
            return None
        return ("shockwave", "max_min_fairness_perf", "finish_time_fairness_perf", "min_total_duration_perf")


CASES = {
    "120": Case(f"120_0.2_5_100_40_25_{MIX}", "tacc", 32, "tacc_32gpus", True),
    "220": Case(f"220_0.2_5_100_25_4_{MIX}", "wisr", 64, "scale_64gpus", False),
    "460": Case(f"460_0.2_5_100_10_1_{MIX}", "wisr", 128, "scale_128gpus", False),
    "900": Case(f"900_0.2_5_1000_5_15_{MIX}", "wisr", 256, "scale_256gpus", True),
    "900-types": Case(
        f"900_0.2_5_100_5_15_{MIX}", "wisr", 256, "scale_256gpus", True, "v100:128,p100:64,k80:64", "corrected"
    ),
    "2000": Case("", "wisr", 512, "scale_256gpus", False, mechanics="corrected", generated=(2000, 2.2, 99)),
    "8000": Case("", "wisr", 2048, "scale_256gpus", False, mechanics="corrected", generated=(8000, 0.55, 99)),
    "2000-types": Case(
        "", "wisr", 512, "scale_256gpus", False, "v100:256,p100:128,k80:128", "corrected", generated=(2000, 2.2, 99)
    ),
    "8000-types": Case(
        "", "wisr", 2048, "scale_256gpus", False, "v100:1024,p100:512,k80:512", "corrected", generated=(8000, 0.55, 99)
    ),
}
SAME_JOBS = {"2000-types": "2000", "8000-types": "8000"}
"""Cases on three types and the same jobs on one type: their CPU times' ratio is printed (issue 33's bar: at most
1.5x at 2,000 jobs, with p95 solve at most 0.5 s; 8,000 jobs on three types within 10 minutes)."""


def _trace(case: Case, folder: Path) -> Path:
    """The case's trace: a reference file, or one the generator writes into `folder`."""
    if case.generated is None:
        return REFERENCE / "traces" / case.trace
    from shockwave.workload_model.generator import GeneratorParams, generate
    from shockwave.workload_model.throughput import load_throughputs
    from shockwave.workload_model.trace import write_trace

    jobs, lam, seed = case.generated
    params = GeneratorParams(jobs=jobs, lam=lam, seed=seed)
    path = folder / params.file_name()
    table = load_throughputs(REFERENCE / "throughputs" / f"{case.throughputs}_throughputs.json")
    write_trace(generate(params, table), path)
    return path


def _one(case: Case, policy: str, queue: mp.Queue) -> None:
    import logging

    logging.disable(logging.WARNING)
    from shockwave.core.cluster import ClusterSpec
    from shockwave.policies.shockwave.config import ShockwaveConfig
    from shockwave.simulator.mechanics import preset
    from shockwave.simulator.run import simulate

    config = ShockwaveConfig.from_json(REFERENCE / "configurations" / f"{case.config}.json")
    with tempfile.TemporaryDirectory() as folder:
        trace = _trace(case, Path(folder))
        started, cpu_started = time.perf_counter(), time.process_time()
        result, _ = simulate(
            trace,
            policy,
            ClusterSpec.parse(case.cluster) if case.cluster else ClusterSpec.of(case.gpus),
            preset(case.mechanics),
            REFERENCE / "throughputs" / f"{case.throughputs}_throughputs.json",
            config if policy == "shockwave" else None,
        )
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started  # the simulation's alone
    queue.put((wall, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, cpu, result))


def _row(name: str, case: Case, policy: str, run: tuple[float, float, float, dict[str, Any]]) -> list[str]:
    wall, peak, cpu, result = run
    solver = result.get("solver")
    latency = (
        [
            str(solver["solves"]),
            str(solver.get("node_limited", 0)),
            f"{solver['p50_s']:.3f}",
            f"{solver['p95_s']:.3f}",
            f"{solver['max_s']:.3f}",
        ]
        if solver
        else ["", "", "", "", ""]
    )
    return [
        f"{name} jobs",
        case.cluster or str(case.gpus),
        policy,
        f"{wall:.2f}",
        f"{cpu:.1f}",
        f"{peak:.0f}",
        f"{result['makespan_s']:.0f}",
        f"{result['makespan_s'] / result['makespan_lower_bound_s']:.3f}",
        f"{result['avg_jct_s']:.0f}",
        f"{result['worst_ftf']:.2f}",
        f"{100 * result['unfair_fraction']:.1f}",
        *latency,
    ]


def _experiments(console: Console) -> None:
    """The research commands as a user runs them: all policies compared on the canonical trace, the scale sweep
    locally and on a local Ray instance (fresh output folders, so nothing is reused)."""
    canonical = CASES["120"]
    commands = {
        "compare --policies all (120 jobs, 32 GPUs)": [
            "compare",
            "--trace",
            REFERENCE / "traces" / canonical.trace,
            "--gpus",
            "32",
            "--throughputs",
            REFERENCE / "throughputs" / "tacc_throughputs.json",
            "--config",
            REFERENCE / "configurations" / "tacc_32gpus.json",
            "--policies",
            "all",
        ],
        "sweep examples/scale.toml (9 cells)": ["sweep", ROOT / "examples" / "scale.toml"],
        "sweep examples/scale.toml --ray": ["sweep", ROOT / "examples" / "scale.toml", "--ray"],
    }
    table = Table(title="experiment commands, end to end on this machine (install excluded)")
    table.add_column("command")
    table.add_column("wall s", justify="right")
    for name, args in commands.items():
        with tempfile.TemporaryDirectory() as out:
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "shockwave", "-q", *map(str, args), "--out", out],
                check=True,
                capture_output=True,
            )
            table.add_row(name, f"{time.perf_counter() - started:.1f}")
    console.print(table)


def main() -> None:
    from shockwave.policies.registry import POLICIES

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policy names")
    parser.add_argument("--traces", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--no-experiments", action="store_true", help="skip timing compare and sweep")
    args = parser.parse_args()
    if not REFERENCE.exists():
        sys.exit(f"reference data not found at {REFERENCE}")
    table = Table(
        title="simulation wall time, peak memory and Shockwave's solver latency per re-solve "
        "(reference mechanics on the reference traces, corrected on three types and on the generated ones; "
        "one process per run; limited: solves stopped on a node limit)"
    )
    for column in (
        "trace",
        "GPUs",
        "policy",
        "wall s",
        "CPU s",
        "peak MiB",
        "makespan s",
        "/ bound",
        "avg JCT s",
        "worst rho",
        "unfair %",
        "solves",
        "limited",
        "p50 s",
        "p95 s",
        "max s",
    ):
        table.add_column(column, justify="left" if column in ("trace", "policy") else "right")
    ctx = mp.get_context("spawn")
    runs: dict[tuple[str, str], tuple[float, float, float, dict[str, Any]]] = {}
    for name in args.traces.split(","):
        case = CASES[name]
        for policy in args.policies.split(","):
            if (policy != "shockwave" and not case.baselines) or policy not in (case.policies or (policy,)):
                continue
            queue: mp.Queue = ctx.Queue()
            proc = ctx.Process(target=_one, args=(case, policy, queue))
            proc.start()
            runs[(name, policy)] = queue.get()
            proc.join()
            table.add_row(*_row(name, case, policy, runs[(name, policy)]))
    console = Console(width=200)
    console.print(table)
    for typed, one in SAME_JOBS.items():
        if (typed, "shockwave") in runs and (one, "shockwave") in runs:
            ratio = runs[(typed, "shockwave")][2] / runs[(one, "shockwave")][2]
            console.print(f"Shockwave's CPU time, {typed} over {one} (the same jobs on one type): {ratio:.2f}x")
    if not args.no_experiments:
        _experiments(console)


if __name__ == "__main__":
    main()
