"""Lease start-up on the Ray runtime (`make bench`): seconds from a round's decision to a lease's first training step,
as `shockwave run` records them (`results.json`: `jobs[].startup_s`, one per lease), on a quiet machine and with a
CPU hog on one core.

The workload is made to preempt: eight jobs (1-GPU ones and 2- and 4-GPU gangs, PyTorch on CPU) time-share 4 logical
GPUs under max-min fairness in short rounds, so most leases resume a job from its checkpoint. Each lease is classed
by its job's gang and by whether it resumed (every lease but a job's first). Printed: count, median, 90th percentile
and max per class, and the bars (resumed: 1 GPU at most 0.5 s, 4 GPUs at most 1.5 s; with the hog at most twice that).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from shockwave.workload_model.trace import catalog_job, write_trace

# (model, batch size, gang, steps, arrival s): about 20 s of training each, alone on this machine's CPUs
JOBS = [
    ("ResNet-18", 32, 1, 7500, 0),
    ("LM", 20, 1, 10000, 0),
    ("ResNet-18", 32, 4, 1700, 0),
    ("Transformer", 32, 1, 4000, 2),
    ("ResNet-18", 64, 2, 4000, 2),
    ("LM", 20, 4, 1900, 4),
    ("Recommendation", 2048, 1, 10000, 4),
    ("ResNet-18", 32, 1, 5000, 6),
]
BARS = {1: 0.5, 4: 1.5}
"""Median start-up of a resumed lease, by gang, on a quiet machine (seconds); with a CPU hog, twice that."""
ROUND_S = 6.0


def write_workload(path: Path) -> Path:
    write_trace([catalog_job(m, bs, gang, steps, "static", float(t)) for m, bs, gang, steps, t in JOBS], path)
    return path


def hog() -> subprocess.Popen[bytes]:
    """A process spinning on core 0 for as long as it lives."""
    spin = "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", spin])


def run(trace: Path, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "shockwave", "run", "--trace", str(trace), "--out", str(out), "--gpus", "4"),
            *("--policy", "max_min_fairness", "--round-seconds", str(ROUND_S), "--realloc-seconds", "0"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"shockwave run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads((out / "results.json").read_text())[0]


def leases(result: dict[str, Any]) -> dict[tuple[int, bool], list[float]]:
    """Start-ups by (gang, resumed)."""
    gangs = {i: job[2] for i, job in enumerate(JOBS)}
    classes: dict[tuple[int, bool], list[float]] = {}
    for job in result["jobs"]:
        for index, seconds in enumerate(job.get("startup_s", [])):
            classes.setdefault((gangs[job["id"]], index > 0), []).append(seconds)
    return classes


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


def report(name: str, classes: dict[tuple[int, bool], list[float]], factor: float) -> list[str]:
    print(f"\n{name}: lease start-up, seconds from the round's decision to the first step")
    print(f"{'gang':>4} {'lease':>8} {'count':>6} {'median':>7} {'p90':>7} {'max':>7}")
    missed = []
    for (gang, resumed), values in sorted(classes.items()):
        median = statistics.median(values)
        kind = "resumed" if resumed else "first"
        print(f"{gang:>4} {kind:>8} {len(values):>6} {median:>7.3f} {p90(values):>7.3f} {max(values):>7.3f}")
        bar = BARS.get(gang)
        if resumed and bar is not None and median > bar * factor:
            missed.append(f"{name}: resumed {gang}-GPU median {median:.3f} s > {bar * factor:.2f} s")
    return missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        trace = write_workload(out / "startup.trace")
        quiet = leases(run(trace, out / "quiet"))
        spinning = hog()
        try:
            loaded = leases(run(trace, out / "hog"))
        finally:
            spinning.kill()
            spinning.wait()
    missed = report(f"quiet ({os.cpu_count()} cores)", quiet, 1.0)
    missed += report("a CPU hog on core 0", loaded, 2.0)
    print("\n" + ("\n".join(missed) if missed else "every bar met"))


if __name__ == "__main__":
    main()
