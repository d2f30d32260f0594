"""Sia's allocation ILP, in HiGHS (Sia, SOSP'23, §4.3; the artifact solves it with CBC).

One binary x[j, c] per job and configuration it may take. With the job's normalised goodput G in c and
A = min(round(G^p, 2), CLIP), p < 0 minimises sum A x + lambda_n (jobs - sum x): an allocated job costs G^p <= 1 and
one left out costs lambda_n > 1, so every job that fits is allocated, and those whose goodput grows most with more
GPUs get them (p > 0 maximises the same sum). At most one configuration per job; per GPU type at most its GPUs.
A job still restoring a checkpoint keeps its configuration.

Elastic Shockwave sizes its jobs with it on one GPU type (`shockwave/sizing.py`: the market decides who runs, this
ILP how many GPUs each gets): there a job's terms are weighted (`Option.weight`, 1 for Sia), and a `required` job
gets one of its configurations.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass

import highspy
import numpy as np
from scipy.sparse import csc_matrix

from shockwave.policies.sia.configs import Config
from shockwave.policies.solvers.highs import SolverFailure, quiet_solver

CLIP = 3000.0
"""Largest cost a configuration gets (the artifact's; a ZERO-valued one's G^-0.5 is 100, far above lambda_n)."""
FLOOR = 1e-4
"""Least goodput a configuration is taken to have (a restart discount of 0 would make G^p infinite)."""
GAP = 1e-4
"""Relative optimality gap the artifact asks of its MIP solver."""
P = -0.5
LAMBDA_N = 1.1
"""The artifact's p and lambda_n."""


@dataclass(frozen=True)
class Option:
    job: Hashable
    config: Config
    goodput: float
    weight: float = 1.0
    """How much the job's term counts (Sia: 1 for every job)."""


def choose(
    options: Sequence[Option],
    capacities: Mapping[str, int],
    *,
    p: float,
    lambda_n: float,
    pinned: Mapping[Hashable, Config] | None = None,
    required: Collection[Hashable] = (),
) -> dict[Hashable, Config]:
    """Each allocated job's configuration."""
    pinned = pinned or {}
    # math.pow, not numpy's vectorised power: its kernel (and last bit) depends on the CPU, and this decides plans.
    cost = np.array([o.weight * (min(round(math.pow(max(o.goodput, FLOOR), p), 2), CLIP) - lambda_n) for o in options])
    keep = [
        i
        for i, o in enumerate(options)
        if (cost[i] < 0 if p < 0 else cost[i] > 0) or pinned.get(o.job) == o.config or o.job in required
    ]
    if not keep:
        return {}
    kept = [options[i] for i in keep]
    jobs = {job: row for row, job in enumerate(dict.fromkeys(o.job for o in kept))}
    types = {t: len(jobs) + k for k, t in enumerate(capacities)}
    rows = [jobs[o.job] for o in kept] + [types[o.config.gpu_type] for o in kept]
    values = [1.0] * len(kept) + [float(o.config.gpus) for o in kept]
    cols = list(range(len(kept))) * 2
    matrix = csc_matrix((values, (rows, cols)), shape=(len(jobs) + len(types), len(kept)))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(kept), len(jobs) + len(types)
    lp.col_cost_ = cost[keep]
    lp.col_lower_ = np.array([1.0 if pinned.get(o.job) == o.config else 0.0 for o in kept])
    lp.col_upper_ = np.ones(len(kept))
    lp.row_lower_ = np.array(
        [1.0 if job in required else -highspy.kHighsInf for job in jobs] + [-highspy.kHighsInf] * len(types)
    )
    lp.row_upper_ = np.array([1.0] * len(jobs) + [float(capacities[t]) for t in types])
    lp.sense_ = highspy.ObjSense.kMinimize if p < 0 else highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = lp.num_col_, lp.num_row_
    lp.integrality_ = [highspy.HighsVarType.kInteger] * len(kept)
    solver = quiet_solver(mip_rel_gap=GAP)
    solver.passModel(lp)
    solver.run()
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise SolverFailure(f"Sia's allocation ILP ended {solver.modelStatusToString(solver.getModelStatus())}")
    chosen = np.asarray(solver.getSolution().col_value) > 0.5
    return {o.job: o.config for o, on in zip(kept, chosen, strict=True) if on}
