"""Sums whose bits do not depend on the machine a plan is made on.

numpy's `@` on float vectors calls the BLAS dot, and OpenBLAS picks its kernel for the CPU at import (AVX-512,
AVX2, ...), each adding in another order. On the same inputs Shockwave's canonical makespan came out 22,764 s on
one machine and 22,664 s on another (and four other values under other `OPENBLAS_CORETYPE`s). Arithmetic that decides
a plan sums exactly instead: `math.fsum` rounds once, whatever the order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def exact_dot(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """sum(a[i] * b[i]), each product rounded as IEEE does and the sum rounded once."""
    left, right = np.asarray(a, dtype=float).tolist(), np.asarray(b, dtype=float).tolist()
    return math.fsum(x * y for x, y in zip(left, right, strict=True))
