"""One simulation from files and names to the result object `simulate --json` prints."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.loop import timeline
from shockwave.policies.registry import policy_info
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.results.provenance import provenance
from shockwave.simulator.engine import Progress, SimulationResult, Simulator
from shockwave.simulator.mechanics import Mechanics
from shockwave.workload_model.prices import Prices, read_prices
from shockwave.workload_model.profile import load_workload
from shockwave.workload_model.summary import makespan_lower_bound
from shockwave.workload_model.throughput import TableWithFallback, require_gpu_types
from shockwave.workload_model.trace import require_gangs_fit


def simulate(
    trace: Path,
    policy: str,
    cluster: ClusterSpec,
    mechanics: Mechanics,
    throughputs: Path | None = None,
    config: ShockwaveConfig | None = None,
    on_round: Callable[[Progress], None] | None = None,
    batch_sizes: Path | None = None,
    window: tuple[int, int] | None = None,
    seed: int = 0,
    policy_params: Mapping[str, Any] | None = None,
    prices: Path | None = None,
) -> tuple[dict[str, Any], SimulationResult]:
    """Simulate `policy`; `config` holds Shockwave's hyperparameters (default: the tacc_32gpus values).

    With `batch_sizes` (the per-epoch batch sizes a real run observed, `shockwave run`'s DIR/batch_sizes.json)
    jobs replay those schedules instead of following the catalog's adaptation rules. With `window` (A, B) the run
    ends once jobs A..B-1 are done and the metrics cover those jobs only (the reference Gavel's measurement window);
    `seed` seeds the policies' random streams that take one; `policy_params` are parameters the user gives the
    policy (each one it must declare; they win over what the simulator offers). `prices` (a prices file, default
    Gavel's GCP prices) is what the result's cost is counted in, and is offered to the cost-aware policies as their
    `prices` parameter; a policy given `prices` as a parameter alone counts the result in those. The result is checked
    (`shockwave.results.model.Result`) by whoever writes it: the Python API, a sweep or comparison cell.
    """
    info = policy_info(policy)
    tm, jobs, profiles = load_workload(trace, throughputs, batch_sizes)
    require_gpu_types(tm, cluster.types)
    require_gangs_fit(jobs, cluster.largest_pool, trace)
    mechanics.require_rounds(makespan_lower_bound(jobs, profiles, cluster.gpus))
    measured = None
    if window is not None:
        start, stop = window
        if not 0 <= start < stop <= len(jobs):
            raise InputError(f"--window {start}:{stop} must be job ids within the trace's 0:{len(jobs)}", path=trace)
        measured = range(start, stop)
    priced = _prices(prices, policy_params, cluster)
    chosen = info.offered(
        policy_params,
        min_realloc_interval_s=mechanics.min_realloc_interval_s,
        config=config,
        seed=seed,
        reference_quirks=mechanics.reference_policy_quirks,
        prices=prices,
    )
    engine = Simulator(
        jobs,
        profiles,
        tm,
        cluster,
        chosen,
        mechanics,
        on_round,
        replay=batch_sizes is not None,
        window=measured,
        prices=priced,
    )
    result = engine.run()
    header = {
        "policy": info.label,
        "trace": str(trace),
        "gpus": cluster.gpus,
        "cluster": cluster.describe(),
        "mechanics": mechanics.name,
        "round_seconds": mechanics.round_seconds,
        "throughputs": tm.name,
    }
    if policy_params:
        header["policy_params"] = {
            k: v if isinstance(v, int | float | bool) else str(v) for k, v in policy_params.items()
        }
    summary = {**header, **result.summary, "timeline": timeline(result.rounds), "provenance": provenance(mechanics)}
    if isinstance(tm, TableWithFallback) and tm.estimated:
        summary["estimated_throughputs"] = tm.estimated_records()
    return summary, result


def _prices(path: Path | None, policy_params: Mapping[str, Any] | None, cluster: ClusterSpec) -> Prices | None:
    """The prices the result is counted in: `--prices`, else the policy's `prices` parameter, else None (the
    defaults); a file must price every type of the cluster, and the two may not disagree."""
    given = (policy_params or {}).get("prices")
    if path is not None and given is not None and Path(given).resolve() != Path(path).resolve():
        raise InputError(f"--prices {path} and --policy-param prices={given} disagree: give one of them", path=path)
    source = path if path is not None else given
    if source is None:
        return None
    chosen = read_prices(source)
    chosen.require(cluster.types)
    return chosen
