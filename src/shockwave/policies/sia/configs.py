"""Sia's configurations and what each is worth to a job (Sia, SOSP'23, §4; the artifact's `sia.py`, aaf7a0d).

A configuration is a GPU type and a number of its GPUs: powers of two within one node, then whole nodes (2, 3, ...
up to the type's nodes). A job's goodput row holds its estimated progress per second in every configuration,
normalised so the least it gets in a configuration it can use is 1: the ILP compares jobs by how much more a
configuration gives them than their worst one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shockwave.core.cluster import ClusterSpec
from shockwave.core.state import JobState
from shockwave.workload_model.goodput import GoodputModel

ZERO = 1e-4
"""A configuration a job cannot use is worth this (so G^p stays finite and far above lambda_n)."""
MAX_GANG = 64
"""Most GPUs Sia gives one job."""


@dataclass(frozen=True)
class Config:
    gpu_type: str
    gpus: int


def configurations(cluster: ClusterSpec) -> list[Config]:
    """Per type in alphabetical order: 1, 2, 4, ... GPUs up to a node, then 2, 3, ... whole nodes.

    Types go in one order whatever order `--cluster` lists them in, so a plan does not depend on how the cluster was
    written (among equally good plans a solver takes one by column order); alphabetical is also the order of Sia's
    own cluster (aws, dgx-ext, rtx), whose solver then meets the same ties in the same order."""
    found = []
    for pool in sorted(cluster.pools, key=lambda pool: pool.gpu_type):
        per_node, nodes = pool.gpus_per_server, pool.gpus // pool.gpus_per_server
        within = [1 << k for k in range(per_node.bit_length()) if 1 << k <= per_node]
        if per_node not in within:
            within.append(per_node)
        found += [Config(pool.gpu_type, g) for g in within]
        found += [Config(pool.gpu_type, k * per_node) for k in range(2, nodes + 1)]
    return found


@dataclass(frozen=True)
class Knowledge:
    """The most GPUs of each type a job has timed steps on (types it never ran on are absent)."""

    most: dict[str, int]

    @classmethod
    def of(cls, job: JobState) -> Knowledge:
        return cls({t: max(m[1] for m in steps) for t, steps in job.measured.items() if steps})

    def replica_bound(self, job: JobState, model: GoodputModel, types: tuple[str, ...]) -> int:
        """Twice the most GPUs the job has run on (1 before it ran), within what its batch can use on some type
        and MAX_GANG: Sia lets a job grow as it learns how the job scales (the same bound on every type)."""
        seen = max(self.most.values(), default=0)
        usable = max(model.largest_gang(job.family.name, t) for t in types)
        return min(max(2 * seen, 1), MAX_GANG, usable)


def goodput_row(
    job: JobState,
    configs: list[Config],
    model: GoodputModel,
    knowledge: Knowledge,
    types: tuple[str, ...],
    *,
    project: bool = True,
) -> np.ndarray:
    """The job's normalised goodput in each configuration: `estimated_goodputs`, over the least it gets in a
    configuration it can use; a type it knows nothing of offers its one-GPU configuration, worth 1."""
    row, unknown = estimated_goodputs(job, configs, model, knowledge, types, project=project)
    row = np.maximum(row, ZERO)
    known = row[row > ZERO]
    if len(known):
        row = row / known.min()
    for i, config in enumerate(configs):
        if config.gpu_type in unknown and config.gpus == 1:
            row[i] = 1.0
    return np.maximum(row, ZERO)


def estimated_goodputs(
    job: JobState,
    configs: list[Config],
    model: GoodputModel,
    knowledge: Knowledge,
    types: tuple[str, ...],
    *,
    project: bool = True,
) -> tuple[np.ndarray, set[str]]:
    """The job's estimated progress per second in each configuration (0 beyond its replica bound, or where it
    cannot run), and the types it knows nothing of.

    On a type it has run on: the model's estimate, its batch at most the one it asked for. On another: with
    `project`, the estimate on the first type (alphabetically, as `configurations` orders them) it ran on, scaled by
    the two types' one-GPU throughputs; else (or before it ran anywhere) the type is unknown."""
    name, bound = job.family.name, knowledge.replica_bound(job, model, types)
    seen = [t for t in sorted(types) if t in knowledge.most]
    row = np.zeros(len(configs))
    unknown = set()
    for i, config in enumerate(configs):
        t = config.gpu_type
        if config.gpus > bound:
            continue
        source = t if t in knowledge.most else (seen[0] if project and seen else None)
        if source is None:
            unknown.add(t)
            continue
        value = model.goodput(
            name,
            source,
            config.gpus,
            job.spec.batch_size,
            training=job.training,
            measured=job.measured.get(source, ()),
        )
        if source != t and value > 0:
            measured_alone = model.one_gpu_throughput(name, source)
            value *= model.one_gpu_throughput(name, t) / measured_alone if measured_alone > 0 else 0.0
        row[i] = value
    return row, unknown


def rigid_options(job: JobState, types: tuple[str, ...]) -> list[tuple[Config, float]]:
    """A rigid job's options (a trace's job, at its gang and batch): its gang on each type it runs on, worth its
    rate there (the slowest type's worth its gang size, as an elastic job's worst configuration is worth 1)."""
    rates = {t: job.rate(t) for t in sorted(types) if job.rate(t) > 0}
    if not rates:
        return []
    slowest = min(rates.values())
    return [(Config(t, job.scale_factor), rate / slowest * job.scale_factor) for t, rate in rates.items()]
