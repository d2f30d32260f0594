"""Entities for multi-level fairness: who owns each job, how much of the cluster each owner is worth, and how an
owner's share is split among its jobs (Gavel §4.2's hierarchical policies).

A side file beside the trace, JSON or TOML (told apart by the suffix `.toml`), with three keys:

    {
      "entities": {                                   required: name -> weight, or name -> {weight, policy}
        "research": 1,
        "product":  {"weight": 2, "policy": "fifo"}
      },
      "jobs": {"0": "research", "1-5": "product"},    job id (or inclusive range "A-B") -> entity
      "default": "research"                           optional: the entity of every job `jobs` does not list
    }

    [entities]                                        # the same in TOML
    research = 1
    product = { weight = 2, policy = "fifo" }
    [jobs]
    0 = "research"
    "1-5" = "product"

An entity's weight is a positive number; its policy splits its share among its active jobs: "fairness" (the
default) in proportion to the jobs' priority weights (the trace's column), "fifo" to its earliest job first, the next
one getting what the earlier ones cannot use. Job ids are the trace's (line order, from 0). Every error names the file
and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.io.jsonfile import object_with_keys, read_json_or_toml
from shockwave.io.text import ENTITIES_LIMIT

ENTITY_POLICIES = ("fairness", "fifo")
"""How an entity splits its share among its jobs."""
TOP_KEYS = ("entities", "jobs", "default")
ENTITY_KEYS = ("weight", "policy")
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")
MAX_RANGE = 10_000_000
"""The most job ids one range may name (a typo's 0-10^12 would otherwise fill memory)."""


@dataclass(frozen=True)
class Entity:
    name: str
    weight: float
    policy: str = "fairness"


@dataclass(frozen=True)
class Entities:
    """Entities by name (in the file's order) and the entity of each listed job."""

    entities: dict[str, Entity]
    jobs: dict[int, str]
    default: str | None = None
    path: Path | None = None
    """The file it was read from, for error messages."""

    def entity_of(self, job_id: int) -> Entity:
        """The job's entity; an InputError naming the file when it has none."""
        name = self.jobs.get(job_id, self.default)
        if name is None:
            raise InputError(
                f"job {job_id} belongs to no entity: list it under 'jobs' or set 'default'",
                path=self.path,
                field="jobs",
            )
        return self.entities[name]

    @classmethod
    def from_mapping(cls, raw: Any, path: Path | None = None) -> Entities:
        """Entities from a parsed file (a dict), every problem an InputError naming `path` and the field."""
        shape, missing = "an object with 'entities' and 'jobs'", "no 'entities': name each entity and its weight"
        raw = object_with_keys(raw, TOP_KEYS, "entities", shape, missing, path)
        entities = _entities(raw["entities"], path)
        default = raw.get("default")
        if default is not None and (not isinstance(default, str) or default not in entities):
            raise InputError(f"{default!r} is not an entity this file defines", path=path, field="default")
        return cls(entities, _jobs(raw.get("jobs", {}), entities, path), default, path)


def read_entities(path: str | Path) -> Entities:
    """The entities file at `path` (JSON, or TOML when it ends in .toml)."""
    return Entities.from_mapping(read_json_or_toml(path, "entities", ENTITIES_LIMIT), Path(path))


def _entities(raw: Any, path: Path | None) -> dict[str, Entity]:
    if not isinstance(raw, dict) or not raw:
        raise InputError("expected an object: entity name -> weight (or {weight, policy})", path=path, field="entities")
    out: dict[str, Entity] = {}
    for name, spec in raw.items():
        where = f"entities.{name}"
        policy = "fairness"
        if isinstance(spec, dict):
            unknown = [k for k in spec if k not in ENTITY_KEYS]
            if unknown:
                raise InputError(
                    f"unknown key(s) {unknown}; known: {list(ENTITY_KEYS)}", path=path, field=f"{where}.{unknown[0]}"
                )
            if "weight" not in spec:
                raise InputError("no weight", path=path, field=f"{where}.weight")
            weight, policy = spec["weight"], spec.get("policy", "fairness")
            where += ".weight"
        else:
            weight = spec
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise InputError(f"a weight is a positive number, not {weight!r}", path=path, field=where)
        if not (math.isfinite(weight) and weight > 0):
            raise InputError(f"a weight must be a positive number, got {weight!r}", path=path, field=where)
        if policy not in ENTITY_POLICIES:
            raise InputError(
                f"unknown policy {policy!r}; choose one of {', '.join(ENTITY_POLICIES)}",
                path=path,
                field=f"entities.{name}.policy",
            )
        out[str(name)] = Entity(str(name), float(weight), policy)
    return out


def _jobs(raw: Any, entities: dict[str, Entity], path: Path | None) -> dict[int, str]:
    if not isinstance(raw, dict):
        raise InputError('expected an object: job id (or range "A-B") -> entity name', path=path, field="jobs")
    return owners(raw.items(), entities, "an entity", path)


def owners(items: Iterable[tuple[Any, Any]], known: Collection[str], what: str, path: Path | None) -> dict[int, str]:
    """Job id -> owner from a file's `jobs` table (a key is a job id or a range "A-B"; an owner one of `known`,
    `what` it is called in messages); a job listed twice is refused."""
    out: dict[int, str] = {}
    for key, name in items:
        where = f"jobs.{key}"
        ids = job_ids(str(key), path, where)
        if not isinstance(name, str) or name not in known:
            raise InputError(f"{name!r} is not {what} this file defines ({', '.join(known)})", path=path, field=where)
        for job_id in ids:
            if job_id in out:
                raise InputError(f"job {job_id} is listed twice", path=path, field=where)
            out[job_id] = name
    return out


def job_ids(key: str, path: Path | None, where: str) -> range:
    """The job ids a key names: one id, or an inclusive range "A-B"."""
    text = key.strip()
    if text.isdigit():
        return range(int(text), int(text) + 1)
    match = _RANGE.match(text)
    if match is None:
        raise InputError(
            f'{key!r} is not a job id (a whole number from 0) or a range "A-B" of them', path=path, field=where
        )
    first, last = int(match[1]), int(match[2])
    if last < first or last - first >= MAX_RANGE:
        raise InputError(f"range {key!r} must run upwards, over at most {MAX_RANGE} jobs", path=path, field=where)
    return range(first, last + 1)
