"""HiGHS solvers as every policy here wants them: quiet, single-threaded and seeded, so plans are the same bit for bit
on any machine and under any load, and nothing but the user's output reaches stdout."""

from __future__ import annotations

import functools
import os
import sys

import highspy


class SolverFailure(RuntimeError):
    """A solver returned no usable solution (an error, or a limit reached without an incumbent)."""


@functools.cache
def _banner_shown() -> None:
    """HiGHS prints a banner on stdout when a process creates its first solver: create that one with stdout shut,
    so output stays what the user asked for (JSON with --json) at every verbosity."""
    sys.stdout.flush()
    saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def quiet_solver(**options: float | int | bool) -> highspy.Highs:
    """A solver with no output, one thread and random seed 0, plus `options` (HiGHS option name -> value)."""
    _banner_shown()
    solver = highspy.Highs()
    for option, value in {"output_flag": False, "random_seed": 0, "threads": 1, **options}.items():
        solver.setOptionValue(option, value)
    return solver
