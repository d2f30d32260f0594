"""Whole Gavel-mechanics simulations, ours against the reference Gavel simulator, in CPU seconds (`make bench`).

Each case is one of the reference's generated-jobs runs (36:36:36 cluster, 360 s rounds, seed 0, metrics over jobs
400-599): the reference's driver generates its jobs and simulates them in one process; ours does the same in one
process (`--child`: generate the workload as `trace generate --style gavel` does, then `simulate --mechanics gavel`,
whose policies build the reference's programs). Both are timed as child processes (user + system CPU from
`getrusage`, imports included), one after the other, alternating which goes first per repeat; the minimum over
repeats is shown (the least disturbed run). Average JCTs are printed beside (the reference's as
`reference_results.json` records it: its driver prints nothing without -v, whose per-round log would cost it CPU that
is not simulation); they must be the same.

    python benchmarks/gavel_simulation_cpu.py --reference-scheduler /tmp/gavel/scheduler \\
        --reference-python /tmp/gavel-venv/bin/python --reference-pythonpath /tmp/gavel-stubs

The reference needs a scratch copy of Gavel's `scheduler/` folder outside this project and a Python with numpy,
scipy, cvxpy and ecos; its imports of `matrix_completion` and `runtime.rpc` are not needed to simulate and can be
empty modules on PYTHONPATH (see ../shared/reference/RUNNING_REFERENCES.md). Without it only our times are shown.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUTS = ROOT.parent / "shared" / "reference" / "gavel" / "simulation_throughputs.json"


@dataclass(frozen=True)
class Case:
    policy: str
    lam: float
    multi_gpu: bool

    @property
    def label(self) -> str:
        return f"{self.policy}, {3600 / self.lam:g} jobs/h, {'multi' if self.multi_gpu else 'single'}-GPU"


CASES = (Case("max_min_fairness_perf", 900.0, False), Case("finish_time_fairness_perf", 2400.0, True))
"""Issue 36's two cases: the bar is 5x less CPU than the reference on each."""


def child(case: Case, throughputs: Path) -> None:
    """Ours, in this process: generate the workload, simulate it, print the average JCT as JSON."""
    from shockwave.api import simulate
    from shockwave.workload_model.gavel_generator import GavelWorkload
    from shockwave.workload_model.throughput import TableThroughputs

    with tempfile.TemporaryDirectory() as folder:
        workload = GavelWorkload(2500, case.lam, seed=0, multi_gpu=case.multi_gpu)
        trace = workload.write(TableThroughputs.from_json(throughputs), Path(folder))
        result = simulate(
            trace, case.policy, "v100:36,p100:36,k80:36", throughputs=throughputs, mechanics="gavel",
            round_seconds=360, window=(400, 600), seed=0,
        )  # fmt: skip
    print(json.dumps({"avg_jct_s": result.avg_jct_s}))


def timed(command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> tuple[float, str]:
    """The child's CPU seconds (user + system) and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} ... failed:\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def ours(case: Case, throughputs: Path) -> tuple[float, float]:
    args = [case.policy, str(case.lam), "1" if case.multi_gpu else "0", str(throughputs)]
    cpu, out = timed([sys.executable, __file__, "--child", *args])
    return cpu, float(json.loads(out.strip().splitlines()[-1])["avg_jct_s"])


def theirs(case: Case, args: argparse.Namespace) -> tuple[float, float]:
    command = [
        args.reference_python, "scripts/drivers/simulate_scheduler_with_generated_jobs.py", "-c", "36:36:36",
        "-p", case.policy, "--seed", "0", "-l", str(case.lam), "-s", "400", "-e", "600", "-i", "360",
        "--throughputs_file", "simulation_throughputs.json", "--solver", "ECOS",
        *(["--generate-multi-gpu-jobs"] if case.multi_gpu else []),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": args.reference_pythonpath or "", "OMP_NUM_THREADS": "1"}
    cpu, _ = timed(command, cwd=args.reference_scheduler, env=env)
    return cpu, published_jct(case)


def published_jct(case: Case) -> float:
    """The reference's average JCT for the case as `reference_results.json` records it (its driver prints nothing
    without -v, and -v's per-round log would cost it CPU that is not simulation)."""
    rows = json.loads((THROUGHPUTS.parent / "reference_results.json").read_text())["runs"]
    for row in rows:
        same = (row["policy"], row.get("lam_mean_interarrival_s"), row["multi_gpu_jobs"]) == (
            case.policy, case.lam, case.multi_gpu
        )  # fmt: skip
        if same and str(row["seed"]) == "0":
            return float(row["avg_jct_s"])
    return float("nan")


def measure(case: Case, args: argparse.Namespace) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(CPU seconds, average JCT) of each repeat, ours and the reference's (none without it), alternating."""
    mine: list[tuple[float, float]] = []
    ref: list[tuple[float, float]] = []
    for repeat in range(args.repeats):
        order = ["ours", "reference"] if repeat % 2 == 0 else ["reference", "ours"]
        for side in order:
            if side == "ours":
                mine.append(ours(case, args.throughputs))
            elif args.reference_scheduler is not None:
                ref.append(theirs(case, args))
    return mine, ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", nargs=4, metavar=("POLICY", "LAM", "MULTI", "THROUGHPUTS"), help=argparse.SUPPRESS)
    parser.add_argument("--reference-scheduler", type=Path, help="the reference's scheduler/ folder")
    parser.add_argument("--reference-python", default=sys.executable, help="a Python that runs the reference")
    parser.add_argument("--reference-pythonpath", help="PYTHONPATH for the reference (its stub modules)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--throughputs", type=Path, default=THROUGHPUTS)
    args = parser.parse_args()
    if args.child:
        policy, lam, multi, throughputs = args.child
        child(Case(policy, float(lam), multi == "1"), Path(throughputs))
        return
    console = Console(width=140)
    if not args.throughputs.is_file():
        console.print(f"note: {args.throughputs} not found; these cases need Gavel's throughput table")
        return
    reference = args.reference_scheduler
    if reference is not None and not (reference / "scripts" / "drivers").is_dir():
        sys.exit(f"--reference-scheduler {reference} has no scripts/drivers (Gavel's scheduler/ folder)")
    table = Table(title=f"whole simulations, CPU seconds (min of {args.repeats}), imports included")
    for column in ("case", "ours CPU-s", "reference CPU-s", "reference / ours", "ours avg JCT", "reference avg JCT"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for case in CASES:
        mine, ref = measure(case, args)
        cpu, jct = min(mine)
        cells = [case.label, f"{cpu:.2f}"]
        if ref:
            ref_cpu, ref_jct = min(ref)
            cells += [f"{ref_cpu:.2f}", f"{ref_cpu / cpu:.1f}x", f"{jct:.3f}", f"{ref_jct:.3f}"]
        else:
            cells += ["", "", f"{jct:.3f}", ""]
        table.add_row(*cells)
    console.print(table)


if __name__ == "__main__":
    main()
