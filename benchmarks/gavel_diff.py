"""Fidelity to the reference Gavel simulator on random cells, not on the ones we tuned on.

    python benchmarks/gavel_diff.py --reference DIR --cells 220 -j 2        # draw, run both sides, report, record
    python benchmarks/gavel_diff.py                                          # report the recorded cells
    python benchmarks/gavel_diff.py --reference DIR --locate KEY             # the first round the two differ
    make fidelity-gavel REF=DIR                                              # the first, with the docs' table

DIR is the `scheduler/` folder of a copy of stanford-futuredata/gavel (runnable by `--reference-python`: numpy,
scipy, cvxpy 1.7 and ecos; the two modules simulation does not need, `matrix_completion` and `runtime.rpc`, are
empty stubs this script writes under `--out`). Each cell draws a Gavel workload (seed, input job rate, single- or
multi-GPU jobs), a measurement window, a cluster of V100s, P100s and K80s and one of POLICIES, runs the reference's
generated-jobs driver on it, and runs ours as a user would: `shockwave trace generate --style gavel` with the same
seed, then `shockwave simulate --mechanics gavel --window A:B` with neither `--seed` nor `--round-seconds` (a
generated trace carries its seed; the preset its 360 s rounds). Cells run `-j` at a time and are kept under `--out`
(each side once), so an interrupted screen resumes.

The report is the distribution of ours / reference for the window's average JCT (and utilisation) over the cells:
per policy and overall, the share within 1% and 3%, the median, p95 and worst error, the worst cells with both
commands. `--record` writes every cell, with both commands and both sides' numbers, to gavel_diff.json (reference
data: the tests check recorded cells without the reference installed); `--docs` writes the tables into
docs/fidelity.md and the figure to docs/figures/gavel_diff.png.

`--locate KEY` replays one cell in-process and reads the reference's log (its "[Micro-task scheduled]" lines: each
round's jobs, types, priorities and deficits): the first round where the jobs or GPU types differ, both sides' view
of it, and the completions just before it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import reference_diff as rd  # noqa: E402 - the benchmarks folder is not a package

ROOT = HERE.parent
RECORD = HERE / "gavel_diff.json"
PAGE = ROOT / "docs" / "fidelity.md"
FIGURE = ROOT / "docs" / "figures" / "gavel_diff.png"
MARKERS = ("<!-- gavel-diff:begin (make fidelity-gavel) -->", "<!-- gavel-diff:end -->")
POLICIES = (
    "fifo", "fifo_perf", "max_min_fairness", "max_min_fairness_perf", "max_min_fairness_packed",
    "finish_time_fairness", "finish_time_fairness_perf", "min_total_duration", "min_total_duration_perf",
    "gandiva", "allox",
)  # fmt: skip
SINGLE_GPU = {"allox", "max_min_fairness_packed"}
"""The reference's AlloX asserts single-GPU jobs; its packed programs cannot reshape mixed gang sizes."""
TYPES = ("v100", "p100", "k80")
V100_EQUIVALENT = {"v100": 1.0, "p100": 0.6, "k80": 0.3}
"""A rough speed of each type against a V100, to turn a drawn load into an input job rate for any cluster."""
MEAN_JOB_V100_HOURS = 16.8
"""The generator's mean job: 60 x 10^u s with u in [1.5, 3) (p 0.8) or [3, 4) (p 0.2), so 0.8 x 16,823 s + 0.2 x
234,500 s on one V100; a multi-GPU job's gang holds 1.9 GPUs on average (Philly's mix)."""
JOBS = 10_000
"""Jobs generated for our side: the reference generates until its window is done; a run that needs more (jobs
arrived = all of them) is rerun with four times as many."""
SUCCEEDED = re.compile(r"\[Job succeeded\]\tJob ID: (\d+)\t.*Duration: ([0-9.]+)")
SCHEDULED = re.compile(
    r"\[([0-9.]+)\] \[Micro-task scheduled\]\tJob ID: ([0-9(), ]+)\tWorker type: (\w+)\tWorker ID\(s\): ([0-9,]+)"
    r"\tPriority: ([-0-9.inf]+)\tDeficit: ([-0-9.inf]+)\tAllocation: (.*)"
)
RESULTS = re.compile(r"Results: average JCT=([0-9.]+), utilization=([0-9.]+)")
KEPT = "Micro-task scheduled|Job succeeded|Job dispatched|Results:"
"""The reference's log lines a cell keeps (gzipped): enough to locate a divergence; the rest is 100s of MB."""


@dataclass(frozen=True)
class Cell:
    policy: str
    seed: int
    lam: float
    """Mean seconds between arrivals (the reference's -l)."""
    window: tuple[int, int]
    cluster: tuple[int, int, int]
    """V100s, P100s, K80s (one GPU per server, as the reference's default)."""
    multi_gpu: bool

    @property
    def key(self) -> str:
        v, p, k = self.cluster
        multi = "-multi" if self.multi_gpu else ""
        return f"{self.policy}-s{self.seed}-lam{self.lam:g}-w{self.window[0]}_{self.window[1]}-c{v}_{p}_{k}{multi}"

    @property
    def cluster_flag(self) -> str:
        return ",".join(f"{t}:{n}" for t, n in zip(TYPES, self.cluster, strict=True))

    def reference_command(self, python: str) -> list[str]:
        return [
            python, "scripts/drivers/simulate_scheduler_with_generated_jobs.py", "-c", ":".join(map(str, self.cluster)),
            "-p", self.policy, "--seed", str(self.seed), "-l", f"{self.lam:g}", "-s", str(self.window[0]),
            "-e", str(self.window[1]), "-i", "360", "--throughputs_file", "simulation_throughputs.json",
            "--solver", "ECOS", "-v", *(["--generate-multi-gpu-jobs"] if self.multi_gpu else []),
        ]  # fmt: skip

    def generate_command(self, jobs: int, trace: Path) -> list[str]:
        return [
            "shockwave", "trace", "generate", "--style", "gavel", "--jobs", str(jobs), "--lam", f"{self.lam:g}",
            "--seed", str(self.seed), *(["--multi-gpu"] if self.multi_gpu else []), "--throughputs", "gavel",
            "-o", str(trace),
        ]  # fmt: skip

    def simulate_command(self, trace: Path) -> list[str]:
        return [
            "shockwave", "simulate", "--trace", str(trace), "--policy", self.policy, "--cluster", self.cluster_flag,
            "--throughputs", "gavel", "--mechanics", "gavel", "--window", f"{self.window[0]}:{self.window[1]}",
            "--json", "--allow-unfinished",
        ]  # fmt: skip

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["jobs_per_hour"] = round(3600 / self.lam, 3)
        d["gpus"] = sum(self.cluster)
        return d

    @classmethod
    def of(cls, d: dict[str, Any]) -> Cell:
        return cls(d["policy"], d["seed"], d["lam"], tuple(d["window"]), tuple(d["cluster"]), d["multi_gpu"])


def draw_cells(count: int, draw_seed: int) -> list[Cell]:
    """`count` cells, the policies in turn (so each gets its share), every other knob drawn: the seed from 10^6, a
    cluster of 6-48 GPUs per type, a load of 0.3-1.0 of the cluster's V100-equivalent capacity (rate = load x
    capacity / mean job), a window of 40-160 jobs starting at job 30-400, and multi-GPU jobs in a third of the cells
    of the policies that take them."""
    rng = random.Random(draw_seed)
    cells = []
    for i in range(count):
        policy = POLICIES[i % len(POLICIES)]
        cluster = tuple(rng.randint(6, 48) for _ in TYPES)
        multi = policy not in SINGLE_GPU and rng.random() < 1 / 3
        capacity = sum(V100_EQUIVALENT[t] * n for t, n in zip(TYPES, cluster, strict=True))
        load = rng.uniform(0.3, 1.0)
        per_hour = load * capacity / (MEAN_JOB_V100_HOURS * (1.9 if multi else 1.0))
        start = rng.randint(30, 400)
        window = (start, start + rng.randint(40, 160))
        cells.append(Cell(policy, rng.randrange(10**6), round(3600 / per_hour, 1), window, cluster, multi))  # type: ignore[arg-type]
    return cells


# -- the reference's side -------------------------------------------------------------------------------------------
def stubs(out: Path) -> Path:
    """Empty modules for the reference's imports that simulation never uses."""
    folder = out / "stubs"
    for name in ("matrix_completion.py", "runtime/__init__.py", "runtime/rpc/__init__.py"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).touch()
    for name in ("scheduler_server", "scheduler_client"):
        (folder / "runtime" / "rpc" / f"{name}.py").touch()
    return folder


def run_reference(cell: Cell, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The reference's driver on the cell: its printed average JCT and utilisation, each window job's JCT, wall
    time; its log's kept lines go to folder/reference.log.gz."""
    command = cell.reference_command(args.reference_python)
    env = {**os.environ, "PYTHONPATH": str(stubs(args.out).resolve())}
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryFile() as kept:
        ref = subprocess.Popen(command, cwd=args.reference, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        grep = subprocess.Popen(["grep", "-E", KEPT], stdin=ref.stdout, stdout=kept)
        assert ref.stdout is not None
        ref.stdout.close()
        code = ref.wait(timeout=args.reference_timeout)
        grep.wait()
        wall = time.perf_counter() - started
        kept.seek(0)
        text = kept.read().decode()
    found = RESULTS.search(text)
    if code != 0 or found is None:
        raise RuntimeError(f"the reference exited {code} without results: {shlex.join(command)}")
    with gzip.open(folder / "reference.log.gz", "wt") as log:
        log.write(text)
    start, stop = cell.window
    per_job = {int(j): float(d) for j, d in SUCCEEDED.findall(text) if start <= int(j) < stop}
    return {
        "avg_jct_s": float(found.group(1)),
        "utilization": float(found.group(2)),
        "per_job_jct_s": per_job,
        "jobs_dispatched": text.count("[Job dispatched]"),
        "wall_s": round(wall, 2),
        "command": f"cd {args.reference} && PYTHONPATH=stubs {shlex.join(command)}",
    }


# -- our side -------------------------------------------------------------------------------------------------------
def run_ours(cell: Cell) -> dict[str, Any]:
    """Ours as a user runs it (the CLI, no --seed, no --round-seconds), with more jobs if the run used them all."""
    jobs = JOBS
    while True:
        trace = Path("cell.trace")
        generate, simulate = cell.generate_command(jobs, trace), cell.simulate_command(trace)
        cli = [sys.executable, "-m", "shockwave"]
        with tempfile.TemporaryDirectory() as scratch:
            subprocess.run(cli + generate[1:], check=True, capture_output=True, cwd=scratch)
            started = time.perf_counter()
            done = subprocess.run(cli + simulate[1:], check=True, capture_output=True, text=True, cwd=scratch)
            wall = time.perf_counter() - started
        result = json.loads(done.stdout)
        if result["jobs_arrived"] < jobs:
            break
        jobs *= 4
    return {
        "avg_jct_s": result["avg_jct_s"],
        "utilization": result["utilization"],
        "per_job_jct_s": {job["id"]: job["jct_s"] for job in result["jobs"]},
        "jobs_arrived": result["jobs_arrived"],
        "seed": result["seed"],
        "round_seconds": result["round_seconds"],
        "wall_s": round(wall, 2),
        "command": f"{shlex.join(generate)} && {shlex.join(simulate)}",
    }


def compared(cell: Cell, reference: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    ratios = {m: ours[m] / reference[m] for m in ("avg_jct_s", "utilization")}
    keep = ("avg_jct_s", "utilization", "wall_s", "command")
    return {
        "key": cell.key,
        "cell": cell.describe(),
        "reference": {k: reference[k] for k in (*keep, "jobs_dispatched")},
        "ours": {k: ours[k] for k in (*keep, "jobs_arrived")},
        "ratios": ratios,
    }


def run_cell(cell: Cell, args: argparse.Namespace) -> dict[str, Any]:
    folder = args.out / "cells" / cell.key
    reference = rd.cached(folder, "reference", lambda: run_reference(cell, args, folder))
    ours = rd.cached(folder, "ours", lambda: run_ours(cell))
    return compared(cell, reference, ours)


# -- the divergence locator -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scheduled:
    job: str
    gpu_type: str
    gpus: int
    priority: str
    deficit: str
    allocation: str


def reference_rounds(log: Path) -> list[tuple[float, dict[str, Scheduled]]]:
    """The reference's rounds from its log: (time, job -> what it was given), in order."""
    rounds: dict[float, dict[str, Scheduled]] = defaultdict(dict)
    with gzip.open(log, "rt") as lines:
        for line in lines:
            m = SCHEDULED.search(line)
            if m:
                t, job, gpu_type, ids, priority, deficit, allocation = m.groups()
                entry = Scheduled(job.strip(), gpu_type, len(ids.split(",")), priority, deficit, allocation.strip())
                rounds[float(t)][entry.job] = entry
    return sorted(rounds.items())


def our_rounds(cell: Cell, jobs: int) -> tuple[list[tuple[float, dict[str, tuple[str, int]]]], Any]:
    """Our rounds of the cell, in-process: (time, job -> (type, GPUs)), and the result."""
    from shockwave.api import simulate
    from shockwave.core.cluster import ClusterSpec
    from shockwave.datasets import locate
    from shockwave.workload_model.gavel_generator import GavelWorkload
    from shockwave.workload_model.throughput import TableThroughputs

    cluster = ClusterSpec.parse(cell.cluster_flag)
    rounds: list[tuple[float, dict[str, tuple[str, int]]]] = []

    def record(progress: Any) -> None:
        by_gpus: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for job, gpus in progress.placement.items():
            by_gpus[gpus].append(job)
        given = {}
        for gpus, members in by_gpus.items():
            name = str(members[0]) if len(members) == 1 else f"({min(members)}, {max(members)})"
            given[name] = (cluster.type_of(gpus[0]), len(gpus))
        rounds.append((progress.now_s, given))

    with tempfile.TemporaryDirectory() as scratch:
        workload = GavelWorkload(jobs, cell.lam, seed=cell.seed, multi_gpu=cell.multi_gpu)
        trace = workload.write(TableThroughputs.from_json(locate("gavel", "throughputs")), Path(scratch))
        result = simulate(
            trace, cell.policy, cluster, throughputs="gavel", mechanics="gavel", window=cell.window, on_round=record
        )
    # the round's time is the decision's: the progress callback reports after launch, at the same clock
    return rounds, result


def locate_divergence(cell: Cell, args: argparse.Namespace) -> None:
    """Print the first round where the two simulators give other jobs, types or gangs, with both sides' view. Rounds
    are matched by their decision time (to a millisecond): a round in which one side ran nothing is absent from the
    reference's log."""
    folder = args.out / "cells" / cell.key
    log = folder / "reference.log.gz"
    if not log.exists():
        rd.cached(folder, "reference", lambda: run_reference(cell, args, folder))
    theirs = {round(t, 3): given for t, given in reference_rounds(log)}
    ours_list, result = our_rounds(cell, JOBS)
    ours = {round(t, 3): given for t, given in ours_list if given}
    print(f"cell {cell.key}: {len(theirs)} reference rounds that ran jobs, {len(ours)} of ours; our average JCT "
          f"{result.avg_jct_s}")  # fmt: skip
    agreed = None
    for t in sorted(set(theirs) | set(ours)):
        ref, mine = theirs.get(t, {}), ours.get(t, {})
        given = {job: (s.gpu_type, s.gpus) for job, s in ref.items()}
        if given == mine:
            agreed = t
            continue
        print(f"first divergent round: at {t:.3f} s ({'both sides decided then' if ref and mine else 'one side only'})")
        for job in sorted(set(given) | set(mine), key=_job_order):
            if given.get(job) == mine.get(job):
                continue
            s = ref.get(job)
            theirs_text = "-"
            if s is not None:
                theirs_text = f"{s.gpu_type} x{s.gpus} priority {s.priority} deficit {s.deficit} [{s.allocation}]"
            ours_text = f"{mine[job][0]} x{mine[job][1]}" if job in mine else "-"
            print(f"  job {job}: reference {theirs_text}; ours {ours_text}")
        same = sorted((j for j in set(given) & set(mine) if given[j] == mine[j]), key=_job_order)
        print(f"  {len(same)} jobs given the same: {' '.join(same[:40])}{' ...' if len(same) > 40 else ''}")
        if agreed is not None:
            print(f"  the round before agreed, at {agreed:.3f} s")
        return
    print("no divergent round: both sides gave every job the same type and gang in every round")


def _job_order(job: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", job))


# -- report ---------------------------------------------------------------------------------------------------------
def report(rows: list[dict[str, Any]], docs: bool) -> None:
    jct = rd.spreads(rows, "policy", "avg_jct_s")
    rd.print_spreads(jct, f"average JCT, ours / reference, {len(rows)} random cells", "policy")
    rd.print_spreads(rd.spreads(rows, "policy", "utilization"), "utilisation, ours / reference", "policy")
    worst = rd.worst_cells(rows, "avg_jct_s", 8)
    for row in worst:
        print(f"{row['key']}: {rd.describe_ratio(row)}\n  reference: {row['reference']['command']}\n  ours: "
              f"{row['ours']['command']}")  # fmt: skip
    if docs:
        multi = rd.spreads(rows, "multi_gpu", "avg_jct_s")
        lines = [*rd.markdown_table(jct, "policy"), "", *rd.markdown_table(multi, "multi-GPU jobs")]
        lines += ["", "The cells furthest from the reference (average JCT):", ""]
        lines += ["| cell | ours / reference | jobs/h | GPUs | reference wall s | ours wall s |", "|---" * 6 + "|"]
        lines += [
            f"| `{r['key']}` | {r['ratios']['avg_jct_s']:.4f} | {r['cell']['jobs_per_hour']} | {r['cell']['gpus']} "
            f"| {r['reference']['wall_s']} | {r['ours']['wall_s']} |"
            for r in worst
        ]
        rd.replace_between(PAGE, MARKERS, lines)
        rd.figure(rows, "policy", "avg_jct_s", FIGURE, f"Gavel: average JCT over the window, {len(rows)} random cells")
        print(f"wrote {PAGE} and {FIGURE}")


def record(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    about = (
        "Random cells run on the reference Gavel simulator (stanford-futuredata/gavel, its generated-jobs driver, "
        "ECOS) and on ours (trace generate + simulate --mechanics gavel, no --seed or --round-seconds), by "
        f"`python benchmarks/gavel_diff.py --reference DIR --cells {args.cells} --draw-seed {args.draw_seed}`, "
        f"on this project's machine kind (2 cores, Python 3.11), {time.strftime('%Y-%m-%d')}."
    )
    RECORD.write_text(json.dumps({"about": about, "draw_seed": args.draw_seed, "cells": rows}, indent=1) + "\n")
    print(f"recorded {len(rows)} cells in {RECORD}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, help="the scheduler/ folder of a copy of Gavel")
    parser.add_argument("--reference-python", default="python3")
    parser.add_argument("--reference-timeout", type=float, default=3600.0, help="seconds per reference run")
    parser.add_argument("--cells", type=int, default=220)
    parser.add_argument("--draw-seed", type=int, default=59)
    parser.add_argument("--policies", default="", help="comma-separated: only these policies' cells")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="cells at a time")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "gavel-diff")
    parser.add_argument("--record", action="store_true", help=f"write the cells to {RECORD.name}")
    parser.add_argument("--docs", action="store_true", help="write the tables into docs/fidelity.md and the figure")
    parser.add_argument("--locate", metavar="KEY", help="the first divergent round of one cell")
    args = parser.parse_args()
    if args.reference is None:
        if args.locate:
            raise SystemExit("--locate runs the reference: give --reference DIR")
        rows = json.loads(RECORD.read_text())["cells"]
        report(rows, args.docs)
        return
    args.reference = args.reference.resolve()
    args.out = args.out.resolve()
    cells = draw_cells(args.cells, args.draw_seed)
    if args.locate:
        chosen = [c for c in cells if c.key == args.locate]
        rows = json.loads(RECORD.read_text())["cells"] if RECORD.exists() else []
        recorded = [Cell.of(r["cell"]) for r in rows if r["key"] == args.locate]
        if not chosen and not recorded:
            raise SystemExit(f"no cell {args.locate!r} among those drawn or recorded")
        locate_divergence((chosen or recorded)[0], args)
        return
    if args.policies:
        wanted = set(args.policies.split(","))
        cells = [c for c in cells if c.policy in wanted]
    rows = rd.run_all(cells, lambda cell: run_cell(cell, args), args.jobs)
    report(rows, args.docs)
    if args.record:
        record(rows, args)


if __name__ == "__main__":
    main()
