"""Every policy by name, with the parameters it takes: the built-in ones (the reference's names, plus short aliases),
installed packages' (entry point group `shockwave.policies`) and classes in files (`path/to/file.py:ClassName`).

    make_policy("max_min_fairness", min_realloc_interval_s=240.0)    # parameters checked against its declaration
    make_policy("my_policy.py:ShortestFirst")
    make_policy_offering(name, min_realloc_interval_s=..., config=...)  # a driver: each policy takes what it declares

A built-in policy declares its parameters here; a plug-in's are its `__init__`'s keyword parameters (with their
annotations and defaults). Unknown parameters, values of the wrong type, and plug-ins that cannot be loaded or built
are InputErrors naming the policy (and the file and class) and the parameter.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.core.policy import Policy
from shockwave.policies import plugins
from shockwave.policies.gavel.allox import AlloX
from shockwave.policies.gavel.cost import (
    MaxSumThroughputNormalizedByCost,
    MaxSumThroughputNormalizedByCostPackedSLOs,
    MaxSumThroughputNormalizedByCostSLOs,
)
from shockwave.policies.gavel.fifo import FifoPolicy
from shockwave.policies.gavel.finish_time_fairness import (
    FinishTimeFairness,
    FinishTimeFairnessPacked,
    FinishTimeFairnessPerf,
)
from shockwave.policies.gavel.gandiva import Gandiva
from shockwave.policies.gavel.gandiva_fair import GandivaFair
from shockwave.policies.gavel.isolated import Isolated, Proportional
from shockwave.policies.gavel.max_min_fairness import MaxMinFairness, MaxMinFairnessPacked, MaxMinFairnessPerf
from shockwave.policies.gavel.max_sum_throughput import MaxSumThroughput
from shockwave.policies.gavel.mechanism import GavelPolicy
from shockwave.policies.gavel.min_total_duration import (
    MinTotalDuration,
    MinTotalDurationPacked,
    MinTotalDurationPerf,
)
from shockwave.policies.gavel.strategy_proof import MaxMinFairnessStrategyProof, MaxMinFairnessStrategyProofPerf
from shockwave.policies.gavel.water_filling import MaxMinFairnessWaterFilling, MaxMinFairnessWaterFillingPerf
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.policy import ShockwavePolicy
from shockwave.policies.themis.policy import DEFAULT_FAIRNESS_KNOB, DEFAULT_LEASE_S, ThemisPolicy
from shockwave.workload_model.entities import Entities


@dataclass(frozen=True)
class Param:
    """One parameter a policy declares."""

    name: str
    types: tuple[type, ...] | None
    """Accepted types (an int is accepted for a float); None: any value."""
    default: Any
    help: str
    required: bool = False

    def check(self, value: Any, where: str, path: Path | None = None) -> Any:
        """`value` (an int made a float where a float is declared), or an InputError naming the parameter."""
        kinds = self.types
        if kinds is None or object in kinds:
            return value
        if isinstance(value, bool):
            ok = bool in kinds
        elif isinstance(value, int) and float in kinds and int not in kinds:
            return float(value)
        else:
            ok = isinstance(value, kinds)
        if not ok:
            wanted = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
            raise InputError(
                f"{where}: parameter {self.name!r} must be {wanted}, not {type(value).__name__} {value!r}", path=path
            )
        return value


@dataclass(frozen=True)
class PolicyInfo:
    """A policy as the registry knows it: how to build it and what it takes."""

    name: str
    """Canonical: a built-in's or an entry point's name, or `/absolute/path/file.py:ClassName`."""
    build: Callable[..., Policy]
    params: tuple[Param, ...]
    help: str = ""
    label: str = ""
    """What results call it (default: `name`)."""
    origin: str = ""
    """How error messages name it (default: policy 'name')."""
    path: Path | None = None
    """A file plug-in's file."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", self.label or self.name)
        object.__setattr__(self, "origin", self.origin or f"policy {self.name!r}")

    @property
    def builtin(self) -> bool:
        return POLICIES.get(self.name) is self

    @property
    def takes_config(self) -> bool:
        """Does it take Shockwave's hyperparameters (`config`)?"""
        return any(p.name == CONFIG.name for p in self.params)

    def offered(self, given: Mapping[str, Any] | None = None, /, **available: Any) -> Policy:
        """A fresh policy built with those of `available` it declares (None: not given): what a driver calls,
        offering everything it knows (the simulator its realloc interval, which Gavel-style policies alone take).
        `given` are parameters the user set (`--policy-param`): each must be declared, and they win."""
        declared = {p.name for p in self.params}
        return self.make({**{k: v for k, v in available.items() if k in declared and v is not None}, **(given or {})})

    def make(self, params: Mapping[str, Any]) -> Policy:
        """A fresh policy with `params` (checked against the declaration)."""
        declared = {p.name: p for p in self.params}
        for name in params:
            if name not in declared:
                takes = f"its parameters: {', '.join(declared)}" if declared else "it takes none"
                raise InputError(f"{self.origin} has no parameter {name!r} ({takes})", path=self.path)
        values = {name: declared[name].check(value, self.origin, self.path) for name, value in params.items()}
        for param in self.params:
            if param.required and param.name not in values:
                raise InputError(f"{self.origin}: parameter {param.name!r} has no default and was not given")
        try:
            return self.build(**values)
        except InputError:
            raise
        except Exception as exc:
            if self.builtin:
                raise
            line = plugins.line_in(exc, self.path) if self.path else None
            raise InputError(
                f"{self.origin}: building it failed: {plugins.describe(exc)}", path=self.path, line=line
            ) from None


INTERVAL = Param(
    "min_realloc_interval_s",
    (float,),
    1000.0,
    "recompute the allocation on arrivals, completions and batch-size changes, at most once per this many seconds",
)
CONFIG = Param(
    "config",
    (ShockwaveConfig, str, Path, type(None)),
    None,
    "Shockwave's hyperparameters: a ShockwaveConfig or a JSON file (default: the tacc_32gpus values)",
)


def _shockwave(config: ShockwaveConfig | str | Path | None = None) -> Policy:
    return ShockwavePolicy(ShockwaveConfig.from_json(config) if isinstance(config, str | Path) else config)


SEED = Param(
    "seed",
    (int,),
    0,
    "seeds the reference's random streams: the per-round shuffle of GPU types (seed + 5) and FIFO's type draws",
)


QUIRKS = Param(
    "reference_quirks",
    (bool,),
    False,
    "behave as the reference Gavel's code does where it departs from its description (--mechanics gavel)",
)


def _gavel(name: str, allocator: Callable[[], Any], help: str) -> PolicyInfo:
    def build(min_realloc_interval_s: float = INTERVAL.default, seed: int = SEED.default) -> Policy:
        return GavelPolicy(allocator(), min_realloc_interval_s=min_realloc_interval_s, seed=seed)

    return PolicyInfo(name, build, (INTERVAL, SEED), help)


def _gavel_seeded(name: str, allocator: Callable[[int], Any], help: str) -> PolicyInfo:
    """A Gavel-style policy whose allocator draws from its own random stream, seeded with the seed."""

    def build(min_realloc_interval_s: float = INTERVAL.default, seed: int = SEED.default) -> Policy:
        return GavelPolicy(allocator(seed), min_realloc_interval_s=min_realloc_interval_s, seed=seed)

    return PolicyInfo(name, build, (INTERVAL, SEED), help)


LEASE = Param("lease_s", (float,), DEFAULT_LEASE_S, "Themis: lease length in seconds (whole rounds, at least one)")
FAIRNESS_KNOB = Param(
    "fairness_knob",
    (float,),
    DEFAULT_FAIRNESS_KNOB,
    "Themis's f in [0, 1): the 1-f fraction of jobs furthest from finish-time fair bid in each lease's auction",
)


ENTITIES = Param(
    "entities",
    (Entities, str, Path, type(None)),
    None,
    "multi-level fairness: a JSON or TOML file of entity weights (and per-entity policy, fairness or fifo) and each "
    "job's entity; default: every job on its own, weighted by its priority",
)
PRICES = Param(
    "prices",
    (str, Path, type(None)),
    None,
    "cost-aware policies: a JSON or TOML file of dollars per GPU-hour by type (simulate --prices gives it too); "
    "default: Gavel's GCP prices (v100 0.74, p100 0.43, k80 0.135)",
)


def _gavel_with(name: str, allocator: Callable[..., Any], help: str, option: Param) -> PolicyInfo:
    """A Gavel-style policy whose allocator takes one parameter of its own, `option` (entities to share the cluster
    among, prices to weigh throughput by, or whether to behave as the reference's code), passed on by name."""

    def build(min_realloc_interval_s: float = INTERVAL.default, seed: int = SEED.default, **given: Any) -> Policy:
        chosen = allocator(**{option.name: given.get(option.name, option.default)})
        return GavelPolicy(chosen, min_realloc_interval_s=min_realloc_interval_s, seed=seed)

    return PolicyInfo(name, build, (INTERVAL, SEED, option), help)


def _fifo(perf: bool, packed: bool = False) -> Callable[..., Policy]:
    def build(
        min_realloc_interval_s: float = INTERVAL.default, seed: int = SEED.default, reference_quirks: bool = False
    ) -> Policy:
        return FifoPolicy(
            perf=perf,
            packed=packed,
            min_realloc_interval_s=min_realloc_interval_s,
            seed=seed,
            reference_quirks=reference_quirks,
        )

    return build


POLICIES: dict[str, PolicyInfo] = {
    info.name: info
    for info in (
        PolicyInfo(
            "shockwave", _shockwave, (CONFIG,), "Shockwave: a market over a window of rounds, batch sizes forecast"
        ),
        _gavel("max_min_fairness", MaxMinFairness, "Gavel's max-min fairness of GPU time (types alike)"),
        _gavel("max_min_fairness_perf", MaxMinFairnessPerf, "Gavel's max-min fairness of normalised throughput"),
        _gavel_with(
            "max_min_fairness_packed",
            MaxMinFairnessPacked,
            "max-min fairness of throughput, pairs sharing GPUs",
            QUIRKS,
        ),
        _gavel_with(
            "max_min_fairness_water_filling",
            MaxMinFairnessWaterFilling,
            "max-min fairness of GPU time, water-filled: what the worst-off cannot use goes to the others",
            ENTITIES,
        ),
        _gavel_with(
            "max_min_fairness_water_filling_perf",
            MaxMinFairnessWaterFillingPerf,
            "water-filled max-min of normalised throughput; with entities=FILE, multi-level (hierarchical) fairness",
            ENTITIES,
        ),
        _gavel(
            "max_min_fairness_strategy_proof",
            MaxMinFairnessStrategyProof,
            "strategy-proof fair shares of GPU time: Nash welfare, each job discounted by what it costs the others",
        ),
        _gavel(
            "max_min_fairness_strategy_proof_perf",
            MaxMinFairnessStrategyProofPerf,
            "strategy-proof fair shares of normalised throughput (m + 1 convex solves per allocation)",
        ),
        _gavel_with(
            "finish_time_fairness",
            FinishTimeFairness,
            "Themis as Gavel's LP: minimise the worst finish-time fairness",
            QUIRKS,
        ),
        _gavel_with(
            "finish_time_fairness_perf",
            FinishTimeFairnessPerf,
            "finish-time fairness with per-type throughputs",
            QUIRKS,
        ),
        _gavel_with(
            "finish_time_fairness_packed", FinishTimeFairnessPacked, "finish-time fairness, pairs sharing GPUs", QUIRKS
        ),
        _gavel("min_total_duration", MinTotalDuration, "OSSP: minimise the time until every job is done"),
        _gavel("min_total_duration_perf", MinTotalDurationPerf, "OSSP with per-type throughputs"),
        _gavel("min_total_duration_packed", MinTotalDurationPacked, "OSSP with pairs of jobs sharing GPUs"),
        _gavel("max_sum_throughput_perf", MaxSumThroughput, "maximise the sum of throughputs over all types"),
        _gavel_with(
            "max_sum_throughput_normalized_by_cost_perf",
            MaxSumThroughputNormalizedByCost,
            "maximise the sum of throughputs per dollar (prices=FILE, or simulate --prices)",
            PRICES,
        ),
        _gavel_with(
            "max_sum_throughput_normalized_by_cost_perf_SLOs",
            MaxSumThroughputNormalizedByCostSLOs,
            "throughput per dollar, keeping jobs with SLOs on course for their deadlines while feasible",
            PRICES,
        ),
        _gavel_with(
            "max_sum_throughput_normalized_by_cost_packed_SLOs",
            MaxSumThroughputNormalizedByCostPackedSLOs,
            "throughput per dollar with SLOs, pairs of jobs sharing GPUs",
            PRICES,
        ),
        _gavel("allox", AlloX, "AlloX: min-cost assignment of jobs to GPUs"),
        _gavel("gandiva_fair", GandivaFair, "Gandiva-Fair: lottery scheduling with GPU trading"),
        _gavel_seeded("gandiva", Gandiva, "Gandiva: random pairs of jobs share GPUs when demand exceeds the cluster"),
        _gavel("isolated", Isolated, "every job an equal 1/m share of every type (Themis's baseline)"),
        _gavel("proportional", Proportional, "every job a share of every type in proportion to its size"),
        PolicyInfo(
            "themis",
            ThemisPolicy,
            (LEASE, FAIRNESS_KNOB),
            "Themis: leases of GPUs auctioned (partial allocation) among the jobs furthest from finish-time fair",
        ),
        PolicyInfo("fifo", _fifo(False), (INTERVAL, SEED, QUIRKS), "first come, first served, strictly in order"),
        PolicyInfo("fifo_perf", _fifo(True), (INTERVAL, SEED), "first come, first served, each on its fastest type"),
        PolicyInfo(
            "fifo_packed", _fifo(True, packed=True), (INTERVAL, SEED), "fifo_perf, then queued jobs share good pairs"
        ),
    )
}
"""The built-in policies; plug-ins are found when named (`policy_info`)."""

ALIASES = {
    "gavel": "max_min_fairness",
    "ossp": "min_total_duration",
    "mst": "max_sum_throughput_perf",
    "max_sum_throughput": "max_sum_throughput_perf",
}


def known_policies() -> list[str]:
    """Built-in policies, then installed packages' (entry points) that do not reuse a built-in name."""
    taken = {*POLICIES, *ALIASES}
    return [*POLICIES, *(name for name in plugins.entry_points() if name not in taken)]


def policy_info(name: str, *, base: Path | None = None) -> PolicyInfo:
    """The policy `name` means: a built-in name or alias, a file's class (`file.py:Class`, relative to `base`, default
    the working folder), or an installed package's entry point; InputError when it is none of them or cannot load."""
    name = ALIASES.get(name, name)
    if name in POLICIES:
        return POLICIES[name]
    if plugins.is_file_spec(name):
        spec = plugins.parse_file_spec(name, base)
        cls = plugins.load_file_class(spec)
        origin = f"policy class {spec.class_name!r}"
        label = plugins.class_label(cls, origin, spec.path)
        if label in POLICIES or label in ALIASES:
            raise InputError(
                f"{origin} is named {label!r}, as a built-in policy is: set its `name` to another", path=spec.path
            )
        return _plugin_info(str(spec), cls, label, origin, spec.path)
    point = plugins.entry_points().get(name)
    if point is not None:
        cls = plugins.load_entry_point(point)
        return _plugin_info(name, cls, name, plugins.entry_point_origin(point))
    known = ", ".join([*known_policies(), *(f"{a} (= {t})" for a, t in ALIASES.items())])
    raise InputError(
        f"unknown policy {name!r}; known policies: {known}; or a policy class in a file: path/to/file.py:ClassName"
    )


def canonical_name(name: str, *, base: Path | None = None) -> str:
    """The name every driver keeps for `name`: aliases resolved, a file's path made absolute (its class loaded and
    checked on the way)."""
    return policy_info(name, base=base).name


def canonical_names(names: Iterable[str], *, base: Path | None = None) -> list[str]:
    """Each distinct policy of `names` once, in order; InputError if two would be reported under one name."""
    infos = list({info.name: info for info in (policy_info(n, base=base) for n in names)}.values())
    labels: dict[str, PolicyInfo] = {}
    for info in infos:
        other = labels.setdefault(info.label, info)
        if other is not info:
            raise InputError(
                f"policies {other.name!r} and {info.name!r} are both called {info.label!r} in results: "
                "give one of them another `name`"
            )
    return [info.name for info in infos]


def policy_label(name: str) -> str:
    """What results call the policy: its name, or for a file's class its `name` attribute, else the class name."""
    return policy_info(name).label


def policy_params(name: str) -> dict[str, Param]:
    """The parameters the policy declares, by name."""
    return {p.name: p for p in policy_info(name).params}


def takes_config(name: str) -> bool:
    """Does the policy take Shockwave's hyperparameters (`config`)?"""
    return policy_info(name).takes_config


def make_policy(name: str, /, **params: Any) -> Policy:
    """A fresh policy `name` built with `params`, each of which it must declare."""
    return policy_info(name).make(params)


def make_policy_offering(name: str, /, **available: Any) -> Policy:
    """`PolicyInfo.offered` by name."""
    return policy_info(name).offered(**available)


def parse_policy_params(policy: str | PolicyInfo, texts: Iterable[str]) -> dict[str, Any]:
    """`KEY=VALUE` texts (the CLI's `--policy-param`) as values of the parameters `policy` declares: each value
    read as its parameter's type (a number, true/false, none, or text such as a file name)."""
    info = policy if isinstance(policy, PolicyInfo) else policy_info(policy)
    declared = {p.name: p for p in info.params}
    values: dict[str, Any] = {}
    for text in texts:
        key, sep, value = (part.strip() for part in text.partition("="))
        if not sep or not key:
            raise InputError(f"--policy-param {text!r}: expected KEY=VALUE")
        if key not in declared:
            takes = f"its parameters: {', '.join(declared)}" if declared else "it takes none"
            raise InputError(f"--policy-param {key}: {info.origin} has no parameter {key!r} ({takes})", path=info.path)
        if key in values:
            raise InputError(f"--policy-param {key} is given twice")
        values[key] = _read_value(value, declared[key], f"--policy-param {key}")
    return values


_TRUE, _FALSE, _NONE = ("true", "yes", "1"), ("false", "no", "0"), ("none", "null")


def _read_value(text: str, param: Param, where: str) -> Any:
    """`text` as the first of the parameter's types it reads as (any type: a number, a boolean, else the text)."""
    kinds = param.types or (int, float, bool, str)
    lowered = text.lower()
    if type(None) in kinds and lowered in _NONE:
        return None
    for kind in kinds:
        if kind is bool and lowered in (*_TRUE, *_FALSE):
            return lowered in _TRUE
        if kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                continue
        if kind in (str, Path, object):
            return text if kind is object else kind(text)
    wanted = " or ".join("none" if k is type(None) else k.__name__ for k in kinds)
    raise InputError(f"{where}: expected {wanted}, got {text!r}")


def _plugin_info(name: str, cls: type, label: str, origin: str, path: Path | None = None) -> PolicyInfo:
    """A plug-in's entry: a policy class is built with its own parameters; an allocator runs on Gavel's mechanism
    (`GavelPolicy`), which adds the reallocation interval and the seed to the allocator's own parameters."""
    if not plugins.is_allocator_class(cls):
        return PolicyInfo(name, cls, _params_of(cls), _help_of(cls), label, origin, path)

    def build(min_realloc_interval_s: float = INTERVAL.default, seed: int = SEED.default, **own: Any) -> Policy:
        return GavelPolicy(cls(**own), min_realloc_interval_s=min_realloc_interval_s, seed=seed)

    return PolicyInfo(name, build, (*_params_of(cls), INTERVAL, SEED), _help_of(cls), label, origin, path)


def _params_of(cls: type) -> tuple[Param, ...]:
    """A plug-in's parameters: the keyword parameters of its `__init__`, typed by their annotations when those are
    plain classes (or unions of them)."""
    try:
        signature = inspect.signature(cls, eval_str=True)
    except Exception:  # an annotation that names what the module does not define at run time
        try:
            signature = inspect.signature(cls)
        except (TypeError, ValueError):
            return ()
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(
        Param(
            p.name,
            _types_of(p.annotation),
            None if p.default is p.empty else p.default,
            f"{cls.__name__}.__init__ parameter",
            required=p.default is p.empty,
        )
        for p in signature.parameters.values()
        if p.kind in keyword
    )


def _types_of(annotation: Any) -> tuple[type, ...] | None:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return None
    if annotation is None:
        return (type(None),)
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return (annotation,)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        parts = [_types_of(arg) for arg in typing.get_args(annotation)]
        return None if any(p is None for p in parts) else tuple(t for p in parts if p for t in p)
    return None


def _help_of(cls: type[Policy]) -> str:
    return inspect.cleandoc(vars(cls).get("__doc__") or "").partition("\n")[0]
