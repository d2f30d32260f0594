"""What every driver needs before its first round, assembled once: the policy resolved (a name, an alias, a file's
class or an installed entry point) with the user's parameters, the cluster, the throughput model for that cluster,
Shockwave's hyperparameters, the prices results are counted in, and the entities jobs belong to.

    inputs = assemble("max_min_fairness_water_filling", cluster, policy_params=["entities=teams.toml"])
    policy = inputs.build(min_realloc_interval_s=240.0)

Each input is read and checked here, before any work, and each refusal names the file and the field. A driver adds
only what is its own to offer (the simulator's reallocation interval and reference quirks, a seed) in `build`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.loop import require_plannable
from shockwave.core.policy import Policy
from shockwave.policies.registry import PolicyInfo, parse_policy_params, policy_info
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.tenants.sharing import TenantSharing
from shockwave.workload_model.entities import Entities, read_entities
from shockwave.workload_model.prices import Prices, read_prices
from shockwave.workload_model.tenants import Tenants, read_tenants
from shockwave.workload_model.throughput import ThroughputModel, load_throughputs, require_gpu_types


@dataclass(frozen=True)
class RunInputs:
    """A run's policy and inputs, read and checked; `build` makes the policy (a fresh one per call)."""

    policy: PolicyInfo
    cluster: ClusterSpec
    throughputs: ThroughputModel
    params: Mapping[str, Any] = field(default_factory=dict)
    """The user's own parameters of the policy (`--policy-param`), as given: files by their names."""
    config: ShockwaveConfig | None = None
    prices: Prices | None = None
    """What results are counted in (None: Gavel's GCP prices)."""
    prices_file: Path | None = None
    """`--prices`: offered to the cost-aware policies as their `prices`."""
    entities: Entities | None = None
    """The entities a multi-level policy shares the cluster between (`entities=FILE`), read once."""
    tenants: Callable[[], Tenants] | None = None
    """The tenants the cluster is shared between first (`--tenants FILE`), as of each round: a service reloads the
    file while it serves."""

    def build(
        self,
        min_realloc_interval_s: float,
        *,
        seed: int = 0,
        reference_quirks: bool = False,
        round_robin: str = "gavel",
    ) -> Policy:
        """A fresh policy with the user's parameters and whatever else it declares of these inputs and the driver's
        offer; refused here (before any work) when it cannot plan the cluster's GPU types."""
        given = {**self.params, **({"entities": self.entities} if self.entities is not None else {})}
        policy = self.policy.offered(
            given,
            min_realloc_interval_s=min_realloc_interval_s,
            config=self.config,
            seed=seed,
            reference_quirks=reference_quirks,
            round_robin=round_robin,
            prices=self.prices_file,
        )
        require_plannable(policy, self.cluster)
        return policy if self.tenants is None else TenantSharing(policy, self.tenants)

    def described_params(self) -> dict[str, Any]:
        """The user's parameters as a result records them (numbers and booleans as they are, the rest as text)."""
        return {k: v if isinstance(v, int | float | bool) else str(v) for k, v in self.params.items()}


def assemble(
    policy: str | PolicyInfo,
    cluster: ClusterSpec,
    *,
    policy_params: Mapping[str, Any] | Iterable[str] = (),
    throughputs: Path | ThroughputModel | None = None,
    config: ShockwaveConfig | Path | None = None,
    prices: Path | None = None,
    tenants: TenantSource = None,
) -> RunInputs:
    """The run's inputs: `policy_params` as a mapping (the Python API) or as `KEY=VALUE` texts (`--policy-param`);
    `throughputs` a table's file, a model, or None for the built-in model; `config` an object or a JSON file;
    `tenants` a tenants file, its contents, or what gives them as of each round (checked against the cluster)."""
    info = policy if isinstance(policy, PolicyInfo) else policy_info(policy)
    params = dict(policy_params) if isinstance(policy_params, Mapping) else parse_policy_params(info, policy_params)
    if config is not None and not info.takes_config:
        raise InputError(
            f"--config sets Shockwave's hyperparameters; policy {info.label!r} has none",
            path=config if isinstance(config, Path) else None,
        )
    tm = load_throughputs(throughputs) if throughputs is None or isinstance(throughputs, Path) else throughputs
    require_gpu_types(tm, cluster.types)
    entities = params.get("entities")
    return RunInputs(
        policy=info,
        cluster=cluster,
        throughputs=tm,
        params=params,
        config=ShockwaveConfig.from_json(config) if isinstance(config, Path) else config,
        prices=_prices(prices, params.get("prices"), cluster),
        prices_file=prices,
        entities=read_entities(entities) if isinstance(entities, str | Path) else entities,
        tenants=_tenants(tenants, cluster),
    )


TenantSource = Tenants | Callable[[], Tenants] | Path | None


def _tenants(given: TenantSource, cluster: ClusterSpec) -> Callable[[], Tenants] | None:
    """What gives the tenants as of each round, once checked against the cluster (None: no tenants)."""
    if given is None:
        return None
    if isinstance(given, Path):
        given = read_tenants(given)
    if isinstance(given, Tenants):
        fixed = given
        given = lambda: fixed  # noqa: E731 - the same tenants every round
    given().require_cluster(cluster)
    return given


def _prices(path: Path | None, given: Any, cluster: ClusterSpec) -> Prices | None:
    """The prices the result is counted in: `--prices`, else the policy's `prices` parameter, else None (the
    defaults); a file must price every type of the cluster, and the two may not disagree."""
    if path is not None and given is not None and Path(given).resolve() != Path(path).resolve():
        raise InputError(f"--prices {path} and --policy-param prices={given} disagree: give one of them", path=path)
    source = path if path is not None else given
    if source is None:
        return None
    chosen = read_prices(source)
    chosen.require(cluster.types)
    return chosen
