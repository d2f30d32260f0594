"""One simulation from files and names to the result object `simulate --json` prints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from shockwave.cluster import ClusterSpec
from shockwave.core.loop import timeline
from shockwave.policies.registry import policy_info
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.provenance import provenance
from shockwave.simulator.engine import Progress, SimulationResult, Simulator
from shockwave.simulator.mechanics import Mechanics
from shockwave.workload_model.profile import load_workload
from shockwave.workload_model.summary import makespan_lower_bound
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
) -> tuple[dict[str, Any], SimulationResult]:
    """Simulate `policy`; `config` holds Shockwave's hyperparameters (default: the tacc_32gpus values).

    With `batch_sizes` (the per-epoch batch sizes a real run observed, `shockwave run`'s DIR/batch_sizes.json)
    jobs replay those schedules instead of following the catalog's adaptation rules. The result is checked
    (`shockwave.results.Result`) by whoever writes it: the Python API, a sweep or comparison cell.
    """
    info = policy_info(policy)
    tm, jobs, profiles = load_workload(trace, throughputs, batch_sizes)
    require_gangs_fit(jobs, cluster.largest_pool, trace)
    mechanics.require_rounds(makespan_lower_bound(jobs, profiles, cluster.gpus))
    chosen = info.offered(min_realloc_interval_s=mechanics.min_realloc_interval_s, config=config)
    engine = Simulator(jobs, profiles, tm, cluster, chosen, mechanics, on_round, replay=batch_sizes is not None)
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
    summary = {**header, **result.summary, "timeline": timeline(result.rounds), "provenance": provenance(mechanics)}
    return summary, result
