"""Solve time of `max_min_fairness_packed` against the reference's formulation, side by side in one run (`make
bench`); printed, never asserted.

The reference builds one LP variable per job and per pair of jobs on every GPU type, so its program grows with the
square of the active jobs (2 million pairs at 2048 jobs). Ours solves the same max-min program over classes of
interchangeable jobs (same model, batch size, gang and weight), whose size does not grow with the jobs, and spreads
the result over the pairs (`packed.Classes`). The reference's formulation is run here as our `reference_quirks`
build of it, which reproduces the reference simulator's numbers exactly (same data to ECOS; see docs/gavel.md).

Inputs: N single-GPU jobs drawn from Gavel's templates with a V100 rate in Gavel's `simulation_throughputs.json`
(the built-in model knows no pairs, so the shared folder is required), every pair the table lists, and N/4 GPUs of
each of k80, p100 and v100. Each call runs in a child process (a fresh interpreter, a wall-clock limit, its memory
freed after); only the `allocate` call is timed. The optimum of both is printed (the lowest normalised throughput):
the class program must reach the per-pair program's level.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import resource
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from shockwave.policies.gavel.lp import proportional_throughputs
from shockwave.policies.gavel.max_min_fairness import MaxMinFairnessPacked
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, PairRates
from shockwave.workload_model.gavel_generator import REFERENCE_TYPE, TEMPLATES
from shockwave.workload_model.throughput import colocated_rates, load_throughputs, rate_or_zero

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUTS = ROOT.parent / "shared" / "reference" / "gavel" / "simulation_throughputs.json"
GPU_TYPES = ("k80", "p100", "v100")
SIZES = (32, 128, 512, 2048)


def draw(jobs: int, seed: int) -> AllocationInputs:
    tm = load_throughputs(THROUGHPUTS)
    rng = random.Random(seed)
    kinds: dict[int, tuple[str, int]] = {}
    for j in range(jobs):
        template = rng.choice([t for t in TEMPLATES if rate_or_zero(tm, t.family, t.batch_size, 1, REFERENCE_TYPE) > 0])
        kinds[j] = (template.family, template.batch_size)
    by_kind: dict[tuple[tuple[str, int], tuple[str, int]], PairRates | None] = {}
    pairs: dict[tuple[int, int], PairRates] = {}
    for a in range(jobs):
        for b in range(a + 1, jobs):
            key = (kinds[a], kinds[b])
            if key not in by_kind:
                found = {t: colocated_rates(tm, *kinds[a], *kinds[b], 1, t) for t in GPU_TYPES}
                known = any(r is not None for r in found.values())
                by_kind[key] = {t: r or (0.0, 0.0) for t, r in found.items()} if known else None
            if (rates := by_kind[key]) is not None:
                pairs[(a, b)] = rates
    ids = list(range(jobs))
    return AllocationInputs(
        job_ids=ids,
        gpu_types=GPU_TYPES,
        gpus_by_type=(jobs // 4,) * 3,
        throughputs={j: {t: rate_or_zero(tm, *kinds[j], 1, t) for t in GPU_TYPES} for j in ids},
        scale_factors=dict.fromkeys(ids, 1),
        remaining_steps=dict.fromkeys(ids, 1000),
        times_since_start=dict.fromkeys(ids, 0.0),
        weights=dict.fromkeys(ids, 1.0),
        pairs=pairs,
        kinds=kinds,
    )


def level(inputs: AllocationInputs, x: Allocation) -> float:
    """The lowest normalised throughput the allocation gives a job (what max-min maximises)."""
    gained = dict.fromkeys(inputs.job_ids, 0.0)
    for entry, row in x.items():
        for t, share in row.items():
            if isinstance(entry, tuple):
                for job, rate in zip(entry, inputs.pairs[entry][t], strict=True):
                    gained[job] += share * rate
            else:
                gained[entry] += share * inputs.throughputs[entry][t]
    prop = proportional_throughputs(inputs, inputs.throughput_matrix()).ravel()
    return float(min(gained[j] / prop[i] for i, j in enumerate(inputs.job_ids)))


MEMORY_GB = 12
"""Address space a child may take: the reference's program at 2048 jobs would take the machine's memory."""


def timed(jobs: int, seed: int, reference: bool, out: multiprocessing.Queue) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_GB << 30, MEMORY_GB << 30))
    inputs = draw(jobs, seed)
    started = time.perf_counter()
    try:
        x = MaxMinFairnessPacked(reference_quirks=reference).allocate(inputs)
    except (MemoryError, RuntimeError) as exc:  # ECOS reports running out of memory as an internal error
        out.put(f"failed after {time.perf_counter() - started:.0f} s: {str(exc).splitlines()[0]}")
        return
    out.put((time.perf_counter() - started, level(inputs, x), len(inputs.pairs)))


def run(jobs: int, seed: int, reference: bool, limit_s: float) -> tuple[float, float, int] | str:
    """(seconds, level, pairs) of one call in a child process, or why it has none."""
    spawn = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = spawn.Queue()
    child = spawn.Process(target=timed, args=(jobs, seed, reference, out))
    child.start()
    child.join(limit_s)
    if child.is_alive():
        child.kill()
        child.join()
        return f"stopped at {limit_s:g} s"
    return out.get() if not out.empty() else f"died (exit code {child.exitcode})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="active jobs, comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=float, default=900.0, help="seconds a reference call may take (default 900)")
    args = parser.parse_args()
    if not THROUGHPUTS.exists():
        sys.exit(f"{THROUGHPUTS} is missing: this benchmark needs Gavel's table (the built-in model has no pairs)")
    table = Table(title="max_min_fairness_packed: allocation time, ours (classes) vs the reference's formulation")
    for column in ("jobs", "pairs", "ours s", "ref s", "ref/ours", "ours level", "ref level"):
        table.add_column(column, justify="right")
    console = Console(width=160)
    for jobs in (int(s) for s in args.sizes.split(",")):
        ours = run(jobs, args.seed, reference=False, limit_s=args.limit)
        if isinstance(ours, str):
            sys.exit(f"our allocation of {jobs} jobs {ours}")
        theirs = run(jobs, args.seed, reference=True, limit_s=args.limit)
        ref_s = f"{theirs[0]:.2f}" if not isinstance(theirs, str) else theirs
        ratio = f"{theirs[0] / ours[0]:.0f}x" if not isinstance(theirs, str) else "-"
        ref_level = f"{theirs[1]:.6f}" if not isinstance(theirs, str) else "-"
        table.add_row(str(jobs), str(ours[2]), f"{ours[0]:.2f}", ref_s, ratio, f"{ours[1]:.6f}", ref_level)
        console.print(f"{jobs} jobs done", style="dim")
    console.print(table)
    console.print("level: the lowest normalised throughput of the allocation; equal up to ECOS's tolerance")


if __name__ == "__main__":
    main()
