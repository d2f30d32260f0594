"""Tenants: the teams that share one cluster, each with a weight, an optional cap and optional guarantees per GPU
type (a TOML file, `serve --tenants FILE` and `simulate --tenants FILE`).

    [tenants.alice]
    weight = 2                        # its share against the others' (default 1)
    max_gpus = 8                      # at most this many GPUs at once, of all types together (default: no cap)
    guarantee = { v100 = 2 }          # at least this many of a type each round while its jobs can use them

    [tenants.bob]
    weight = 1
    max_gpus = 1

    [jobs]                            # simulation: which trace jobs belong to whom (job id or range "A-B")
    "0-39" = "alice"
    default = "bob"                   # optional: every job `[jobs]` does not name
    assign = "round_robin"            # optional, instead: job i belongs to the i-th tenant of the file, cyclically

A name is letters, digits, '.', '_' and '-' (it names the tenant's token file); two names may not differ in case
alone. A guarantee is whole GPUs of a type the cluster has, at most the tenant's cap, and the guarantees of a type
together fit its pool; a cap is at least the largest gang a tenant's job asks for (`require_fits`). Every refusal
names the file, the tenant and the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.io.jsonfile import object_with_keys, read_toml
from shockwave.io.text import ENTITIES_LIMIT
from shockwave.workload_model.entities import owners
from shockwave.workload_model.job import Job

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
TOP_KEYS = ("tenants", "jobs")
TENANT_KEYS = ("weight", "max_gpus", "guarantee")
RULES = ("round_robin",)
MAX_WEIGHT = 1e6


@dataclass(frozen=True)
class Tenant:
    name: str
    weight: float = 1.0
    max_gpus: int | None = None
    """GPUs it may hold at once, all types together (None: no cap)."""
    guarantees: Mapping[str, int] = field(default_factory=dict)
    """GPU type -> GPUs of it the tenant gets each round while its jobs can use them."""


@dataclass(frozen=True)
class Tenants:
    """The tenants by name (in the file's order) and, for a trace, whose each job is."""

    tenants: dict[str, Tenant]
    jobs: dict[int, str] = field(default_factory=dict)
    default: str | None = None
    rule: str | None = None
    path: Path | None = None

    def names(self) -> list[str]:
        return list(self.tenants)

    def tenant_of(self, job_id: int) -> str:
        """A trace job's tenant: listed, else by the rule, else the default; an error naming the file if none."""
        if job_id in self.jobs:
            return self.jobs[job_id]
        if self.rule == "round_robin":
            return self.names()[job_id % len(self.tenants)]
        if self.default is None:
            raise InputError(
                f"job {job_id} belongs to no tenant: list it under [jobs], or set jobs.default or jobs.assign",
                path=self.path,
                field="jobs",
            )
        return self.default

    def assigned(self, jobs: Sequence[Job]) -> list[Job]:
        """A trace's jobs, each with its tenant; refused where a tenant's cap is below its job's gang."""
        out = [replace(job, tenant=self.tenant_of(i)) for i, job in enumerate(jobs)]
        for i, job in enumerate(out):
            self.require_fits(job.tenant, job.scale_factor, where=f"job {i}")
        return out

    def require_fits(self, name: str | None, gpus: int, where: str = "the job") -> None:
        """A job of `gpus` GPUs may run for tenant `name`: the tenant exists and its cap holds the gang."""
        tenant = self.tenants.get(name or "")
        if tenant is None:
            raise InputError(
                f"{where} belongs to {name!r}, not a tenant of {self.path or 'this service'} "
                f"({', '.join(self.tenants)})",
                path=self.path,
                field="tenant",
            )
        if tenant.max_gpus is not None and gpus > tenant.max_gpus:
            raise InputError(
                f"{where} asks for {gpus} GPUs, more than tenant {name}'s max_gpus = {tenant.max_gpus}: it could "
                "never run",
                path=self.path,
                field=f"tenants.{name}.max_gpus",
            )

    def require_cluster(self, cluster: ClusterSpec) -> None:
        """Guarantees name the cluster's types and fit their pools together."""
        for tenant in self.tenants.values():
            for gpu_type in tenant.guarantees:
                if gpu_type not in cluster.types:
                    raise InputError(
                        f"the cluster has no {gpu_type} GPUs; its types: {', '.join(cluster.types)}",
                        path=self.path,
                        field=f"tenants.{tenant.name}.guarantee.{gpu_type}",
                    )
        for gpu_type in cluster.types:
            promised = sum(t.guarantees.get(gpu_type, 0) for t in self.tenants.values())
            if promised > cluster.pool(gpu_type).gpus:
                raise InputError(
                    f"the tenants are guaranteed {promised} {gpu_type} GPUs together; the cluster has "
                    f"{cluster.pool(gpu_type).gpus}",
                    path=self.path,
                    field="guarantee",
                )

    @classmethod
    def from_mapping(cls, raw: Any, path: Path | None = None) -> Tenants:
        shape = "tables [tenants.NAME] (weight, max_gpus, guarantee) and [jobs]"
        missing = "no tenants: give each a table [tenants.NAME] with its weight"
        raw = object_with_keys(raw, TOP_KEYS, "tenants", shape, missing, path)
        tenants = _tenants(raw["tenants"], path)
        jobs, default, rule = _jobs(raw.get("jobs", {}), tenants, path)
        return cls(tenants, jobs, default, rule, path)


def read_tenants(path: str | Path) -> Tenants:
    """The tenants file at `path` (TOML)."""
    return Tenants.from_mapping(read_toml(path, "tenants", ENTITIES_LIMIT), Path(path))


def _tenants(raw: Any, path: Path | None) -> dict[str, Tenant]:
    if not isinstance(raw, dict) or not raw:
        raise InputError("no tenants: give each a table [tenants.NAME] with its weight", path=path, field="tenants")
    out: dict[str, Tenant] = {}
    folded: dict[str, str] = {}
    for name, spec in raw.items():
        where = f"tenants.{name}"
        if not NAME.match(name):
            raise InputError(
                "a tenant's name is letters, digits, '.', '_' and '-' (at most 64, the first a letter or digit)",
                path=path,
                field=where,
            )
        if name.lower() in folded:
            raise InputError(f"{name!r} and {folded[name.lower()]!r} differ in case alone", path=path, field=where)
        folded[name.lower()] = name
        if not isinstance(spec, dict):
            raise InputError("expected a table: weight, max_gpus, guarantee", path=path, field=where)
        unknown = [k for k in spec if k not in TENANT_KEYS]
        if unknown:
            raise InputError(
                f"unknown key(s) {unknown}; known: {list(TENANT_KEYS)}", path=path, field=f"{where}.{unknown[0]}"
            )
        weight = spec.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= MAX_WEIGHT:
            raise InputError(
                f"a weight is a number > 0 and <= {MAX_WEIGHT:g}, got {weight!r}", path=path, field=f"{where}.weight"
            )
        cap = spec.get("max_gpus")
        if cap is not None:
            cap = _whole(cap, path, f"{where}.max_gpus", minimum=1)
        guarantees = _guarantees(spec.get("guarantee", {}), path, f"{where}.guarantee")
        if cap is not None and sum(guarantees.values()) > cap:
            raise InputError(
                f"guarantees of {sum(guarantees.values())} GPUs exceed max_gpus = {cap}",
                path=path,
                field=f"{where}.guarantee",
            )
        out[name] = Tenant(name, float(weight), cap, guarantees)
    return out


def _guarantees(raw: Any, path: Path | None, where: str) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise InputError("expected a table: GPU type -> GPUs, e.g. { v100 = 2 }", path=path, field=where)
    return {str(t).lower(): _whole(n, path, f"{where}.{t}", minimum=0) for t, n in raw.items()}


def _whole(value: Any, path: Path | None, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= 1_000_000:
        raise InputError(f"expected a whole number of GPUs >= {minimum}, got {value!r}", path=path, field=where)
    return value


def _jobs(raw: Any, tenants: dict[str, Tenant], path: Path | None) -> tuple[dict[int, str], str | None, str | None]:
    if not isinstance(raw, dict):
        raise InputError('expected a table: job id (or range "A-B") -> tenant', path=path, field="jobs")
    known = ", ".join(tenants)
    default, rule = raw.get("default"), raw.get("assign")
    if default is not None and default not in tenants:
        raise InputError(f"{default!r} is not a tenant this file defines ({known})", path=path, field="jobs.default")
    if rule is not None and rule not in RULES:
        raise InputError(f"unknown rule {rule!r}; choose {', '.join(RULES)}", path=path, field="jobs.assign")
    listed = ((key, name) for key, name in raw.items() if key not in ("default", "assign"))
    out = owners(listed, tenants, "a tenant", path)
    return out, default, rule
