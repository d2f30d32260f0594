"""What produced a result: the versions of the libraries that decide its numbers, the mechanics and the command.

Solver versions change plans (highspy 1.12 and 1.16 give different Shockwave schedules), so every result says which
ones made it, and a sweep's cell key includes them: a cell computed by another solver stack is computed again.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from shockwave import __version__
from shockwave.policies.solvers import blas

DECIDING = ("numpy", "scipy", "highspy", "cvxpy", "ecos", "clarabel", "scs", "osqp")
"""Libraries whose version can change a simulated result (solvers and the numerics under them)."""


@cache
def library_versions() -> dict[str, str]:
    found = {"shockwave": __version__, "python": platform.python_version()}
    for name in DECIDING:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def provenance(mechanics: Any | None = None) -> dict[str, Any]:
    """The result's `provenance` object; `mechanics` is a Mechanics (every parameter is recorded). The command is
    added by whoever ran it (`with_command`): a sweep's cell runs in a worker that does not know it."""
    # the BLAS kernels are read at each result, not cached with the versions: they load as the run needs them
    record: dict[str, Any] = {"versions": {**library_versions(), "blas": blas.kernels()}}
    if mechanics is not None:
        record["mechanics"] = asdict(mechanics)
    return record


def this_command() -> list[str]:
    return ["shockwave", *sys.argv[1:]]


def with_command(result: dict[str, Any], command: list[str]) -> dict[str, Any]:
    result.setdefault("provenance", {})["command"] = command
    return result
