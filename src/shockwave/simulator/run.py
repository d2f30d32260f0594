"""One simulation from files and names to the result object `simulate --json` prints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from shockwave.cluster import ClusterSpec
from shockwave.errors import InputError
from shockwave.policies.registry import canonical_name, make_policy
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.simulator.engine import Progress, SimulationResult, Simulator
from shockwave.simulator.mechanics import Mechanics
from shockwave.workload.profile import load_workload


def simulate(
    trace: Path,
    policy: str,
    cluster: ClusterSpec,
    mechanics: Mechanics,
    throughputs: Path | None = None,
    config: ShockwaveConfig | None = None,
    on_round: Callable[[Progress], None] | None = None,
) -> tuple[dict[str, Any], SimulationResult]:
    """Simulate `policy`; `config` holds Shockwave's hyperparameters (default: the tacc_32gpus values)."""
    name = canonical_name(policy)
    tm, jobs, profiles = load_workload(trace, throughputs)
    too_big = [(i, j.scale_factor) for i, j in enumerate(jobs) if j.scale_factor > cluster.gpus]
    if too_big:
        i, sf = too_big[0]
        raise InputError(
            f"job {i} needs a gang of {sf} GPUs but the cluster has only {cluster.gpus} ({len(too_big)} such job(s))",
            path=trace,
            field="scale_factor",
        )
    chosen = make_policy(name, min_realloc_interval_s=mechanics.min_realloc_interval_s, shockwave_config=config)
    engine = Simulator(jobs, profiles, tm, cluster, chosen, mechanics, on_round)
    result = engine.run()
    header = {
        "policy": name,
        "trace": str(trace),
        "gpus": cluster.gpus,
        "mechanics": mechanics.name,
        "round_seconds": mechanics.round_seconds,
        "throughputs": tm.name,
    }
    return {**header, **result.summary}, result
