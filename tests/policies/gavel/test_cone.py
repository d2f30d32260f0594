"""The programs handed to ECOS as matrices are cvxpy's, bit for bit, so the reference's tie-breaking survives."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from shockwave.policies.gavel import cone
from shockwave.policies.gavel.lp import base_constraints
from shockwave.policies.gavel.max_min_fairness import MaxMinFairnessPerf
from shockwave.policies.gavel.mechanism import AllocationInputs
from shockwave.policies.solvers.highs import SolverFailure


def _instance(seed: int) -> dict[str, np.ndarray]:
    """Jobs with gangs of 1-4, some throughputs zero, some jobs finished, on one to three types."""
    rng = np.random.default_rng(seed)
    m, k = int(rng.integers(1, 14)), int(rng.integers(1, 4))
    rates = rng.random((m, k)) * rng.integers(0, 3, (m, k))
    rates[:, 0] += 0.1
    return {
        "rates": rates,
        "gangs": np.repeat(rng.choice([1.0, 2.0, 4.0], m)[:, None], k, axis=1),
        "capacity": rng.integers(1, 20, k).astype(float),
        "since": rng.random(m) * 1000,
        "remaining": rng.random(m) * 1e5 * (rng.random(m) > 0.2),
        "t_iso": rng.random(m) * 5e4 + 1,
    }


def _inputs(capacity: np.ndarray, gangs: list[int], throughputs: np.ndarray | None = None) -> AllocationInputs:
    jobs = range(len(gangs))
    types = tuple(f"t{i}" for i in range(len(capacity)))
    rates = np.ones((len(gangs), len(types))) if throughputs is None else throughputs
    return AllocationInputs(
        job_ids=list(jobs),
        gpu_types=types,
        gpus_by_type=tuple(int(g) for g in capacity),
        throughputs={j: dict(zip(types, rates[j].tolist(), strict=True)) for j in jobs},
        scale_factors={j: gangs[j] for j in jobs},
        remaining_steps={j: 100 for j in jobs},
        times_since_start={j: 0.0 for j in jobs},
        weights={j: 1.0 for j in jobs},
    )


def _base(x: cp.Variable, case: dict[str, np.ndarray]) -> list[cp.Constraint]:
    return [
        x >= 0,
        cp.sum(cp.multiply(case["gangs"], x), axis=0) <= list(case["capacity"]),
        cp.sum(x, axis=1) <= 1,
    ]


def _max_min(x: cp.Variable, case: dict[str, np.ndarray]) -> cp.Problem:
    return cp.Problem(cp.Maximize(cp.min(cp.sum(cp.multiply(case["rates"], x), axis=1))), _base(x, case))


def _finish_time(x: cp.Variable, case: dict[str, np.ndarray]) -> cp.Problem:
    since, remaining, t_iso, rates = case["since"], case["remaining"], case["t_iso"], case["rates"]
    t, constraints, busy = cp.Variable(), _base(x, case), np.flatnonzero(remaining > 0)
    rate = cp.sum(cp.multiply(rates[busy], x[busy]), axis=1)
    constraints.append(since[busy] + cp.multiply(remaining[busy], cp.inv_pos(rate)) <= t * t_iso[busy])
    done = (remaining <= 0) & (t_iso > 0)
    if done.any():
        constraints.append(t >= np.max(since[done] / t_iso[done]))
    return cp.Problem(cp.Minimize(t), constraints)


def _finish_time_as_the_reference(x: cp.Variable, case: dict[str, np.ndarray]) -> cp.Problem:
    since, remaining, t_iso, rates = case["since"], case["remaining"], case["t_iso"], case["rates"]
    ratios = [
        (since[i] + remaining[i] * cp.inv_pos(cp.sum(cp.multiply(rates[i], x[i])))) / t_iso[i]
        for i in range(len(since))
    ]
    return cp.Problem(cp.Minimize(ratios[0] if len(ratios) == 1 else cp.maximum(*ratios)), _base(x, case))


BUILT = {
    "max_min": (_max_min, lambda c: cone.max_min_program(c["rates"], c["gangs"], c["capacity"])),
    "finish_time": (_finish_time, lambda c: cone.FinishTimes(**c).epigraph()),
    "finish_time_as_the_reference": (_finish_time_as_the_reference, lambda c: cone.FinishTimes(**c).as_the_reference()),
}


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("form", sorted(BUILT))
def test_matrices_and_point_are_cvxpys(form: str, seed: int) -> None:
    case = _instance(seed)
    if form == "finish_time" and not (case["remaining"] > 0).any():
        case["remaining"][0] = 1.0
    model, build = BUILT[form]
    x = cp.Variable(case["rates"].shape)
    problem = model(x, case)
    data, _, _ = problem.get_problem_data(solver="ECOS")
    program = build(case)
    assert np.array_equal(program.c, data["c"]) and np.array_equal(program.h, data["h"])
    assert program.G.shape == data["G"].shape
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(program.G, part), getattr(data["G"], part)), part
    assert (program.linear, list(program.cones)) == (data["dims"].nonneg, list(data["dims"].soc))
    problem.solve(solver="ECOS")
    assert np.array_equal(cone.allocation(program.solve(), x.shape), x.value)


def test_base_constraints_are_the_cluster_rows() -> None:
    """The direct rows are the scaffold every cvxpy-built Gavel program uses (lp.base_constraints)."""
    case = _instance(3)
    inputs = _inputs(case["capacity"], [int(g) for g in case["gangs"][:, 0]])
    x = cp.Variable(case["rates"].shape)
    ours = cp.Problem(cp.Maximize(cp.min(cp.sum(cp.multiply(case["rates"], x), axis=1))), base_constraints(x, inputs))
    theirs = _max_min(cp.Variable(case["rates"].shape), case)
    a, _, _ = ours.get_problem_data(solver="ECOS")
    b, _, _ = theirs.get_problem_data(solver="ECOS")
    assert np.array_equal(a["G"].toarray(), b["G"].toarray()) and np.array_equal(a["h"], b["h"])


def test_infeasible_program_is_a_solver_failure() -> None:
    program = cone.max_min_program(np.ones((1, 1)), np.ones((1, 1)), np.array([-1.0]))
    with pytest.raises(SolverFailure, match="ECOS"):
        program.solve()


def test_class_program_has_the_every_job_optimum() -> None:
    """Max-min over classes of identical jobs reaches the level of the program over every job."""
    rng = np.random.default_rng(7)
    kinds = rng.random((4, 3)) + 0.05
    job_kind = rng.integers(0, 4, 60)
    gangs = [1 + int(kind == 3) for kind in job_kind]
    inputs = _inputs(np.array([8.0, 8.0, 8.0]), gangs, kinds[job_kind])
    rates = inputs.throughput_matrix()

    def level(allocation: dict[int, dict[str, float]]) -> float:
        x = np.array([[allocation[j][t] for t in inputs.gpu_types] for j in inputs.job_ids])
        normaliser = rates.sum(axis=1) / 3
        return float(np.min(np.sum(rates * x, axis=1) * inputs.scale_factor_matrix()[:, 0] / normaliser))

    by_class = MaxMinFairnessPerf(classes=True).allocate(inputs)
    every_job = MaxMinFairnessPerf().allocate(inputs)
    assert level(by_class) == pytest.approx(level(every_job), rel=1e-6)
    for j in inputs.job_ids:
        twin = next(i for i in inputs.job_ids if job_kind[i] == job_kind[j])
        assert by_class[j] == by_class[twin]
