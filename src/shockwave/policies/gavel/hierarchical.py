"""Multi-level fairness (Gavel §4.2): entities share the cluster by weight, and each entity splits its share among
its jobs by its own policy. It is water-filling (`water_filling.py`) with weights that change as jobs freeze:

- "fairness": the entity's weight W_e is split among its jobs still rising, in proportion to their priority weights
  (a job that can use no more hands its part to its siblings);
- "fifo": the entity's earliest job still rising (by arrival, then id) gets all of W_e, the others none; when it can
  use no more the next one takes over.

Either way the weights of an entity's rising jobs sum to W_e, so each water-filling iteration raises every entity's
total normalised throughput by W_e times the same amount: entities with demand left end with totals in proportion to
their weights, and an entity whose jobs can use no more keeps what they use, the rest going to the others.

Entities come from a side file (`shockwave.workload_model.entities`), read when the policy is built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from shockwave.policies.gavel.lp import proportional_throughputs
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs
from shockwave.workload_model.entities import Entities, read_entities

WeightRule = Callable[[np.ndarray], np.ndarray]
"""frozen (bool per job row) -> this iteration's weight per job row (>= 0; 0: not raised this iteration)."""


class EntityWeights:
    """Water-filling's weight rule: the jobs' priority weights, or with `entities` their entity's weight split by
    the entity's policy."""

    def __init__(self, entities: Entities | None = None) -> None:
        self.entities = entities

    @classmethod
    def of(cls, entities: Entities | str | Path | None) -> EntityWeights:
        if entities is None or isinstance(entities, Entities):
            return cls(entities)
        return cls(read_entities(entities))

    def rule(self, inputs: AllocationInputs) -> WeightRule:
        priority = inputs.column(inputs.weights)
        if self.entities is None:
            return lambda frozen: priority
        groups = self.groups(inputs)
        entities = self.entities.entities

        def weights(frozen: np.ndarray) -> np.ndarray:
            out = np.zeros(len(priority))
            for name, rows in groups.items():
                rising = rows[~frozen[rows]]
                if not len(rising):
                    continue
                entity = entities[name]
                if entity.policy == "fifo":
                    out[rising[0]] = entity.weight
                else:
                    out[rising] = entity.weight * priority[rising] / priority[rising].sum()
            return out

        return weights

    def groups(self, inputs: AllocationInputs) -> dict[str, np.ndarray]:
        """Each entity's job rows (entities with active jobs only), earliest arrival first (then by id)."""
        assert self.entities is not None
        rows: dict[str, list[int]] = {}
        for row, job_id in enumerate(inputs.job_ids):
            rows.setdefault(self.entities.entity_of(job_id).name, []).append(row)
        since = inputs.column(inputs.times_since_start)
        return {
            name: np.array(sorted(members, key=lambda r: (-since[r], inputs.job_ids[r])), dtype=int)
            for name, members in rows.items()
        }


def normalised_throughputs(
    inputs: AllocationInputs, allocation: Allocation | Mapping[int, Mapping[str, float]]
) -> dict[int, float]:
    """u_j = sf_j sum_t thr_jt x_jt / prop_j per job: its effective throughput in GPUs' worth of an even share of
    the cluster (a job holding one GPU of a one-type cluster all the time has u = 1)."""
    m = len(inputs.job_ids)
    throughputs = inputs.throughput_matrix()
    prop = proportional_throughputs(inputs, throughputs).reshape(m)
    out = {}
    for row, job_id in enumerate(inputs.job_ids):
        shares = allocation.get(job_id, {})
        effective = sum(throughputs[row][k] * shares.get(t, 0.0) for k, t in enumerate(inputs.gpu_types))
        out[job_id] = inputs.scale_factors[job_id] * effective / prop[row] if prop[row] > 0 else 0.0
    return out


def entity_totals(values: Mapping[int, float], entities: Entities) -> dict[str, float]:
    """Each entity's sum of `values` (job -> value), over entities with jobs in it."""
    totals: dict[str, float] = {}
    for job_id, value in values.items():
        name = entities.entity_of(job_id).name
        totals[name] = totals.get(name, 0.0) + value
    return totals


def entity_shares(throughputs: Mapping[int, float], entities: Entities) -> dict[str, float]:
    """Each entity's fraction of the total of `throughputs` (job -> normalised throughput), over entities with
    jobs in it."""
    totals = entity_totals(throughputs, entities)
    whole = sum(totals.values())
    return {name: (u / whole if whole > 0 else 0.0) for name, u in totals.items()}
