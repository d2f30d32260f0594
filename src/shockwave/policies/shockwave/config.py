"""Shockwave's hyperparameters, read from the reference's JSON files (spec §4.1) and checked before any run.

Defaults are those of `configurations/tacc_32gpus.json`. `gpu_ram`, `solver_timeout` and `solver_num_threads` are
accepted because every reference file carries them, but nothing reads them: the reference's optimizer never read
`gpu_ram`, and a wall-clock limit or a thread count that follows the machine would make plans depend on the
machine's speed, load and size. HiGHS runs on one thread and stops on `solver_max_nodes` instead (same plan
everywhere). Twelve keys are ours: `resolve_every_rounds` (the reference's hard-coded REOPT_ROUNDS), `welfare_slack`,
`elastic_welfare_slack` and `elastic_min_stint`, `solver_max_nodes`, for large clusters `greedy_jobs`,
`makespan_share` and `late_share`, and for several GPU types `typed_greedy_jobs`, `longest_jobs`, `longest_share`
and `typed_welfare_slack`.

`ShockwaveConfig` is a frozen pydantic dataclass, so a config built in code is type-checked too; a JSON file goes
through `from_mapping` first, whose messages name the key (pydantic's would name a Python field instead).
"""

from __future__ import annotations

import math
import reprlib
from dataclasses import fields
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic.dataclasses import dataclass

from shockwave.core.errors import InputError
from shockwave.io.jsonfile import read_json_object
from shockwave.io.text import CONFIG_LIMIT

JSON_NAMES = {"lam": "lambda"}
"""Field names that differ from the reference's JSON keys (`lambda` is a Python keyword)."""
MAX_FUTURE_ROUNDS = 10_000
"""500 times the reference's planning window; every re-solve lays out this many rounds."""


@dataclass(frozen=True)
class ShockwaveConfig:
    future_rounds: int = 20
    """H: rounds in the planning window."""
    k: float = 1e-3
    """Weight of the makespan term (largest predicted leftover runtime, in seconds) against Nash social welfare."""
    lam: float = 12.0
    """Exponent of the priority given to jobs behind their finish-time target when the constraints are relaxed."""
    rhomax: float = 1.0
    """Allowed finish time as a multiple of the fair-share target."""
    log_approximation_bases: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    """Breakpoints of the piecewise-linear log of normalised progress; must start at 0 and end at 1."""
    solver_rel_gap: float = 1e-3
    solver_timeout: float = 15.0
    """Accepted, not used (see the module docstring)."""
    solver_num_threads: int = 24
    """Accepted, not used (see the module docstring)."""
    solver_max_nodes: int = 10_000
    """Branch-and-bound nodes HiGHS may explore in one solve before its best plan so far is taken: a limit that
    gives the same plan on any machine under any load. Solves of the released traces need 1 node."""
    gpu_ram: float = 16.0
    resolve_every_rounds: int = 8
    """Re-solve at least this often even when no job arrives or completes (the reference's REOPT_ROUNDS)."""
    greedy_jobs: int = 180
    """Active jobs from which a window is solved by `greedy.py` (a sort, within one item of the exact program's optimum,
    plus rounds for critical jobs) instead of HiGHS, on one GPU type (several: `typed_greedy_jobs`). HiGHS's cost
    grows faster than the jobs (0.2-1.5 s per window at 700-1,500 jobs, 2 cores); below 180 it takes under 0.1 s.
    The released 120- and 220-job traces never reach 180 active jobs and keep their exact plans; on the 460- and
    900-job traces the greedy path does better on makespan, worst rho and unfair jobs (from 190 on, the 460-job
    trace's worst rho got worse than HiGHS's, from 160 down the 220-job trace's). Not a reference key."""
    typed_greedy_jobs: int = 300
    """`greedy_jobs` on several GPU types: active jobs from which the window is solved by `typed_greedy.py` instead
    of HiGHS's LP relaxation. The LP plans better (it lets a job split its window over types, and the longest jobs
    and the layout's order are HiGHS's alone): at 180, the typed greedy's 300- and 460-job traces of
    `benchmarks/types_pareto.py` had 2.5-10% more average JCT (seed 7555, 300 jobs on 64:32:32: 1.009x Themis's
    against 0.920x). 300 is the most that costs nothing at 2,000 jobs on three types (CPU 1.35x one type's, as at
    180; 400: 1.58x, over issue 33's 1.5x; every window by HiGHS: 5.4x). Not a reference key."""
    makespan_share: float = 0.75
    """On the greedy path, the share of a window's GPU-rounds the longest jobs may be given before the market
    (`greedy.leveled`; 0: none). Not a reference key."""
    late_share: float = 0.25
    """On the greedy path, the share of a window's GPU-rounds late jobs may be given before the market, after
    the longest (`greedy.critical_floor`; 0: none). Not a reference key."""
    longest_jobs: int = 8
    """On several GPU types (HiGHS's path), how many of the jobs with the longest remaining time at their fastest type
    are kept running there, levelled below the cluster's projected end (`longest.longest_first`; 0: none). 3 left a
    220-job trace on 36:36:36 (seed 6111) at 1.054x `min_total_duration_perf`'s makespan (8: 1.017x) and the
    released 220-job trace at worst rho 1.60 (8: 1.10). Not a reference key."""
    longest_share: float = 0.1
    """The share of a window's GPU-rounds those jobs may take (`longest.longest_first`). Not a reference key."""
    welfare_slack: float = 0.3
    """Share of the market's welfare term the second solve may give up to finish jobs sooner (0: a pure
    tie-break among equally good plans). Not a reference key: the reference leaves that choice to Gurobi."""
    typed_welfare_slack: float = 0.5
    """`welfare_slack` on several GPU types (rigid jobs). Measured on `benchmarks/types_pareto.py`: with 0.3 (before
    the layout's order in `packing.pack_types` and `longest_jobs` 8) average JCT missed its bars on 4 of the first 20
    cases; with 0.5 on 1 of them and 3 of all 32 (0.45 and 0.55: 2 and 4), makespan 0.94x `min_total_duration_perf`'s
    in geometric mean either way. Not a reference key."""
    elastic_welfare_slack: float = 0.6
    """`welfare_slack` where jobs are goodput-adaptive (`elastic.py`, solved every round). On Sia's homogeneous
    Philly 1-3 (overloaded: half the jobs miss rho 1.05 under any policy) 0.3 left average JCT 0.97-1.35x Sia's, 0.6
    0.88-1.04x, 0.9 0.90-0.99x but a 1.48x makespan on Philly 2; on the heterogeneous Saturn 1-3 0.3 and 0.6 are
    alike. Not a reference key."""
    elastic_min_stint: float = 1.0
    """Where jobs are goodput-adaptive: after restoring its checkpoint, a job that moved keeps its configuration
    until it has trained this many restarts' time (0: only while it restores; jobs then often ran a round or two
    between restarts). Against 1, 0 took heterogeneous Saturn 2 from 1.03x Sia's average JCT to 1.06x and from 0.6%
    of jobs over rho 1.05 to 5.6%, homogeneous Philly 2's makespan from 1.04x to 1.21x (Saturn 1 did better with 0:
    1.01x, 0%). Not a reference key."""

    def __post_init__(self) -> None:
        checks: list[tuple[bool, str, str]] = [
            (1 <= self.future_rounds <= MAX_FUTURE_ROUNDS, "future_rounds", f"must be in [1, {MAX_FUTURE_ROUNDS}]"),
            (self.k >= 0, "k", "must be >= 0"),
            (self.lam >= 0, "lambda", "must be >= 0"),
            (self.rhomax > 0, "rhomax", "must be > 0"),
            (0 < self.solver_rel_gap < 1, "solver_rel_gap", "must be in (0, 1)"),
            (self.solver_timeout > 0, "solver_timeout", "must be > 0 seconds"),
            (self.solver_num_threads >= 1, "solver_num_threads", "must be an integer >= 1"),
            (self.solver_max_nodes >= 1, "solver_max_nodes", "must be an integer >= 1"),
            (self.gpu_ram > 0, "gpu_ram", "must be > 0"),
            (self.resolve_every_rounds >= 1, "resolve_every_rounds", "must be an integer >= 1"),
            (self.greedy_jobs >= 1, "greedy_jobs", "must be an integer >= 1"),
            (self.typed_greedy_jobs >= 1, "typed_greedy_jobs", "must be an integer >= 1"),
            (0 <= self.makespan_share <= 1, "makespan_share", "must be in [0, 1]"),
            (0 <= self.late_share <= 1, "late_share", "must be in [0, 1]"),
            (self.longest_jobs >= 0, "longest_jobs", "must be an integer >= 0"),
            (0 <= self.longest_share <= 1, "longest_share", "must be in [0, 1]"),
            (0 <= self.welfare_slack <= 1, "welfare_slack", "must be in [0, 1]"),
            (0 <= self.typed_welfare_slack <= 1, "typed_welfare_slack", "must be in [0, 1]"),
            (0 <= self.elastic_welfare_slack <= 1, "elastic_welfare_slack", "must be in [0, 1]"),
            (0 <= self.elastic_min_stint <= 100, "elastic_min_stint", "must be in [0, 100] restarts"),
        ]
        for ok, key, rule in checks:
            if not ok:
                raise InputError(f"{key} {rule}, got {getattr(self, JSON_ATTRS.get(key, key))!r}", field=key)
        bases = self.log_approximation_bases
        if len(bases) < 2 or bases[0] != 0.0 or bases[-1] != 1.0 or any(a >= b for a, b in pairwise(bases)):
            raise InputError(
                f"must increase strictly from 0.0 to 1.0, got {list(bases)}", field="log_approximation_bases"
            )

    @classmethod
    def from_mapping(cls, raw: dict[str, Any], *, path: str | Path | None = None) -> ShockwaveConfig:
        known = {JSON_NAMES.get(f.name, f.name): f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            spec = known.get(key)
            if spec is None:
                raise InputError(f"unknown key {key!r}; known keys: {', '.join(sorted(known))}", path=path, field=key)
            values[spec.name] = _coerce(key, value, spec.type, path)
        try:
            return cls(**values)
        except InputError as exc:
            raise InputError(exc.reason, path=path, field=exc.field) from None

    @classmethod
    def from_json(cls, path: str | Path) -> ShockwaveConfig:
        return cls.from_mapping(
            read_json_object(path, "config", "a JSON object of hyperparameters", CONFIG_LIMIT), path=path
        )

    def to_json(self) -> dict[str, Any]:
        out = {JSON_NAMES.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}
        out["log_approximation_bases"] = list(self.log_approximation_bases)
        return out


JSON_ATTRS = {v: k for k, v in JSON_NAMES.items()}


def _coerce(key: str, value: Any, kind: Any, path: str | Path | None) -> Any:
    """JSON numbers to the field's type; booleans, strings and non-finite numbers are errors."""
    kind = str(kind)
    if "tuple" in kind:
        if not isinstance(value, list) or not all(_is_number(v) for v in value):
            raise InputError(f"must be a list of finite numbers, got {reprlib.repr(value)}", path=path, field=key)
        return tuple(float(v) for v in value)
    if not _is_number(value):
        raise InputError(f"must be a finite number, got {reprlib.repr(value)}", path=path, field=key)
    if kind == "int":
        if isinstance(value, float) and not value.is_integer():
            raise InputError(f"must be an integer, got {value!r}", path=path, field=key)
        return int(value)
    return float(value)


def _is_number(value: Any) -> bool:
    """A finite int or float that fits a float (JSON allows integers of any length)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
