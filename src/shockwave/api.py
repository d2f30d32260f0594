"""The Python API: what the CLI's `simulate` does, for notebooks and scripts.

    import shockwave
    result = shockwave.simulate("my.trace", policy="shockwave", cluster="v100:32")
    result.makespan_s, result.avg_jct_s, result.worst_ftf     # the summary
    result.jobs[0].jct_s                                      # one row per finished job
    result.rounds[-1].busy_gpus                               # one row per round

The result is the same typed object `simulate --json` prints (`shockwave.results.model.Result`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.datasets import locate
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.results.model import Result
from shockwave.simulator.engine import Progress
from shockwave.simulator.mechanics import Mechanics, preset
from shockwave.simulator.run import simulate as simulate_files


def simulate(
    trace: str | Path,
    policy: str = "shockwave",
    cluster: str | int | ClusterSpec = 32,
    *,
    throughputs: str | Path | None = None,
    mechanics: str | Mechanics | None = None,
    round_seconds: float | None = None,
    config: ShockwaveConfig | str | Path | None = None,
    batch_sizes: str | Path | None = None,
    on_round: Callable[[Progress], None] | None = None,
    window: tuple[int, int] | None = None,
    seed: int | None = None,
    policy_params: Mapping[str, Any] | Iterable[str] = (),
    prices: str | Path | None = None,
    trace_format: str = "auto",
    profiles: str | Path | None = None,
    measurements: str | Path | None = None,
    tenants: str | Path | None = None,
) -> Result:
    """Simulate `policy` (a name, an alias, or `file.py:Class`) on `trace`.

    `cluster` is a `--cluster` string (`"v100:32,k80:16"`), a GPU count of the default type, or a ClusterSpec;
    `mechanics` a preset name or a Mechanics object (default: `corrected`, `sia` for Sia's workloads),
    `round_seconds` overriding its round length; `config` holds
    Shockwave's hyperparameters (an object or a JSON file); `trace`, `throughputs` and `config` may name bundled
    datasets (`shockwave.datasets`: "canonical-120", "tacc", "tacc-32gpus", ...); `batch_sizes` replays a real
    run's batch-size schedules;
    `window` (A, B) measures jobs A..B-1 and ends the run when they are done; `seed` seeds the policies' random draws
    (default: the seed a generated trace was drawn with, else 0);
    `policy_params` are the policy's own parameters (e.g. `{"entities": "teams.toml"}`, or `KEY=VALUE` texts as
    `--policy-param` writes them), each one it must declare;
    `prices` a file of dollars per GPU-hour by type that the result's cost is counted in (default: Gavel's GCP prices)
    and that the cost-aware policies weigh throughput by; `trace_format="sia"` reads `trace` as Sia's workload CSV,
    rigid jobs whose rates come from `profiles`, the folder of Sia's per-application profiles; `measurements` (a
    real run's measurements.json, with its `batch_sizes`) replays its jobs and rounds as measured; `tenants` (a
    tenants file) shares the cluster between tenants first (the result's `tenants` says what each received).
    Bad input raises `shockwave.core.errors.InputError`.
    """
    spec = cluster if isinstance(cluster, ClusterSpec) else _cluster(cluster)
    mech = mechanics if isinstance(mechanics, Mechanics) else preset(mechanics, trace_format)
    if round_seconds is not None:
        mech = mech.with_round_seconds(round_seconds)
    summary, _ = simulate_files(
        locate(trace, "trace"),
        policy,
        spec,
        mech,
        None if throughputs is None else locate(throughputs, "throughputs"),
        locate(config, "config") if isinstance(config, str | Path) else config,
        on_round,
        None if batch_sizes is None else Path(batch_sizes),
        window,
        seed,
        policy_params,
        None if prices is None else Path(prices),
        trace_format=trace_format,
        profiles=None if profiles is None else Path(profiles),
        measurements=None if measurements is None else Path(measurements),
        tenants=None if tenants is None else Path(tenants),
    )
    return Result.model_validate(summary)


def _cluster(cluster: str | int) -> ClusterSpec:
    return ClusterSpec.of(cluster) if isinstance(cluster, int) else ClusterSpec.parse(cluster)
