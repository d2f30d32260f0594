"""The numerical pieces every policy solves with: HiGHS as every policy calls it (`highs.py`) and sums that decide
plans, rounded once whatever the CPU (`exact.py`), and OpenBLAS's kernels, pinned on `import shockwave` so the BLAS
calls left (the goodput fit's search) agree across CPUs (`blas.py`)."""
