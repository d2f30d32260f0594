"""`shockwave scale-study`: Shockwave and baselines on clusters of growing size, with jobs in proportion.

Each size gets its own generated trace (the Shockwave artifact's job mix): `jobs_per_gpu` jobs per GPU, arriving at
`jobs_per_gpu_hour` jobs per GPU per hour, so every cluster sees the same load per GPU and only the scale changes.
The defaults are the scale issue's bench cases (2,000 jobs on 512 GPUs arriving every 2.2 s; 8,000 on 2,048 GPUs).

Every simulation runs alone in a fresh process, one after the other: wall time and peak memory are then that
run's own (two runs side by side on a small machine would time each other). The study writes, into its folder,
each size's trace and each run's result JSON, `scale.json` (one row per size and policy), `scale.md` (the same as
a table) and `scale.png`/`.svg` (wall time, solver latency and quality against cluster size).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically

SIZES = (256, 512, 1024, 2048)
JOBS_PER_GPU = 8000 / 2048
JOBS_PER_GPU_HOUR = 3600 / (2.2 * 512)
POLICIES = ("shockwave", "max_min_fairness", "finish_time_fairness", "min_total_duration")
"""Shockwave and the baselines the paper compares it with that do best on fairness (Gavel's max-min fairness and
Themis) and on makespan (OSSP's min total duration)."""


@dataclass(frozen=True)
class ScaleStudy:
    sizes: tuple[int, ...] = SIZES
    policies: tuple[str, ...] = POLICIES
    jobs_per_gpu: float = JOBS_PER_GPU
    jobs_per_gpu_hour: float = JOBS_PER_GPU_HOUR
    seed: int = 99
    throughputs: Path | None = None
    config: Path | None = None
    mechanics: str = "corrected"

    def __post_init__(self) -> None:
        if not self.sizes or min(self.sizes) < 8:
            raise InputError(f"--sizes must name clusters of at least 8 GPUs, got {list(self.sizes)}")
        if not self.policies:
            raise InputError("--policies names no policy")
        if not self.jobs_per_gpu > 0 or not self.jobs_per_gpu_hour > 0:
            raise InputError("--jobs-per-gpu and --jobs-per-gpu-hour must be > 0")

    def jobs(self, gpus: int) -> int:
        return max(1, round(self.jobs_per_gpu * gpus))

    def mean_gap_s(self, gpus: int) -> float:
        """The generator's lam: mean seconds between arrivals."""
        return 3600 / (self.jobs_per_gpu_hour * gpus)


@dataclass(frozen=True)
class Row:
    """One simulation of the study: its size, cost and quality."""

    gpus: int
    jobs: int
    policy: str
    wall_s: float
    peak_mib: float
    makespan_s: float
    lower_bound_s: float
    makespan_over_bound: float
    avg_jct_s: float
    worst_rho: float
    unfair_fraction: float
    solves: int | None
    p95_solve_s: float | None
    max_solve_s: float | None
    node_limited: int | None


def run_study(study: ScaleStudy, out: Path, on_row: Callable[[Row], None] | None = None) -> list[Row]:
    """Generate each size's trace, simulate every policy on it in a fresh process, write the outputs. Bad inputs
    raise InputError before anything runs; a simulation that fails raises RuntimeError naming it."""
    from shockwave.policies.registry import canonical_names
    from shockwave.policies.shockwave.config import ShockwaveConfig

    policies = canonical_names(list(study.policies))
    if study.config is not None:
        ShockwaveConfig.from_json(study.config)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    for gpus in study.sizes:
        trace = _trace(study, gpus, out / "traces")
        for policy in policies:
            result, wall, peak = _in_fresh_process(study, trace, gpus, policy)
            write_atomically(out / "results" / f"{gpus}gpus_{policy}.json", json.dumps(result, indent=1))
            row = _row(gpus, study.jobs(gpus), policy, wall, peak, result)
            rows.append(row)
            if on_row is not None:
                on_row(row)
            write_outputs(study, rows, out)
    return rows


def _trace(study: ScaleStudy, gpus: int, folder: Path) -> Path:
    from shockwave.workload_model.generator import GeneratorParams, generate
    from shockwave.workload_model.throughput import load_throughputs
    from shockwave.workload_model.trace import write_trace

    params = GeneratorParams(jobs=study.jobs(gpus), lam=study.mean_gap_s(gpus), seed=study.seed)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / params.file_name()
    write_trace(generate(params, load_throughputs(study.throughputs)), path)
    return path


def _in_fresh_process(study: ScaleStudy, trace: Path, gpus: int, policy: str) -> tuple[dict[str, Any], float, float]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_simulate, args=(study, trace, gpus, policy, queue))
    proc.start()
    outcome = queue.get()
    proc.join()
    if isinstance(outcome, str):
        raise RuntimeError(f"{policy} on {gpus} GPUs failed: {outcome}")
    return outcome


def _simulate(study: ScaleStudy, trace: Path, gpus: int, policy: str, queue: Any) -> None:
    import logging

    logging.disable(logging.WARNING)
    try:
        from shockwave.core.cluster import ClusterSpec
        from shockwave.policies.shockwave.config import ShockwaveConfig
        from shockwave.simulator.mechanics import preset
        from shockwave.simulator.run import simulate

        config = ShockwaveConfig.from_json(study.config) if study.config else None
        started = time.perf_counter()
        result, _ = simulate(trace, policy, ClusterSpec.of(gpus), preset(study.mechanics), study.throughputs, config)
        wall = time.perf_counter() - started
        queue.put((result, wall, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    except Exception as exc:
        queue.put(f"{type(exc).__name__}: {exc}")


def _row(gpus: int, jobs: int, policy: str, wall: float, peak: float, result: dict[str, Any]) -> Row:
    solver = result.get("solver") or {}
    bound = float(result["makespan_lower_bound_s"])
    return Row(
        gpus=gpus,
        jobs=jobs,
        policy=policy,
        wall_s=round(wall, 2),
        peak_mib=round(peak, 1),
        makespan_s=float(result["makespan_s"]),
        lower_bound_s=bound,
        makespan_over_bound=float(result["makespan_s"]) / bound,
        avg_jct_s=float(result["avg_jct_s"]),
        worst_rho=float(result["worst_ftf"]),
        unfair_fraction=float(result["unfair_fraction"]),
        solves=solver.get("solves"),
        p95_solve_s=solver.get("p95_s"),
        max_solve_s=solver.get("max_s"),
        node_limited=solver.get("node_limited"),
    )


def write_outputs(study: ScaleStudy, rows: list[Row], out: Path) -> list[Path]:
    """scale.json, scale.md and the figure (PNG and SVG), from the rows so far."""
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(study).items()}
    write_atomically(out / "scale.json", json.dumps({"study": settings, "rows": [asdict(r) for r in rows]}, indent=1))
    write_atomically(out / "scale.md", table(rows) + "\n")
    return [out / "scale.json", out / "scale.md", *figure(rows, out / "scale")]


COLUMNS = (
    ("GPUs", lambda r: str(r.gpus)),
    ("jobs", lambda r: str(r.jobs)),
    ("policy", lambda r: r.policy),
    ("wall s", lambda r: f"{r.wall_s:.1f}"),
    ("peak MiB", lambda r: f"{r.peak_mib:.0f}"),
    ("p95 / max solve s", lambda r: "" if r.p95_solve_s is None else f"{r.p95_solve_s:.3f} / {r.max_solve_s:.3f}"),
    ("makespan / bound", lambda r: f"{r.makespan_over_bound:.3f}"),
    ("avg JCT h", lambda r: f"{r.avg_jct_s / 3600:.2f}"),
    ("worst rho", lambda r: f"{r.worst_rho:.2f}"),
    ("unfair %", lambda r: f"{100 * r.unfair_fraction:.1f}"),
)


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| " + " | ".join(name for name, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r) for _, cell in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def figure(rows: list[Row], stem: Path) -> list[Path]:
    """Wall time, Shockwave's p95 solve latency, makespan over its bound and worst rho, against cluster size."""
    import matplotlib.pyplot as plt

    from shockwave.experiments.figures import colors, save

    policies = list(dict.fromkeys(r.policy for r in rows))
    palette = colors(policies)
    panels = (
        ("wall_s", "Simulation wall time", "seconds"),
        ("p95_solve_s", "Shockwave's p95 solve latency", "seconds"),
        ("makespan_over_bound", "Makespan / lower bound", "ratio"),
        ("worst_rho", "Worst finish-time fairness ρ", "ρ"),
    )
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (key, title, unit) in zip(axes.flat, panels, strict=True):
        for policy in policies:
            points = [(r.gpus, getattr(r, key)) for r in rows if r.policy == policy and getattr(r, key) is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", color=palette[policy], label=policy)
        ax.set_xscale("log", base=2)
        sizes = sorted({r.gpus for r in rows})
        ax.set_xticks(sizes, [str(g) for g in sizes])
        ax.minorticks_off()
        ax.set_xlabel("GPUs (jobs in proportion)")
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
    axes.flat[0].set_yscale("log")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("Scale study: cost and quality against cluster size")
    fig.tight_layout()
    return save(fig, stem)
