"""Gavel max-min fairness (spec §3.3): maximise min_j sf_j sum_t thr_jt x_jt / (w_j prop_j).

prop_j is the job's throughput under an equal split of every type (spec §3.2). The heterogeneity-agnostic policy
replaces every throughput by 1, so prop_j is 1 and each job's "normalised throughput" is simply the GPU time it
gets: it equalises GPU-time shares. `max_min_fairness_perf` uses the real throughputs, so a job's share of a fast
type counts for more than the same share of a slow one. `max_min_fairness_packed` also lets pairs of jobs share a
gang: a job's throughput sums its rate alone and its own rate in each pair it runs in (`packed.Combinations`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from shockwave.policies.gavel import cone
from shockwave.policies.gavel.lp import as_allocation, proportional_throughputs, solve, solved
from shockwave.policies.gavel.mechanism import Allocation, AllocationInputs, Stateless
from shockwave.policies.gavel.packed import Classes, Combinations
from shockwave.policies.solvers.modelling import cp


def max_min_allocation(inputs: AllocationInputs, throughputs: np.ndarray, *, by_class: bool = False) -> Allocation:
    """The max-min program over every job as the reference builds it, so ECOS returns the reference's point among
    tied optima; or, `by_class`, over classes of jobs with the same coefficients and gang: each class's jobs get the
    same share (averaging any optimum over a class keeps every job's level, so the optimum is the same) from a program
    the size of the classes, but ECOS's point among tied optima is another one."""
    m = len(inputs.job_ids)
    scale = (1.0 / inputs.column(inputs.weights)).reshape((m, 1))
    scale = np.multiply(scale, 1.0 / proportional_throughputs(inputs, throughputs))
    gangs = inputs.scale_factor_matrix()
    coefficients = np.multiply(throughputs * scale, gangs)
    capacity = np.array(inputs.gpus_by_type, dtype=float)
    k = len(capacity)
    if not by_class:
        x = cone.allocation(cone.max_min_program(coefficients, gangs, capacity).solve(), (m, k))
        return as_allocation(inputs, x)
    class_of: dict[tuple[float, ...], int] = {}
    rows = map(tuple, np.hstack([coefficients, gangs]).tolist())
    job_class = [class_of.setdefault(row, len(class_of)) for row in rows]
    classes = np.array(list(class_of))
    sizes = np.bincount(job_class)
    program = cone.max_min_program(classes[:, :k], classes[:, k:] * sizes[:, None], capacity)
    x = cone.allocation(program.solve(), (len(classes), k)).clip(min=0.0).clip(max=1.0)
    shares = [dict(zip(inputs.gpu_types, row, strict=True)) for row in x.tolist()]
    return {j: shares[c].copy() for j, c in zip(inputs.job_ids, job_class, strict=True)}


class _MaxMin(Stateless):
    """A max-min policy over every job (the reference's numbers, bit for bit), or over classes of interchangeable jobs
    (`classes`: the same optimum, 10-100x cheaper at thousands of jobs, another point among tied optima)."""

    def __init__(self, *, classes: bool = False) -> None:
        self.classes = classes

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        if self.heterogeneity_aware:
            throughputs = inputs.throughput_matrix()
        else:
            throughputs = np.ones((len(inputs.job_ids), len(inputs.gpu_types)))
        return max_min_allocation(inputs, throughputs, by_class=self.classes)


class MaxMinFairness(_MaxMin):
    name = "max_min_fairness"
    heterogeneity_aware = False


class MaxMinFairnessPerf(_MaxMin):
    name = "max_min_fairness_perf"


class MaxMinFairnessPacked(Stateless):
    """By default over classes of interchangeable jobs (`packed.Classes`): the program's size does not grow with
    the number of jobs or pairs. With `reference_quirks`, over every job and pair as the reference builds it (the
    same optimum, and ECOS's own choice among tied optima, at a cost that grows with the square of the jobs)."""

    name = "max_min_fairness_packed"
    packs = True

    def __init__(self, *, reference_quirks: bool = False) -> None:
        self.reference_quirks = reference_quirks

    def allocate(self, inputs: AllocationInputs) -> Allocation:
        if not self.reference_quirks:
            return max_min_by_class(inputs)
        rows = Combinations.of(inputs)
        proportional = proportional_throughputs(inputs, inputs.throughput_matrix())
        per_row = np.repeat(proportional.ravel(), rows.counts).reshape((len(rows.index), 1))
        coefficients = sp.csc_matrix(np.multiply(rows.rates, rows.gangs[rows.index]) / per_row)
        x = cp.Variable(rows.gangs.shape)
        objective = cp.Maximize(cp.min(rows.per_job(cp.multiply(coefficients, x[rows.index]))))
        problem = cp.Problem(objective, rows.constraints(x, inputs))
        solve(problem)
        return rows.allocation(inputs, solved(x))


def max_min_by_class(inputs: AllocationInputs) -> Allocation:
    """Max-min over classes: a[k, t] is the time each job of class k runs alone on type t, p[(k, l), t] the time it
    shares with jobs of class l. Class pairs appear both ways, tied by n_k p[(k, l)] = n_l p[(l, k)]; a shared gang
    serves two jobs, so it counts half a gang per job in the capacity."""
    classes = Classes.of(inputs)
    types = inputs.gpu_types
    first = [jobs[0] for jobs in classes.members]
    n, links = classes.sizes, [(k, m) for k, m in classes.pairs if k != m or len(classes.members[k]) > 1]
    gang = np.array([float(inputs.scale_factors[j]) for j in first])
    rates = np.array([[inputs.throughputs[j][t] for t in types] for j in first])
    row = {j: i for i, j in enumerate(inputs.job_ids)}
    proportional = proportional_throughputs(inputs, inputs.throughput_matrix()).ravel()[[row[j] for j in first]]
    scale = gang / (np.array([inputs.weights[j] for j in first]) * proportional)
    a = cp.Variable((len(first), len(types)))
    gained = cp.sum(cp.multiply(rates, a), axis=1)
    budget = cp.sum(a, axis=1)
    used = (n * gang) @ a
    constraints = [a >= 0]
    if links:
        p = cp.Variable((len(links), len(types)))
        owner = sp.csr_matrix(
            (np.ones(len(links)), ([k for k, _ in links], range(len(links)))), (len(first), len(links))
        )
        shared = np.array([[classes.pairs[link][t][0] for t in types] for link in links])
        gained = gained + owner @ cp.sum(cp.multiply(shared, p), axis=1)
        budget = budget + owner @ cp.sum(p, axis=1)
        used = used + np.array([n[k] * gang[k] / 2 for k, _ in links]) @ p
        position = {link: i for i, link in enumerate(links)}
        ties = [(position[(k, m)], position[(m, k)], n[k], n[m]) for k, m in links if k < m]
        constraints.append(p >= 0)
        if ties:
            mine, theirs, n_mine, n_theirs = (np.array(c) for c in zip(*ties, strict=True))
            constraints.append(cp.multiply(n_mine[:, None], p[mine]) == cp.multiply(n_theirs[:, None], p[theirs]))
    constraints += [budget <= 1, used <= np.array(inputs.gpus_by_type, dtype=float)]
    solve(cp.Problem(cp.Maximize(cp.min(cp.multiply(scale, gained))), constraints))
    paired = dict(zip(links, solved(p), strict=True)) if links else {}
    return classes.spread(inputs, solved(a), paired)
