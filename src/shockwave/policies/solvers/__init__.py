"""The numerical pieces every policy solves with: HiGHS as every policy calls it (`highs.py`) and sums that decide
plans, rounded once whatever the CPU (`exact.py`)."""
