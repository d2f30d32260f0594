"""Fair and efficient scheduling of adaptive ML training jobs on shared GPU clusters.

`shockwave.simulate(...)` is the Python API (`shockwave.api`); it is imported on first use, so a training script
that only needs the lease client (`shockwave.training.lease`) does not load the solvers. Importing it pins OpenBLAS's
kernels first (`shockwave.policies.solvers.blas`).
"""

from typing import Any

from shockwave.policies.solvers import blas

blas.pin()  # before anything loads numpy or scipy: the same BLAS kernels, so the same numbers, on every CPU

__version__ = "0.1.0"
__all__ = ["simulate"]


def __getattr__(name: str) -> Any:
    if name == "simulate":
        from shockwave.api import simulate

        return simulate
    raise AttributeError(f"module 'shockwave' has no attribute {name!r}")
