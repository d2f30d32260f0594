"""Every policy by name: the built-in ones (the reference's names, plus short aliases), installed packages' (entry
point group `shockwave.policies`) and classes in files (`path/to/file.py:ClassName`).

    make_policy("max_min_fairness", min_realloc_interval_s=240.0)    # parameters checked against its constructor
    make_policy("my_policy.py:ShortestFirst")

A name maps to a class, as Ray Tune's `create_scheduler` does: a policy class, or an allocator (a program on Gavel's
round mechanism, run by `GavelPolicy`). Its parameters are its constructor's (`policies.params`), for the built-in
ones and plug-ins alike. Unknown parameters, values of the wrong type, and plug-ins that cannot be loaded or built are
InputErrors naming the policy (and the file and class) and the parameter.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.core.policy import Policy
from shockwave.policies import plugins
from shockwave.policies.builtin import BUILTIN
from shockwave.policies.gavel.mechanism import GavelPolicy
from shockwave.policies.params import Param, params_of, read_params

ALIASES = {
    "gavel": "max_min_fairness",
    "ossp": "min_total_duration",
    "mst": "max_sum_throughput_perf",
    "max_sum_throughput": "max_sum_throughput_perf",
}
MECHANISM = params_of(GavelPolicy, skip=("allocator",))
"""What Gavel's mechanism takes beside an allocator's own parameters: the reallocation interval, the seed and the
round robin."""


@dataclass(frozen=True)
class PolicyInfo:
    """A policy as the registry knows it: how to build it and what it takes."""

    name: str
    """Canonical: a built-in's or an entry point's name, or `/absolute/path/file.py:ClassName`."""
    build: Callable[..., Policy]
    params: tuple[Param, ...]
    label: str
    """What results call it."""
    origin: str
    """How error messages name it."""
    path: Path | None = None
    """A file plug-in's file."""

    @property
    def builtin(self) -> bool:
        return POLICIES.get(self.name) is self

    @property
    def takes_config(self) -> bool:
        """Does it take Shockwave's hyperparameters (`config`)?"""
        return any(p.name == "config" for p in self.params)

    def offered(self, given: Mapping[str, Any] | None = None, /, **available: Any) -> Policy:
        """A fresh policy built with those of `available` it declares (None: not given): what a driver offers.
        `given` are parameters the user set (`--policy-param`): each must be declared, and they win."""
        declared = {p.name for p in self.params}
        return self.make({**{k: v for k, v in available.items() if k in declared and v is not None}, **(given or {})})

    def make(self, params: Mapping[str, Any]) -> Policy:
        """A fresh policy with `params` (checked against the declaration)."""
        declared = {p.name: p for p in self.params}
        unknown = [name for name in params if name not in declared]
        if unknown:
            takes = f"its parameters: {', '.join(declared)}" if declared else "it takes none"
            raise InputError(f"{self.origin} has no parameter {unknown[0]!r} ({takes})", path=self.path)
        values = {name: declared[name].check(value, self.origin, self.path) for name, value in params.items()}
        missing = [p.name for p in self.params if p.required and p.name not in values]
        if missing:
            raise InputError(f"{self.origin}: parameter {missing[0]!r} has no default and was not given")
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


def _entry(name: str, cls: Callable[..., Any], label: str, origin: str, path: Path | None = None) -> PolicyInfo:
    """A name's entry: a policy class builds with its constructor's parameters; an allocator runs on Gavel's
    mechanism, which takes the interval and the seed beside the allocator's own (a seeded allocator gets the seed)."""
    if not plugins.is_allocator_class(cls):
        return PolicyInfo(name, cls, params_of(cls), label, origin, path)
    own = params_of(cls)
    seeded = any(p.name == "seed" for p in own)

    def build(
        min_realloc_interval_s: float = 1000.0, seed: int = 0, round_robin: str = "gavel", **given: Any
    ) -> Policy:
        allocator = cls(**given, **({"seed": seed} if seeded else {}))
        return GavelPolicy(allocator, min_realloc_interval_s=min_realloc_interval_s, seed=seed, round_robin=round_robin)

    return PolicyInfo(name, build, (*(p for p in own if p.name != "seed"), *MECHANISM), label, origin, path)


POLICIES = {name: _entry(name, cls, name, f"policy {name!r}") for name, cls in BUILTIN.items()}


OWN_MECHANISM = ("shockwave", "themis", "sia", "pollux")
"""The built-ins with a round mechanism of their own; every other one runs on Gavel's."""
GROUPS: dict[str, tuple[str, ...]] = {
    "published": (
        "shockwave", "max_min_fairness", "finish_time_fairness", "allox", "gandiva_fair", "max_sum_throughput_perf",
        "min_total_duration",
    ),
    "gavel-all": tuple(name for name in POLICIES if name not in OWN_MECHANISM),
    "heterogeneity-aware": (
        "shockwave", "sia", "pollux", "allox",
        *(name for name in POLICIES if "_perf" in name or "_packed" in name),
    ),
    "packed": tuple(name for name in POLICIES if "packed" in name or name == "gandiva"),
    "all": tuple(POLICIES),
}  # fmt: skip
"""Names that stand for several policies wherever a list of policies is taken. `published`: Shockwave and the
baselines its paper compares it with (its artifact's published canonical-trace set), `compare`'s default;
`gavel-all`: every policy on Gavel's mechanism (`gavel` alone stays the alias of max-min fairness)."""


def expand_groups(names: Iterable[str]) -> list[str]:
    """`names` with each group replaced by its policies, every policy once, in order."""
    expanded = (policy for name in names for policy in GROUPS.get(name, (name,)))
    return list(dict.fromkeys(expanded))


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
        return _entry(str(spec), cls, label, origin, spec.path)
    point = plugins.entry_points().get(name)
    if point is not None:
        return _entry(name, plugins.load_entry_point(point), name, plugins.entry_point_origin(point))
    names = [*known_policies(), *ALIASES]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    known = ", ".join([*known_policies(), *(f"{a} (= {t})" for a, t in ALIASES.items())])
    raise InputError(
        f"unknown policy {name!r}; {hint}known policies: {known}; or a policy class in a file: "
        "path/to/file.py:ClassName"
    )


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


def make_policy(name: str, /, **params: Any) -> Policy:
    """A fresh policy `name` built with `params`, each of which it must take."""
    return policy_info(name).make(params)


def parse_policy_params(policy: str | PolicyInfo, texts: Iterable[str]) -> dict[str, Any]:
    """`KEY=VALUE` texts (the CLI's `--policy-param`) as values of the parameters `policy` takes."""
    info = policy if isinstance(policy, PolicyInfo) else policy_info(policy)
    return read_params(texts, {p.name: p for p in info.params}, info.origin, info.path)
