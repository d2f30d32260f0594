"""The BLAS kernels every run uses, pinned before numpy or scipy loads OpenBLAS, so results agree across CPUs.

OpenBLAS picks its kernels per CPU when it loads (AVX-512, AVX2, SSE), and they round sums differently. The goodput
fit's L-BFGS-B (`workload_model/sia/fit.py`) goes through them: on one Saturn workload 1,115 of 1,140 fits differed
from the 9th digit between the AVX-512 and AVX2 kernels, and an elastic schedule with them (Shockwave's makespan on
Sia's Saturn 2: 12.48 h with AVX-512 kernels, 13.10 h with AVX2 ones). So `import shockwave` asks OpenBLAS for its
AVX2 kernels ("Haswell", which OpenBLAS also runs on AMD's Zen) wherever the CPU has AVX2 and FMA: every such x86-64
CPU then gives the same numbers bit for bit. A truncated-Newton fit (scipy's TNC) avoids BLAS altogether, but it
stops elsewhere than AdaptDL's L-BFGS-B, and Sia's own simulator then differs: our `sia` went from 0.99-1.02x to
1.04-1.10x its average JCT on the heterogeneous Philly and Saturn workloads 1-3.

Not pinned (results may then differ in the last bits, and a schedule with them): a CPU without AVX2 and FMA or not
x86 (or one whose flags cannot be read, as on macOS), an OPENBLAS_CORETYPE set by the user, and a process that
loaded scipy's OpenBLAS before shockwave (`check` logs that once). Every result records the kernels it was made
with (`provenance.versions["blas"]`).
"""

from __future__ import annotations

import functools
import logging
import os
import platform
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from threadpoolctl import ThreadpoolController, threadpool_info

PINNED = "Haswell"
"""OpenBLAS's name for its AVX2 + FMA kernels."""

CPU_INFO = Path("/proc/cpuinfo")


def pin() -> None:
    """Ask OpenBLAS for the pinned kernels where the CPU runs them (a process's OpenBLAS reads this once, when it
    loads)."""
    if "OPENBLAS_CORETYPE" not in os.environ and runs_pinned():
        os.environ["OPENBLAS_CORETYPE"] = PINNED


def runs_pinned() -> bool:
    """Whether this CPU has the instructions the pinned kernels use (AVX2 and FMA)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        text = CPU_INFO.read_text(errors="replace")
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return {"avx2", "fma"} <= set(flags)


def kernels() -> str:
    """The kernels of every OpenBLAS this process has loaded (numpy's, and scipy's once the fit has run); loading
    none here (scipy's would add seconds to every small command that records a result)."""
    found = {lib.get("architecture") for lib in threadpool_info() if lib.get("internal_api") == "openblas"}
    return ",".join(sorted(filter(None, found))) or "none loaded"


@functools.cache
def check() -> None:
    """Log, once, when this process's OpenBLAS did not get the pinned kernels on a CPU that runs them."""
    loaded = kernels()
    if runs_pinned() and loaded != PINNED:
        logging.getLogger(__name__).warning(
            "OpenBLAS runs its %s kernels, not %s: results may differ in the last bits from other machines' "
            "(import shockwave before scipy, or set OPENBLAS_CORETYPE=%s)",
            loaded,
            PINNED,
            PINNED,
        )


@functools.cache
def _loaded() -> ThreadpoolController:
    """The BLAS libraries loaded, found once (by the first search, when scipy's is loaded)."""
    return ThreadpoolController()


def one_thread() -> AbstractContextManager[Any]:
    """BLAS on one thread for a small search, on the pinned kernels (`check`). The fit's vectors have 7 entries: on
    a busy machine, waking BLAS threads for each of its steps cost ten times the search itself (156 against 18 CPU-s
    for one workload)."""
    check()
    return _loaded().limit(limits=1, user_api="blas")
