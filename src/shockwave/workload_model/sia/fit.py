"""Pollux's model of a data-parallel step (Qiao et al., OSDI'21, §3.2), fitted to what a job has measured.

Per-GPU compute at per-GPU batch b takes t_c = alpha_c + beta_c b; gradient synchronisation over r replicas takes
t_n = alpha_n + beta_n max(r - 2, 0) across nodes, alpha_r + beta_r max(r - 2, 0) within one (nothing on one GPU);
the two overlap as a gamma-norm, t_step = (t_c^gamma + t_n^gamma)^(1/gamma), and k accumulation steps add k t_c.

The fit minimises the root-mean-square error of the logarithms of the compute and step times measured, plus
1e-3 (gamma - 1)^2 and 1e-2 ((beta_n / alpha_n)^2 + (beta_r / alpha_r)^2), by bounded quasi-Newton from alpha 0.1,
beta 0.01, gamma 1.001 (every parameter at least 1e-8, gamma at most 10), to a tolerance of 1e-5 that often stops
it short of the best parameters (as AdaptDL's does: the jobs' choices depend on it). What the measurements cannot
tell apart is held: alpha_c at half the mean compute time when one batch was measured; the network terms of a kind
of placement never measured at their floor, the retrogression terms too when no measurement had more than two
GPUs; and, with nothing across nodes, the cross-node terms at least 1.1 times the within-node ones.

These constants and rules are AdaptDL's (Petuum, Apache-2.0), which Sia's simulator uses; the arithmetic here is
this project's own, in Python floats (`math`). The bounded search itself calls BLAS, whose kernels OpenBLAS
chooses per CPU: `policies/solvers/blas.py` pins them (parameters differed from the 9th digit, past the rounding
to 10 significant digits kept here, and whole schedules with them).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, minimize

from shockwave.policies.solvers import blas
from shockwave.workload_model.goodput import Measurement

FLOOR = 1e-8
START = (0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.001)
MAX_GAMMA = 10.0
TOLERANCE = 1e-5


@dataclass(frozen=True)
class StepModel:
    alpha_c: float
    beta_c: float
    alpha_n: float
    beta_n: float
    alpha_r: float
    beta_r: float
    gamma: float

    def compute_s(self, local: float) -> float:
        return self.alpha_c + self.beta_c * local

    def network_s(self, nodes: int, replicas: int) -> float:
        return _network_s((self.alpha_n, self.beta_n, self.alpha_r, self.beta_r), nodes, replicas)

    def step_s(self, nodes: int, replicas: int, local: float, accumulation: int) -> float:
        """Seconds of one optimizer step with `accumulation` extra forward-backward passes."""
        compute = self.compute_s(local)
        return accumulation * compute + _overlap_log(compute, self.network_s(nodes, replicas), self.gamma, log=False)


def _overlap_log(compute: float, network: float, gamma: float, *, log: bool = True) -> float:
    """log((compute^gamma + network^gamma)^(1/gamma)), or the value itself."""
    value = math.log(compute**gamma + network**gamma) / gamma
    return value if log else math.exp(value)


def _network_terms(nodes: int, replicas: int) -> tuple[int, int] | None:
    """Indices of the (alpha, beta) that time a placement's synchronisation; None on one GPU."""
    if nodes > 1:
        return 2, 3
    if replicas > 1:
        return 4, 5
    return None


def _network_s(network: Sequence[float], nodes: int, replicas: int) -> float:
    """Synchronisation seconds from (alpha_n, beta_n, alpha_r, beta_r): the terms `_network_terms` picks."""
    extra = max(replicas - 2, FLOOR)
    terms = _network_terms(nodes, replicas)
    return FLOOR + FLOOR * extra if terms is None else network[terms[0] - 2] + network[terms[1] - 2] * extra


def _loss_and_gradient(x: np.ndarray, data: tuple[Measurement, ...]) -> tuple[float, np.ndarray]:
    """The fit's objective and its exact gradient (by hand: the fit is then as sharp as AdaptDL's autograd)."""
    p = [float(v) for v in x]
    gamma = p[6]
    n = len(data)
    compute_err, step_err = [0.0] * n, [0.0] * n
    compute_d, step_d = [[0.0] * 7 for _ in range(n)], [[0.0] * 7 for _ in range(n)]
    for i, (nodes, replicas, local, step, sync) in enumerate(data):
        compute = p[0] + p[1] * local
        terms = _network_terms(nodes, replicas)
        extra = max(replicas - 2, FLOOR)
        network = _network_s(p[2:6], nodes, replicas)
        compute_err[i] = math.log(compute) - math.log(max(step - sync, FLOOR))
        compute_d[i][0], compute_d[i][1] = 1 / compute, local / compute
        cg, ng = compute**gamma, network**gamma
        total = cg + ng
        step_err[i] = math.log(total) / gamma - math.log(step)
        d_compute, d_network = cg / compute / total, ng / network / total
        step_d[i][0], step_d[i][1] = d_compute, d_compute * local
        if terms is not None:
            step_d[i][terms[0]], step_d[i][terms[1]] = d_network, d_network * extra
        step_d[i][6] = -math.log(total) / gamma**2 + (cg * math.log(compute) + ng * math.log(network)) / (gamma * total)
    grad = [0.0] * 7
    loss = 0.0
    for err, d in ((compute_err, compute_d), (step_err, step_d)):
        rmse = _rmse(err)
        loss += rmse
        if rmse > 0:
            for k in range(7):
                grad[k] += math.fsum(e * row[k] for e, row in zip(err, d, strict=True)) / (n * rmse)
    ratio_n, ratio_r = p[3] / p[2], p[5] / p[4]
    loss += 1e-3 * (gamma - 1) ** 2 + 1e-2 * (ratio_n**2 + ratio_r**2)
    grad[6] += 2e-3 * (gamma - 1)
    grad[2] -= 2e-2 * ratio_n**2 / p[2]
    grad[3] += 2e-2 * ratio_n / p[2]
    grad[4] -= 2e-2 * ratio_r**2 / p[4]
    grad[5] += 2e-2 * ratio_r / p[4]
    return loss, np.array(grad)


def _rmse(errors: Sequence[float]) -> float:
    return math.sqrt(math.fsum(e * e for e in errors) / len(errors))


@functools.lru_cache(maxsize=65536)
def fit(data: tuple[Measurement, ...]) -> StepModel:
    """The step model that best explains `data` (sorted, so the same measurements give the same fit)."""
    start = list(START)
    lower = [FLOOR] * 6 + [1.0]
    upper = [math.inf] * 6 + [MAX_GAMMA]

    def hold(index: int, value: float) -> None:
        start[index] = lower[index] = upper[index] = value

    if len({local for _, _, local, _, _ in data}) == 1:
        hold(0, math.fsum(step - sync for _, _, _, step, sync in data) / len(data) / 2)
    if not any(nodes > 1 for nodes, *_ in data):
        hold(2, FLOOR)
        hold(3, FLOOR)
    if not any(nodes == 1 and replicas > 1 for nodes, replicas, *_ in data):
        hold(4, FLOOR)
        hold(5, FLOOR)
    if not any(replicas > 2 for _, replicas, *_ in data):
        hold(3, FLOOR)
        hold(5, FLOOR)
    with blas.one_thread():
        found = minimize(
            _loss_and_gradient,
            np.array(start),
            args=(data,),
            jac=True,
            method="L-BFGS-B",
            bounds=Bounds(lower, upper),
            tol=TOLERANCE,
        )
    # Rounded to 10 significant digits, as every published number was made (it does not make CPUs agree).
    x = [float(f"{v:.10g}") for v in found.x]
    if not any(nodes > 1 for nodes, *_ in data):
        x[2], x[3] = max(x[2], 1.1 * x[4]), max(x[3], 1.1 * x[5])
    return StepModel(*x)
