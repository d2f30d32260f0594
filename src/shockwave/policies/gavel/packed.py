"""The rows of a space-sharing program (spec §3.1): x has one row per combination -- each job alone (ascending id),
then each pair (ascending) -- and a column per GPU type. A pair holds one gang (its jobs' common size); each job's
time over the combinations it is in is at most 1, and its effective rate sums its own element of every pair it runs
in.

Built in the reference's shape (a job's rows: alone, then its pairs in order; rates rounded to float32 and divided
by the job's weight) so that ECOS sees the reference's data: which of the tied optima it returns decides the rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from shockwave.policies.gavel.lp import Program
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Entry, PairRates
from shockwave.policies.solvers.modelling import cp


@dataclass(frozen=True)
class Combinations:
    entries: list[Entry]
    gangs: np.ndarray
    """Combinations x types: the gang each row holds."""
    index: list[int]
    """Each job's rows (alone, then its pairs), job after job."""
    rates: np.ndarray
    """len(index) x types: the job's rate (over its weight) in each of its rows."""
    counts: list[int]
    """How many rows each job has."""

    @classmethod
    def of(cls, inputs: AllocationInputs, *, weighted: bool = True) -> Combinations:
        """The rows of `inputs`; rates over the jobs' weights unless `weighted` is off (OSSP's packed program)."""
        jobs, pairs, types = inputs.job_ids, list(inputs.pairs), inputs.gpu_types
        rows: dict[int, list[int]] = {j: [i] for i, j in enumerate(jobs)}
        for k, pair in enumerate(pairs):
            for job in pair:
                rows[job].append(len(jobs) + k)
        index, rates = [], []
        for j in jobs:
            for row in rows[j]:
                index.append(row)
                if row < len(jobs):
                    rate = [inputs.throughputs[j][t] for t in types]
                else:
                    pair = pairs[row - len(jobs)]
                    rate = [inputs.pairs[pair][t][pair.index(j)] for t in types]
                weight = np.float32(inputs.weights[j] if weighted else 1.0)
                rates.append(np.array(rate, dtype=np.float32) / weight)
        gangs = [inputs.scale_factors[j] for j in jobs] + [inputs.scale_factors[a] for a, _ in pairs]
        return cls(
            entries=[*jobs, *pairs],
            gangs=np.array([[float(g)] * len(types) for g in gangs]),
            index=index,
            rates=np.array(rates, dtype=np.float32).reshape((len(index), len(types))),
            counts=[len(rows[j]) for j in jobs],
        )

    def per_job(self, terms: cp.Expression) -> cp.Expression:
        """Each job's sum of `terms` (len(index) x types) over its rows and the types."""
        n = len(self.counts)
        if len(set(self.counts)) == 1:  # the reference's reshape, right when every job has as many rows
            return cp.sum(cp.reshape(terms, (n, len(self.index) * terms.shape[1] // n), order="C"), axis=1)
        owner = np.repeat(np.arange(n), self.counts)
        summing = sp.csr_matrix((np.ones(len(self.index)), (owner, np.arange(len(self.index)))), shape=(n, len(owner)))
        return cp.sum(summing @ terms, axis=1)

    def constraints(self, x: cp.Variable, inputs: AllocationInputs) -> list[cp.Constraint]:
        return [
            x >= 0,
            cp.sum(cp.multiply(self.gangs, x), axis=0) <= np.array(inputs.gpus_by_type),
            self.per_job(x[self.index]) <= 1,
        ]

    def allocation(self, inputs: AllocationInputs, x: np.ndarray) -> Allocation:
        x = x.clip(min=0.0).clip(max=1.0)
        return {e: {t: float(x[i][k]) for k, t in enumerate(inputs.gpu_types)} for i, e in enumerate(self.entries)}


def packed_program(inputs: AllocationInputs, *, weighted: bool = True) -> Program:
    rows = Combinations.of(inputs, weighted=weighted)
    x = cp.Variable(rows.gangs.shape)
    starts = np.cumsum([0, *rows.counts])

    def rates(which: np.ndarray | None) -> cp.Expression:
        every = rows.per_job(cp.multiply(rows.rates, x[rows.index]))
        return every if which is None else every[which]

    def rate_of(i: int) -> cp.Expression:
        own = slice(starts[i], starts[i + 1])
        return cp.sum(cp.multiply(rows.rates[own], x[rows.index[own]]))

    return Program(x, rates, rate_of, rows.constraints(x, inputs), lambda value: rows.allocation(inputs, value))


@dataclass(frozen=True)
class Classes:
    """Jobs grouped into classes of interchangeable jobs (same kind, gang, weight and rates), for a program whose
    size does not grow with the number of jobs: by symmetry some optimal allocation treats a class's jobs alike,
    and spreads a class's time shared with another class evenly over that class's jobs."""

    members: list[list[int]]
    """Each class's jobs, classes in order of their first job."""
    of_job: dict[int, int]
    """Job -> its class."""
    pairs: dict[tuple[int, int], PairRates]
    """(class, other class) -> the rates of a pair of their jobs (the first class's job first), for the classes
    whose jobs pair (a class with itself when it has two jobs or more)."""

    @classmethod
    def of(cls, inputs: AllocationInputs) -> Classes:
        label: dict[Any, int] = {}
        members: list[list[int]] = []
        of_job: dict[int, int] = {}
        for j in inputs.job_ids:
            key = (
                inputs.kinds.get(j, j),
                inputs.scale_factors[j],
                inputs.weights[j],
                tuple(inputs.throughputs[j][t] for t in inputs.gpu_types),
            )
            k = label.setdefault(key, len(members))
            if k == len(members):
                members.append([])
            members[k].append(j)
            of_job[j] = k
        pairs: dict[tuple[int, int], PairRates] = {}
        for (a, b), rates in inputs.pairs.items():
            link = (of_job[a], of_job[b])
            known = pairs.get(link)
            if known is None:
                pairs[link] = rates
                flipped = {t: (r[1], r[0]) for t, r in rates.items()}
                if pairs.setdefault(link[::-1], flipped) == flipped:
                    continue
            elif known is rates or known == rates:
                continue
            # a table whose pairs depend on which job came first: no two jobs are interchangeable
            alone = {j: i for i, j in enumerate(inputs.job_ids)}
            return cls([[j] for j in inputs.job_ids], alone, _by_position(inputs, alone))
        return cls(members, of_job, pairs)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(jobs) for jobs in self.members], dtype=float)

    def spread(
        self, inputs: AllocationInputs, alone: np.ndarray, paired: dict[tuple[int, int], np.ndarray]
    ) -> Allocation:
        """The per-job allocation: each job its class's time alone; each pair its classes' shared time divided by
        the number of partners each job shares it with."""
        x = alone.clip(min=0.0).clip(max=1.0)
        allocation: Allocation = {}
        for k, jobs in enumerate(self.members):
            row = {t: float(x[k][i]) for i, t in enumerate(inputs.gpu_types)}
            for j in jobs:
                allocation[j] = row
        rows: dict[tuple[int, int], dict[str, float]] = {}
        for a, b in inputs.pairs:
            link = (self.of_job[a], self.of_job[b])
            if link not in rows:
                partners = len(self.members[link[1]]) - (link[0] == link[1])
                shared = paired[link].clip(min=0.0).clip(max=partners) / partners
                rows[link] = {t: float(shared[i]) for i, t in enumerate(inputs.gpu_types)}
            allocation[(a, b)] = rows[link]
        return allocation


def _by_position(inputs: AllocationInputs, position: dict[int, int]) -> dict[tuple[int, int], PairRates]:
    pairs: dict[tuple[int, int], PairRates] = {}
    for (a, b), rates in inputs.pairs.items():
        pairs[(position[a], position[b])] = rates
        pairs[(position[b], position[a])] = {t: (r[1], r[0]) for t, r in rates.items()}
    return pairs


def sharing_gains(inputs: AllocationInputs, pair: tuple[int, int], gpu_type: str) -> tuple[float, float]:
    """Each job's rate sharing the type's GPUs over its rate alone there (0 where either is 0): how much of its own
    speed sharing leaves it, the measure Gandiva and packed FIFO pair jobs by."""
    shared = inputs.pairs[pair][gpu_type]
    alone = [inputs.throughputs[job][gpu_type] for job in pair]
    first, second = (r / a if r > 0 and a > 0 else 0.0 for r, a in zip(shared, alone, strict=True))
    return first, second
