"""One simulation from files and names to the result object `simulate --json` prints."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from shockwave.assembly.inputs import RunInputs, assemble
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.loop import timeline
from shockwave.policies.registry import PolicyInfo, policy_info
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.results.provenance import provenance
from shockwave.simulator.engine import Progress, SimulationResult, Simulator
from shockwave.simulator.mechanics import Mechanics
from shockwave.workload_model.job import Job
from shockwave.workload_model.measurements import read_measurements
from shockwave.workload_model.profile import JobProfile, read_workload
from shockwave.workload_model.sia.rigid import read_sia_workload
from shockwave.workload_model.summary import makespan_lower_bound
from shockwave.workload_model.throughput import TableWithFallback, ThroughputModel
from shockwave.workload_model.trace import generator_seed, require_gangs_fit


def simulate(
    trace: Path,
    policy: str,
    cluster: ClusterSpec,
    mechanics: Mechanics,
    throughputs: Path | None = None,
    config: ShockwaveConfig | Path | None = None,
    on_round: Callable[[Progress], None] | None = None,
    batch_sizes: Path | None = None,
    window: tuple[int, int] | None = None,
    seed: int | None = None,
    policy_params: Mapping[str, Any] | Iterable[str] = (),
    prices: Path | None = None,
    *,
    trace_format: str = "auto",
    profiles: Path | None = None,
    measurements: Path | None = None,
    tenants: Path | None = None,
) -> tuple[dict[str, Any], SimulationResult]:
    """Simulate `policy`; `config` holds Shockwave's hyperparameters (default: the tacc_32gpus values).

    With `batch_sizes` (the per-epoch batch sizes a real run observed, `shockwave run`'s DIR/batch_sizes.json)
    jobs replay those schedules instead of following the catalog's adaptation rules. With `window` (A, B) the run
    ends once jobs A..B-1 are done and the metrics cover those jobs only (the reference Gavel's measurement window);
    `seed` seeds the policies' random streams that take one (None: the seed a generated trace was drawn with, as the
    reference simulators take one seed for both, else 0); `policy_params` are parameters the user gives the
    policy (each one it must declare; they win over what the simulator offers). `prices` (a prices file, default
    Gavel's GCP prices) is what the result's cost is counted in, and is offered to the cost-aware policies as their
    `prices` parameter; a policy given `prices` as a parameter alone counts the result in those. The result is checked
    (`shockwave.results.model.Result`) by whoever writes it: the Python API, a sweep or comparison cell.
    `trace_format` "sia": `trace` is Sia's workload CSV, `profiles` its profile folder (`_sia_workload`); "auto":
    the project's or Gavel's trace format, told apart by their columns. `measurements` (a real run's
    DIR/measurements.json) replays it as measured (`shockwave.workload_model.measurements`). `tenants` (a tenants
    file) shares the cluster between tenants first, each job in the tenant the file assigns it
    (`shockwave.policies.tenants`); the result's `tenants` says what each received.
    """
    if mechanics.round_grid and batch_sizes is not None:
        raise InputError(
            f"--mechanics {mechanics.name} keeps a fixed clock of whole rounds; a replay lasts its rounds as run"
        )
    if measurements is not None and batch_sizes is None:
        raise InputError("--measurements replays a real run: give its --batch-sizes too", path=measurements)
    info = policy_info(policy)
    imported = _sia_workload(trace, cluster, trace_format, profiles, throughputs, batch_sizes, info)
    inputs = assemble(
        info,
        cluster,
        policy_params=policy_params,
        throughputs=throughputs if imported is None else imported[2],
        config=config,
        prices=prices,
        tenants=tenants,
    )
    jobs, job_profiles = read_workload(trace, inputs.throughputs, batch_sizes) if imported is None else imported[:2]
    if inputs.tenants is not None:
        jobs = inputs.tenants().assigned(jobs)
    require_gangs_fit(jobs, cluster.largest_pool, trace)
    mechanics.require_rounds(makespan_lower_bound(jobs, job_profiles, cluster.gpus))
    if seed is None:
        seed = (generator_seed(trace) if imported is None else None) or 0
    chosen = inputs.build(
        mechanics.min_realloc_interval_s,
        seed=seed,
        reference_quirks=mechanics.reference_policy_quirks,
        round_robin=mechanics.gavel_round_robin,
    )
    engine = Simulator(
        jobs,
        job_profiles,
        inputs.throughputs,
        cluster,
        chosen,
        mechanics,
        on_round,
        replay=batch_sizes is not None,
        window=_measured(window, len(jobs), trace),
        prices=inputs.prices,
        measured=None if measurements is None else read_measurements(measurements, len(jobs), cluster.types),
    )
    result = engine.run()
    return _summary(inputs, trace, cluster, mechanics, seed, result), result


def _summary(
    inputs: RunInputs, trace: Path, cluster: ClusterSpec, mechanics: Mechanics, seed: int, result: SimulationResult
) -> dict[str, Any]:
    """The result `simulate --json` prints: what was simulated, the outcome, its timeline and provenance, and
    the throughputs a table lacked and that were estimated."""
    summary = {
        **_header(inputs, trace, cluster, mechanics),
        "seed": seed,
        **result.summary,
        "timeline": timeline(result.rounds),
        "provenance": provenance(mechanics),
    }
    tm = inputs.throughputs
    if isinstance(tm, TableWithFallback) and tm.estimated:
        summary["estimated_throughputs"] = tm.estimated_records()
    return summary


TRACE_FORMATS = ("auto", "sia")


def _sia_workload(
    trace: Path,
    cluster: ClusterSpec,
    trace_format: str,
    profiles: Path | None,
    throughputs: Path | ThroughputModel | None,
    batch_sizes: Path | None,
    policy: PolicyInfo,
) -> tuple[list[Job], list[JobProfile], ThroughputModel] | None:
    """Sia's workload read with its speeds (`trace_format` "sia"), else None; what goes with it checked. Its jobs
    are goodput-adaptive for a policy that adapts jobs (sia, pollux), else rigid."""
    if trace_format not in TRACE_FORMATS:
        raise InputError(f"unknown trace format {trace_format!r}; choose {' or '.join(TRACE_FORMATS)}")
    if trace_format != "sia":
        if profiles is not None:
            raise InputError("--profiles is the folder of Sia's profiles: it goes with --trace-format sia")
        return None
    if profiles is None:
        raise InputError("--trace-format sia needs --profiles DIR (the `traces/` folder of Sia's simulator)")
    if throughputs is not None or batch_sizes is not None:
        raise InputError("--trace-format sia takes its rates from --profiles: no --throughputs or --batch-sizes")
    return read_sia_workload(trace, profiles, cluster, elastic=bool(getattr(policy.build, "adapts_jobs", False)))


def _measured(window: tuple[int, int] | None, jobs: int, trace: Path) -> range | None:
    """The jobs whose completion ends the run and whose outcomes the metrics cover (None: all)."""
    if window is None:
        return None
    start, stop = window
    if not 0 <= start < stop <= jobs:
        raise InputError(f"--window {start}:{stop} must be job ids within the trace's 0:{jobs}", path=trace)
    return range(start, stop)


def _header(inputs: RunInputs, trace: Path, cluster: ClusterSpec, mechanics: Mechanics) -> dict[str, Any]:
    """What was simulated: the result's first fields."""
    return {
        "policy": inputs.policy.label,
        "trace": str(trace),
        "gpus": cluster.gpus,
        "cluster": cluster.describe(),
        "mechanics": mechanics.name,
        "round_seconds": mechanics.round_seconds,
        "throughputs": inputs.throughputs.name,
        **({"policy_params": inputs.described_params()} if inputs.params else {}),
    }
