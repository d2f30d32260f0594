"""Allocation solve time of our heterogeneity-aware Gavel policies against the reference Gavel's own code, side by
side in one run (`make bench`); printed, never asserted.

Per policy, job mix (single-GPU jobs only, or Gavel's multi-GPU mix) and number of active jobs, both
implementations get the same inputs: a seeded job mix drawn the way Gavel's generator draws jobs (gang size, duration,
template), each job's throughput per GPU type from Gavel's `simulation_throughputs.json` (or the built-in model when
the shared folder is missing; a type a job has no rate on gets 0, as the table's zeros mean), a remaining part of
its steps and a time since arrival. The cluster has three types (v100, p100, k80); by default each has jobs // 4
GPUs, the scaling the reference's own policy-runtime sweep uses, so the cluster stays loaded (0.75 GPUs per job
before gangs); `--cluster V:P:K` fixes it instead (e.g. 36:36:36).

Only the allocation call is timed (wall, `time.perf_counter`): a fresh allocator's `allocate(AllocationInputs)` for
ours, a fresh policy object's `get_allocation(...)` for the reference, whose inputs (dicts keyed by a minimal
stand-in for its job-id type) are built beforehand. The two run interleaved, in alternating order, on the same
inputs, so the machine's other load falls on both alike; the median over repeats is shown. cvxpy's own timers split
each call into compile (`compilation_time`: canonicalisation to the solver's matrices) and solver (the ECOS call
through cvxpy's interface); the rest is building the expressions and reading the result back.

The reference's `scheduler/policies/` folder is imported at run time from `--reference-policies DIR`, e.g.

    mkdir -p /tmp/gavel_ref
    git --git-dir=GAVEL.git archive HEAD scheduler/policies | tar -x -C /tmp/gavel_ref
    python benchmarks/gavel_policy_runtime.py --reference-policies /tmp/gavel_ref

DIR may be the policies folder itself or a folder holding scheduler/policies (`make bench` passes $GAVEL_POLICIES,
default /tmp/gavel_ref); without it only our times are shown. Nothing of the reference is stored in this project.

Both allocations are scored by one function per policy (the max-min level,
the worst finish-time fairness, the makespan the allocation implies for min_total_duration, the summed
throughput); "same" means within 1e-6 relative. max |dx| shows whether the two allocations are the same point
(ties among optima are broken by ECOS, so identical problem data give identical allocations).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import io
import random
import statistics
import sys
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cvxpy as cp
import numpy as np
from rich.console import Console
from rich.table import Table

from shockwave.policies.gavel import cone
from shockwave.policies.gavel.lp import isolated_allocation, proportional_throughputs
from shockwave.policies.gavel.mechanism import AllocationInputs
from shockwave.policies.registry import POLICIES
from shockwave.workload_model.gavel_generator import REFERENCE_TYPE, TEMPLATES, duration_s, scale_factor
from shockwave.workload_model.throughput import ThroughputModel, load_throughputs, rate_or_zero

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUTS = ROOT.parent / "shared" / "reference" / "gavel" / "simulation_throughputs.json"
GPU_TYPES = ("k80", "p100", "v100")
"""Alphabetical: both implementations order their columns this way."""
SIZES = (32, 64, 128, 256, 512, 1024, 2048)
POLICY_NAMES = (
    "max_min_fairness_perf",
    "max_min_fairness_perf:classes",
    "max_min_fairness",
    "finish_time_fairness_perf",
    "min_total_duration_perf",
    "max_sum_throughput_perf",
)
LARGE = 512
"""From this many jobs on, fewer repeats (the reference's finish-time fairness takes seconds there)."""
SAME = 1e-6
COLUMNS = (
    "jobs",
    "GPUs v:p:k",
    "ours s",
    "ref s",
    "ours/ref",
    "ours cmp",
    "ours slv",
    "ref cmp",
    "ref slv",
    "LPs",
    "objective",
    "rel diff",
    "same",
    "max|dx|",
)
"""cmp: cvxpy's compile time, slv: the solver call (ECOS; ours hands it matrices directly, so has no compile), LPs:
problems solved per call; all medians."""


@dataclass(frozen=True)
class Mix:
    """One benchmark input: active jobs and the cluster, in our allocator's terms."""

    inputs: AllocationInputs

    @property
    def cluster(self) -> dict[str, int]:
        return dict(zip(self.inputs.gpu_types, self.inputs.gpus_by_type, strict=True))


def draw_mix(jobs: int, multi_gpu: bool, seed: int, tm: ThroughputModel, gpus: tuple[int, int, int] | None) -> Mix:
    """`jobs` active jobs drawn as Gavel's generator draws them (templates without a V100 rate are drawn again)."""
    rng = random.Random(seed)
    ids = list(range(jobs))
    throughputs: dict[int, dict[str, float]] = {}
    scale_factors: dict[int, int] = {}
    remaining: dict[int, int] = {}
    since: dict[int, float] = {}
    for j in ids:
        gang = scale_factor(rng) if multi_gpu else 1
        duration = duration_s(rng)
        for _ in range(10_000):
            template = rng.choice(TEMPLATES)
            model = template.family
            fits = gang == 1 or template.distributed
            if fits and rate_or_zero(tm, model, template.batch_size, gang, REFERENCE_TYPE) > 0:
                break
        else:
            sys.exit(f"{getattr(tm, 'name', tm)} has no {REFERENCE_TYPE} rate for any {gang}-GPU Gavel template")
        throughputs[j] = {t: rate_or_zero(tm, model, template.batch_size, gang, t) for t in GPU_TYPES}
        scale_factors[j] = gang
        remaining[j] = max(1, int(duration * throughputs[j][REFERENCE_TYPE] * rng.uniform(0.05, 1.0)))
        since[j] = rng.uniform(0.0, 4 * 3600.0)
    counts = gpus if gpus is not None else (jobs // 4,) * 3
    inputs = AllocationInputs(
        job_ids=ids,
        gpu_types=GPU_TYPES,
        gpus_by_type=tuple(counts),
        throughputs=throughputs,
        scale_factors=scale_factors,
        remaining_steps=remaining,
        times_since_start=since,
        weights=dict.fromkeys(ids, 1.0),
    )
    return Mix(inputs)


# --- objective values, one scorer per policy, applied to both allocations --------------------------------------


def _max_min(inputs: AllocationInputs, thr: np.ndarray, x: np.ndarray) -> float:
    prop = proportional_throughputs(inputs, thr).ravel()
    weights, sf = inputs.column(inputs.weights), inputs.column(inputs.scale_factors)
    return float(np.min(sf * np.sum(thr * x, axis=1) / (weights * prop)))


def _worst_ftf(inputs: AllocationInputs, thr: np.ndarray, x: np.ndarray) -> float:
    """Worst rho on a fresh policy (no isolated time accumulated yet)."""
    iso = np.sum(thr * isolated_allocation(inputs), axis=1)
    remaining, since = inputs.column(inputs.remaining_steps), inputs.column(inputs.times_since_start)
    with np.errstate(divide="ignore"):
        return float(np.max((since + remaining / np.sum(thr * x, axis=1)) / (remaining / iso)))


def _implied_makespan(inputs: AllocationInputs, thr: np.ndarray, x: np.ndarray) -> float:
    with np.errstate(divide="ignore"):
        return float(np.max(inputs.column(inputs.remaining_steps) / np.sum(thr * x, axis=1)))


SCORERS: dict[str, Callable[[AllocationInputs, np.ndarray], float]] = {
    "max_min_fairness_perf": lambda i, x: _max_min(i, i.throughput_matrix(), x),
    "max_min_fairness": lambda i, x: _max_min(i, np.ones(x.shape), x),
    "finish_time_fairness_perf": lambda i, x: _worst_ftf(i, i.throughput_matrix(), x),
    "min_total_duration_perf": lambda i, x: _implied_makespan(i, i.throughput_matrix(), x),
    "max_sum_throughput_perf": lambda i, x: float(np.sum(i.throughput_matrix() * x)),
}


# --- the reference, imported from a folder at run time ----------------------------------------------------------


class RefJobId:
    """Stand-in for the reference's job-id type: a single job, ordered and hashed by its integer id."""

    __slots__ = ("job",)

    def __init__(self, job: int) -> None:
        self.job = job

    def __lt__(self, other: RefJobId) -> bool:
        return self.job < other.job

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RefJobId) and self.job == other.job

    def __hash__(self) -> int:
        return self.job

    def __repr__(self) -> str:
        return str(self.job)

    def __getitem__(self, index: int) -> int | None:
        return (self.job, None)[index]

    def is_pair(self) -> bool:
        return False

    def singletons(self) -> tuple[RefJobId, ...]:
        return (self,)

    def as_tuple(self) -> tuple[int, None]:
        return (self.job, None)


def find_reference(path: Path | None) -> Path | None:
    """The reference's policies folder: DIR itself or DIR/scheduler/policies."""
    if path is None:
        return None
    for candidate in (path, path / "scheduler" / "policies"):
        if (candidate / "max_min_fairness.py").is_file() and (candidate / "policy.py").is_file():
            return candidate
    return None


def import_reference(folder: Path) -> dict[str, types.ModuleType]:
    """Import the reference's policy modules from `folder`; its `import job_id_pair` gets the stand-in."""
    if "job_id_pair" not in sys.modules:
        stand_in = types.ModuleType("job_id_pair")
        stand_in.JobIdPair = RefJobId  # type: ignore[attr-defined]
        sys.modules["job_id_pair"] = stand_in
    sys.path.insert(0, str(folder))
    names = ("max_min_fairness", "finish_time_fairness", "min_total_duration", "max_sum_throughput")
    return {name: importlib.import_module(name) for name in names}


@dataclass(frozen=True)
class ReferenceInputs:
    """The reference's arguments for one mix: dicts keyed by job id, the cluster as type -> GPUs."""

    ids: list[RefJobId]
    throughputs: dict[RefJobId, dict[str, float]]
    scale_factors: dict[RefJobId, int]
    weights: dict[RefJobId, float]
    since: dict[RefJobId, float]
    remaining: dict[RefJobId, int]
    cluster: dict[str, int]

    @classmethod
    def of(cls, mix: Mix) -> ReferenceInputs:
        inputs = mix.inputs
        ids = {j: RefJobId(j) for j in inputs.job_ids}
        return cls(
            ids=list(ids.values()),
            throughputs={ids[j]: dict(inputs.throughputs[j]) for j in inputs.job_ids},
            scale_factors={ids[j]: inputs.scale_factors[j] for j in inputs.job_ids},
            weights={ids[j]: inputs.weights[j] for j in inputs.job_ids},
            since={ids[j]: inputs.times_since_start[j] for j in inputs.job_ids},
            remaining={ids[j]: inputs.remaining_steps[j] for j in inputs.job_ids},
            cluster=mix.cluster,
        )


def reference_call(modules: dict[str, types.ModuleType], policy: str, r: ReferenceInputs) -> Callable[[], Any]:
    """A fresh reference policy object's `get_allocation`, with the arguments its scheduler passes."""
    mmf, ftf = modules["max_min_fairness"], modules["finish_time_fairness"]
    mtd, mst = modules["min_total_duration"], modules["max_sum_throughput"]
    calls: dict[str, Callable[[], Any]] = {
        "max_min_fairness_perf": lambda: mmf.MaxMinFairnessPolicyWithPerf("ECOS").get_allocation(
            r.throughputs, r.scale_factors, r.weights, r.cluster
        ),
        "max_min_fairness": lambda: mmf.MaxMinFairnessPolicy("ECOS").get_allocation(
            r.throughputs, r.scale_factors, r.weights, r.cluster
        ),
        "finish_time_fairness_perf": lambda: ftf.FinishTimeFairnessPolicyWithPerf("ECOS").get_allocation(
            r.throughputs, r.scale_factors, r.weights, r.since, r.remaining, r.cluster
        ),
        "min_total_duration_perf": lambda: mtd.MinTotalDurationPolicyWithPerf("ECOS").get_allocation(
            r.throughputs, r.scale_factors, r.remaining, r.cluster
        ),
        "max_sum_throughput_perf": lambda: mst.ThroughputSumWithPerf("ECOS").get_allocation(
            r.throughputs, r.scale_factors, r.cluster
        ),
    }
    return calls[policy]


def base(policy: str) -> str:
    """The policy's name without its option (`max_min_fairness_perf:classes` -> `max_min_fairness_perf`)."""
    return policy.partition(":")[0]


def ours_call(policy: str, inputs: AllocationInputs) -> Callable[[], Any]:
    """A fresh allocator of the registry's policy `policy`, allocating once; `NAME:OPTION` sets the allocator's
    boolean OPTION (e.g. `classes`)."""
    name, _, option = policy.partition(":")
    allocator_type = type(POLICIES[name].build().allocator)  # type: ignore[attr-defined]
    options = {option: True} if option else {}
    return lambda: allocator_type(**options).allocate(inputs)


# --- timing ------------------------------------------------------------------------------------------------------


@dataclass
class SolveLog:
    """cvxpy's timers, summed over the problems one allocation call solves."""

    solves: int = 0
    compile_s: float = 0.0
    solver_s: float = 0.0


@contextlib.contextmanager
def solve_log() -> Iterator[SolveLog]:
    """Record every `cp.Problem.solve` inside the block, and every program ours hands ECOS directly (no compile)."""
    log = SolveLog()
    original, direct = cp.Problem.solve, cone.ConeProgram.solve

    def timed_direct(program: cone.ConeProgram) -> np.ndarray:
        started = time.perf_counter()
        try:
            return direct(program)
        finally:
            log.solves += 1
            log.solver_s += time.perf_counter() - started

    def recording(problem: cp.Problem, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(problem, *args, **kwargs)
        finally:
            log.solves += 1
            log.compile_s += problem.compilation_time or 0.0
            log.solver_s += getattr(problem, "_solve_time", None) or 0.0

    cp.Problem.solve = recording  # type: ignore[method-assign]
    cone.ConeProgram.solve = timed_direct  # type: ignore[method-assign]
    try:
        yield log
    finally:
        cp.Problem.solve = original  # type: ignore[method-assign]
        cone.ConeProgram.solve = direct  # type: ignore[method-assign]


@dataclass
class Timings:
    wall: list[float] = field(default_factory=list)
    compile_s: list[float] = field(default_factory=list)
    solver_s: list[float] = field(default_factory=list)
    solves: int = 0
    result: Any = None


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def timed(call: Callable[[], Any], into: Timings) -> None:
    """One call, quiet (the reference prints warnings on stdout), collected before so no old garbage is swept in it."""
    gc.collect()
    with solve_log() as log, contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = time.perf_counter()
        into.result = call()
        into.wall.append(time.perf_counter() - started)
    into.compile_s.append(log.compile_s)
    into.solver_s.append(log.solver_s)
    into.solves = log.solves


def as_matrix(allocation: dict[Any, dict[str, float]], ids: list[Any]) -> np.ndarray:
    return np.array([[float(allocation[j][t]) for t in GPU_TYPES] for j in ids])


def repeats_for(jobs: int, repeats: int) -> int:
    return repeats if jobs < LARGE else max(1, (repeats + 1) // 2)


# --- the run -----------------------------------------------------------------------------------------------------


def _seconds(value: float) -> str:
    return "" if np.isnan(value) else f"{value:.3f}"


def measure(
    mix: Mix, policy: str, repeats: int, modules: dict[str, types.ModuleType] | None
) -> tuple[list[str], float, float]:
    """One table row: ours and the reference, interleaved in alternating order; returns the row and both medians."""
    ours, ref = Timings(), Timings()
    calls: list[tuple[Callable[[], Any], Timings]] = [(ours_call(policy, mix.inputs), ours)]
    ref_inputs = None
    if modules is not None:
        ref_inputs = ReferenceInputs.of(mix)
        calls.append((reference_call(modules, base(policy), ref_inputs), ref))
    for r in range(repeats):
        for call, into in calls if r % 2 == 0 else calls[::-1]:
            timed(call, into)
    inputs = mix.inputs
    score = SCORERS[base(policy)]
    x_ours = as_matrix(ours.result, inputs.job_ids)
    value = score(inputs, x_ours)
    ours_wall, ref_wall = median(ours.wall), median(ref.wall)
    cells = [
        _seconds(ours_wall),
        _seconds(ref_wall),
        f"{ours_wall / ref_wall:.2f}" if ref_inputs else "",
        _seconds(median(ours.compile_s)),
        _seconds(median(ours.solver_s)),
        _seconds(median(ref.compile_s)),
        _seconds(median(ref.solver_s)),
        str(ours.solves) if not ref_inputs or ours.solves == ref.solves else f"{ours.solves}|{ref.solves}",
        f"{value:.6g}",
    ]
    if ref_inputs is not None:
        x_ref = as_matrix(ref.result, ref_inputs.ids)
        ref_value = score(inputs, x_ref)
        rel = abs(value - ref_value) / max(abs(value), abs(ref_value), 1e-300)
        cells += [f"{rel:.1e}", "yes" if rel <= SAME else "NO", f"{np.max(np.abs(x_ours - x_ref)):.1e}"]
    else:
        cells += ["", "", ""]
    return cells, ours_wall, ref_wall


def parse_cluster(text: str | None) -> tuple[int, int, int] | None:
    """`V:P:K` (v100:p100:k80, as Gavel's -c) -> GPU counts in our column order (k80, p100, v100)."""
    if text is None:
        return None
    try:
        v100, p100, k80 = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--cluster must be V:P:K GPU counts, got {text!r}") from None
    if min(v100, p100, k80) < 0 or v100 + p100 + k80 == 0:
        raise argparse.ArgumentTypeError(f"--cluster needs counts >= 0 and some GPUs, got {text!r}")
    return (k80, p100, v100)


def _arguments() -> tuple[argparse.Namespace, list[str], list[int], list[str]]:
    """The command line, with its policies, sizes and mixes split and checked before anything is measured."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-policies", type=Path, help="the reference's scheduler/policies folder")
    parser.add_argument("--policies", default=",".join(POLICY_NAMES), help="comma-separated policy names")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated numbers of active jobs")
    parser.add_argument("--mixes", default="single,multi", help="single (1-GPU jobs) and/or multi (Gavel's gangs)")
    parser.add_argument("--repeats", type=int, default=5, help=f"timed calls each (about half from {LARGE} jobs)")
    parser.add_argument("--cluster", type=parse_cluster, help="fixed V:P:K GPUs (default: jobs // 4 of each type)")
    parser.add_argument("--throughputs", type=Path, default=THROUGHPUTS, help="Gavel-format throughput table")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in policies if base(p) not in SCORERS]
    if unknown:
        sys.exit(f"unknown policy {', '.join(unknown)}; this benchmark knows {', '.join(SCORERS)}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    mixes = [m for m in args.mixes.split(",") if m]
    if not set(mixes) <= {"single", "multi"} or args.repeats < 1 or min(sizes, default=0) < 4:
        sys.exit("--mixes takes single,multi; --repeats must be >= 1; --sizes must be >= 4 jobs")
    return args, policies, sizes, mixes


def _throughputs(path: Path, console: Console) -> tuple[ThroughputModel, str]:
    """Gavel's table when it is there, else the built-in model (said on the console); and which it is."""
    if path.is_file():
        return load_throughputs(path), str(path)
    tm = load_throughputs(None)
    console.print(f"note: {path} not found; throughputs from the built-in model")
    return tm, "the built-in model"


def _reference(path: Path | None, console: Console) -> dict[str, types.ModuleType] | None:
    """The reference's policy modules, or None (said on the console) when `path` holds none: ours alone are timed."""
    folder = find_reference(path)
    if folder is None:
        where = f" ({path} has no policy.py/max_min_fairness.py)" if path else ""
        console.print(f"note: no reference policies{where}; only our times are shown (see --help to extract them)")
        return None
    modules = import_reference(folder)
    console.print(f"reference policies imported from {folder}")
    return modules


def main() -> None:
    """A table per job mix: per policy and size, our time and the reference's on the same inputs."""
    args, policies, sizes, mixes = _arguments()
    console = Console(width=170)
    tm, source = _throughputs(args.throughputs, console)
    modules = _reference(args.reference_policies, console)

    warmup = draw_mix(min(sizes), True, args.seed, tm, args.cluster)
    for policy in policies:  # first calls pay imports and cvxpy's caches; keep them out of the table
        measure(warmup, policy, 1, modules)

    headline: list[str] = []
    for kind in mixes:
        table = Table(
            title=f"allocation time per call, {kind}-GPU jobs, median of {args.repeats} "
            f"({repeats_for(max(sizes), args.repeats)} from {LARGE} jobs); throughputs: {source}"
        )
        table.add_column("policy", no_wrap=True)
        for column in COLUMNS:
            table.add_column(column, justify="right")
        for policy in policies:
            for jobs in sizes:
                mix = draw_mix(jobs, kind == "multi", args.seed + jobs, tm, args.cluster)
                cells, ours_s, ref_s = measure(mix, policy, repeats_for(jobs, args.repeats), modules)
                c = mix.cluster
                table.add_row(policy, str(jobs), f"{c['v100']}:{c['p100']}:{c['k80']}", *cells)
                if jobs == max(sizes):
                    ref_text = f", reference {ref_s:.3f} s ({ref_s / ours_s:.1f}x)" if modules is not None else ""
                    headline.append(f"{policy}, {kind}-GPU, {jobs} jobs: ours {ours_s:.4f} s{ref_text}")
            table.add_section()
        console.print(table)
    console.print("at the largest size (issue 36's bar: 10x for max_min_fairness_perf and finish_time_fairness_perf):")
    for line in headline:
        console.print("  " + line)


if __name__ == "__main__":
    main()
