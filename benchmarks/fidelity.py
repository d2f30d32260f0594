"""Simulator fidelity (`make fidelity`): the same small adaptive trace run for real (`shockwave run`, local Ray,
PyTorch jobs on CPU) and simulated from what the run measured, per policy; printed like the reference's Table 3.

The workloads are profiled on this machine first (`profile-workloads`' code) and the runs use that table, as an
operator would. The simulation replays each run with the batch sizes its jobs really chose (DIR/batch_sizes.json),
and what it measured (DIR/measurements.json: each round's length, each job's own rates, lease start-ups and
switch costs), profiles and forecasts from the run's table (`shockwave.runtime.run.replay_arguments`). Each
policy runs --repeats times: the spread of its real runs is the noise floor the simulator's gap should be read
against. Runs already in --out are reused, so an interrupted experiment resumes. About 2.5 minutes of wall time per
run on a 2-core machine (6 in the long regime); `make fidelity` runs both regimes and (`--docs`) rewrites their
tables in docs/fidelity.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from docs_tables import ROOT, update_page
from shockwave.runtime.run import replay_arguments
from shockwave.training.profiling import Point, profile, reachable, table_of
from shockwave.workload_model.catalog import family
from shockwave.workload_model.trace import catalog_job, write_trace

# (model, batch size, gang, mode, epochs, arrival s). Epochs last several seconds at the initial batch size (the
# adaptive jobs decide at epoch boundaries, and a round-based simulator can only switch between rounds); the
# Transformer and Recommendation epochs are short, so those jobs stay static. Accordion jobs get 4 or more epochs:
# the first two are critical on these models (the gradient norm still falls fast), so a decision comes after epoch 2.
Job = tuple[str, int, int, str, int, int]
SHORT: list[Job] = [
    ("ResNet-18", 32, 1, "accordion", 4, 0),
    ("LM", 20, 2, "gns", 2, 0),
    ("ResNet-50", 64, 2, "static", 1, 5),
    ("ResNet-18", 64, 1, "gns", 3, 10),
    ("LM", 20, 1, "accordion", 4, 15),
    ("Transformer", 32, 4, "static", 3, 20),
    ("ResNet-18", 32, 2, "gns", 2, 30),
    ("Recommendation", 2048, 1, "static", 30, 35),
    ("LM", 40, 1, "accordion", 4, 40),
    ("ResNet-18", 64, 4, "accordion", 4, 50),
    ("ResNet-50", 32, 1, "gns", 2, 60),
    ("LM", 20, 2, "static", 1, 70),
]
# Sixteen longer jobs arriving over three and a half 40 s rounds: a lease's start-up is at most about a quarter of a
# round, as on real clusters. Measured (issue 16's note): the replays were further from the runs than in the short
# regime, because more jobs start together on 2 cores and start-ups spread over 3-19 s.
LONG: list[Job] = [
    ("ResNet-18", 32, 1, "accordion", 6, 0),
    ("LM", 20, 2, "gns", 3, 0),
    ("ResNet-50", 64, 2, "static", 2, 10),
    ("ResNet-18", 64, 1, "gns", 5, 20),
    ("LM", 20, 1, "accordion", 5, 30),
    ("Transformer", 32, 4, "static", 4, 40),
    ("ResNet-18", 32, 2, "gns", 3, 50),
    ("Recommendation", 2048, 1, "static", 60, 60),
    ("LM", 40, 1, "accordion", 6, 70),
    ("ResNet-18", 64, 4, "accordion", 4, 80),
    ("ResNet-50", 32, 1, "gns", 3, 90),
    ("LM", 20, 2, "static", 2, 100),
    ("ResNet-18", 32, 1, "static", 5, 110),
    ("LM", 40, 2, "accordion", 5, 120),
    ("ResNet-50", 64, 1, "static", 2, 130),
    ("Transformer", 32, 2, "static", 5, 140),
]
REGIMES = {"short": (SHORT, 12.0), "long": (LONG, 40.0)}
"""Jobs and round length of each regime."""
METRICS = (("makespan_s", "makespan s", 1), ("avg_jct_s", "avg JCT s", 1), ("unfair_fraction", "unfair %", 100))
COLUMNS = ("policy", "metric", "run", "simulate", "difference", "single runs", "run-to-run")
PAGE = ROOT / "docs" / "fidelity.md"


def write_fidelity_trace(path: Path, regime: list[Job]) -> Path:
    jobs = [
        catalog_job(model, bs, gang, family(model).iterations_per_epoch(bs) * epochs, mode, float(arrival))
        for model, bs, gang, mode, epochs, arrival in regime
    ]
    write_trace(jobs, path)
    return path


def profiled_table(out: Path, regime: list[Job], seconds: float = 2.0) -> Path:
    """This machine's rates at every batch size and gang the trace's jobs can train at (`profile-workloads`), so
    the scheduler starts from realistic estimates rather than the built-in model's V100 numbers."""
    path = out / "profiled_throughputs.json"
    if not path.exists():
        points = set()
        for model, bs, gang, mode, _, _ in regime:
            sizes = reachable(family(model), bs) if mode != "static" else [bs]
            points |= {Point(model, size, gang) for size in sizes}
        rates = dict(profile(sorted(points, key=lambda p: (p.family, p.batch_size, p.gang)), seconds))
        path.write_text(json.dumps(table_of(rates).to_json(), indent=1))
    return path


def shockwave(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shockwave", *args], capture_output=True, text=True, check=False)


def real_run(trace: Path, table: Path, policy: str, out: Path, gpus: int, round_s: float) -> dict[str, Any]:
    results = out / "results.json"
    if not results.exists():
        journal = out / "journal.sqlite"
        common = ["--out", str(out)]
        fresh = ["--trace", str(trace), "--throughputs", str(table), "--policy", policy, "--gpus", str(gpus)]
        fresh += ["--round-seconds", str(round_s)]
        done = shockwave("run", *common, *(["--resume", "--policy", policy] if journal.exists() else fresh))
        if done.returncode != 0:
            raise SystemExit(f"shockwave run ({policy}) failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(results.read_text())[0]


def simulated(out: Path, result: dict[str, Any]) -> dict[str, Any]:
    done = shockwave("simulate", *replay_arguments(out, result), "--json")
    if done.returncode != 0:
        raise SystemExit(f"shockwave simulate failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def spread(values: list[float]) -> float:
    """Largest relative distance of one value from their mean: how far apart repeated real runs land."""
    mean = sum(values) / len(values)
    return max(abs(v - mean) for v in values) / mean if mean else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/fidelity"))
    parser.add_argument("--policies", default="shockwave,max_min_fairness,finish_time_fairness")
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--regime", choices=sorted(REGIMES), default="short", help="short: 12 jobs, 12 s rounds")
    parser.add_argument("--round-seconds", type=float, help="default: the regime's")
    parser.add_argument("--repeats", type=int, default=2, help="real runs per policy (their spread is the noise floor)")
    parser.add_argument("--docs", action="store_true", help=f"rewrite the regime's table in {PAGE.relative_to(ROOT)}")
    args = parser.parse_args()
    regime, round_s = REGIMES[args.regime]
    args.round_seconds = args.round_seconds or round_s
    console = Console()
    args.out.mkdir(parents=True, exist_ok=True)
    trace = write_fidelity_trace(args.out / "fidelity.trace", regime)
    console.print("profiling the workloads on this machine ...")
    profiled = profiled_table(args.out, regime)
    table = Table(
        title=f"Real runs vs their simulated replays, {len(regime)} jobs, {args.gpus} GPUs, {args.round_seconds:g} s "
        f"rounds, mean of {args.repeats} run(s)"
    )
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("policy", "metric") else "right")
    rows, lines = [], []
    for policy in args.policies.split(","):
        reals, sims = [], []
        for repeat in range(args.repeats):
            console.print(f"running {policy} for real (run {repeat + 1} of {args.repeats}) ...")
            out = args.out / policy / f"run-{repeat}"
            real = real_run(trace, profiled, policy, out, args.gpus, args.round_seconds)
            reals.append(real)
            sims.append(simulated(out, real))
            switches = sum(job["batch_size_changes"] for job in real["jobs"])
            preemptions = sum(job["preemptions"] for job in real["jobs"])
            console.print(
                f"  {switches} batch-size switches, {preemptions} preemptions, "
                f"start-up {real['restart_overhead_s']:.1f} s per lease, wall {real['wall_seconds']:.0f} s"
            )
        for key, label, scale in METRICS:
            ours = [r[key] * scale for r in reals]
            model = [s[key] * scale for s in sims]
            mean_run, mean_sim = sum(ours) / len(ours), sum(model) / len(model)
            singles = ", ".join(gap(a, b) for a, b in zip(ours, model, strict=True))
            row = (f"{mean_run:.1f}", f"{mean_sim:.1f}", gap(mean_run, mean_sim), singles, f"±{spread(ours):.1%}")
            table.add_row(policy, label, *row)
            lines.append(f"| {policy if key == METRICS[0][0] else ''} | {label} | {' | '.join(row)} |")
            rows.append(
                {
                    "policy": policy,
                    "metric": key,
                    "runs": [r[key] for r in reals],
                    "simulations": [s[key] for s in sims],
                }
            )
        table.add_section()
    console.print(table)
    (args.out / "fidelity.json").write_text(json.dumps(rows, indent=1))
    if args.docs:
        begin, end = markers(args.regime)
        head = [begin, f"| {' | '.join(COLUMNS)} |", "|" + "---|" * len(COLUMNS)]
        update_page(
            PAGE, (begin, end), {args.regime: lines}, lambda g: "\n".join([*head, *g[args.regime], end]), check=False
        )


def markers(regime: str) -> tuple[str, str]:
    """Where `--docs` writes the regime's table in the fidelity page."""
    return f"<!-- fidelity-{regime}:begin (make fidelity) -->", f"<!-- fidelity-{regime}:end -->"


def gap(run: float, simulated: float) -> str:
    """The replay's difference from the run: relative, or absolute where the run's value is 0."""
    return f"{(simulated - run) / run:+.1%}" if run else f"{simulated - run:+.1f}"


if __name__ == "__main__":
    main()
