"""What a real run measured, a replay's truth: each job's own rates, start-ups, switches and T_iso, each round's length.

A throughput table has one rate per (model, batch size, gang, GPU type), and a restart cost is one number per gang
size. Two jobs of one kind can still train at different speeds (what runs beside them, their data, their node): in a
fidelity run on 2 cores emulating 4 GPUs, two LM jobs of batch size 20 on 2 GPUs trained at 144 and 216 steps/s. A
lease's start-up (from the round's decision to its first step) varies lease by lease, as does a batch-size switch
within a round (from the last step at the old size to the first at the new), and a round lasts its configured length
plus the time its preempted jobs took to leave (and the wait for last exits, and the decision). `shockwave run`
writes them all to DIR/measurements.json, with each finished job's T_iso as the run computed it (from the measured
rates and the batch sizes it really used). `simulate --measurements` (a replay: with `--batch-sizes`) makes a job's
rates its own where it measured them and its kind's measured rate elsewhere (the table's ratios between batch sizes
past that), its n-th start cost its n-th measured start-up (the mean of its start-ups once a replay starts it more
often than the run did; switches alike), its finish-time fairness read against that T_iso, and the replay's n-th
round last as long as the run's n-th (the `--round-seconds` past the last; a run that waited idle for jobs or was
resumed records no round lengths). Those rates are also what the replay's policies weigh jobs by, as the run's did
once a job had run a lease (the table's before). The `--throughputs` table, the run's own, is the rest of what the
run's scheduler knew: the profiles Shockwave forecasts from and finish-time targets are set by, and the slowdown of
jobs sharing GPUs (put on the measured scale).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from shockwave.core.errors import InputError
from shockwave.io.jsonfile import read_json_object
from shockwave.io.text import BATCH_SIZES_LIMIT

SHAPE = (
    'an object {"jobs": {"<job id>": {"rates": {"<GPU type>": {"<batch size>": steps per second}}, '
    '"startups": [seconds, ...], "switches": [seconds, ...], "t_isolated_s": seconds}}, "rounds": [seconds, ...]}'
)
FIELDS = ("rates", "startups", "switches", "t_isolated_s")
"""A job's fields."""
MAX_SECONDS = 1e10
"""Longer than three centuries: not a measurement."""
MIN_ROUND_S = 0.01
"""The shortest round `shockwave run` takes."""


@dataclass(frozen=True)
class MeasuredJob:
    """One job of a real run as it was measured."""

    rates: dict[str, dict[int, float]]
    """GPU type -> batch size -> steps/s the job trained at alone (start-ups excluded)."""
    startups: tuple[float, ...] = ()
    """Seconds from each lease's decision to its first step, in the order of its leases."""
    t_isolated_s: float | None = None
    """Its T_iso as the run computed it (finished jobs), for its finish-time fairness."""
    switches: tuple[float, ...] = ()
    """Seconds each batch-size switch within a round took, in order."""

    def rates_at(self, batch_size: int) -> dict[str, float]:
        """Its rate at `batch_size` on each GPU type it was measured on there."""
        return {gpu_type: by_size[batch_size] for gpu_type, by_size in self.rates.items() if batch_size in by_size}

    def startup(self, start: int) -> float | None:
        """What its `start`-th start (from 0) cost, or the mean of its start-ups past the last; None: none known."""
        return _nth(self.startups, start)

    def switch(self, switch: int) -> float | None:
        """What its `switch`-th switch within a round (from 0) cost, as `startup` reads start-ups."""
        return _nth(self.switches, switch)

    def to_json(self) -> dict[str, Any]:
        """Its entry in measurements.json (what `_jobs` reads back)."""
        rates = {gpu_type: {str(bs): rate for bs, rate in by_size.items()} for gpu_type, by_size in self.rates.items()}
        isolated = {} if self.t_isolated_s is None else {"t_isolated_s": self.t_isolated_s}
        return {"rates": rates, "startups": list(self.startups), "switches": list(self.switches), **isolated}


@dataclass(frozen=True)
class Measurements:
    """A real run as it was measured: its jobs and its rounds."""

    jobs: dict[int, MeasuredJob]
    """Job id -> what the run measured of it."""
    rounds: tuple[float, ...] = ()
    """Each round's length, from its decision to the next, in order."""

    def to_json(self) -> dict[str, Any]:
        """measurements.json's object (what `read_measurements` reads back)."""
        return {"jobs": {str(i): job.to_json() for i, job in self.jobs.items()}, "rounds": list(self.rounds)}


def read_measurements(path: Path, jobs: int, gpu_types: Collection[str]) -> Measurements:
    """The measurements in `path`, checked against a trace of `jobs` jobs and a cluster of `gpu_types`: every rate
    a positive finite number of steps per second, every start-up and switch a finite number of seconds >= 0, a T_iso
    and every round's length > 0."""
    raw = read_json_object(path, "measurements", SHAPE, BATCH_SIZES_LIMIT)
    unknown = sorted(set(raw) - {"jobs", "rounds"})
    if unknown:
        raise InputError(f"unknown field {unknown[0]!r} (jobs, rounds)", path=path, field=unknown[0])
    rounds = _seconds(raw.get("rounds", []), path, "rounds")
    short = next((n for n, seconds in enumerate(rounds) if seconds < MIN_ROUND_S), None)
    if short is not None:
        message = f"a round lasts at least {MIN_ROUND_S:g} s, not {rounds[short]!r}"
        raise InputError(message, path=path, field=f"rounds[{short}]")
    return Measurements(_jobs(_object(raw.get("jobs", {}), path, "jobs"), path, jobs, gpu_types), rounds)


def _jobs(raw: dict[str, Any], path: Path, jobs: int, gpu_types: Collection[str]) -> dict[int, MeasuredJob]:
    measured: dict[int, MeasuredJob] = {}
    for key, entry in raw.items():
        where = f"jobs.{key}"
        if not _canonical(key) or int(key) >= jobs:
            raise InputError(f"{key!r} is not a job id of the trace (0..{jobs - 1})", path=path, field=where)
        fields = _object(entry, path, where)
        unknown = sorted(set(fields) - set(FIELDS))
        if unknown:
            message = f"unknown field {unknown[0]!r} ({', '.join(FIELDS)})"
            raise InputError(message, path=path, field=f"{where}.{unknown[0]}")
        rates = {
            gpu_type: _by_batch_size(by_size, path, f"{where}.rates.{gpu_type}")
            for gpu_type, by_size in _object(fields.get("rates", {}), path, f"{where}.rates").items()
        }
        foreign = sorted(set(rates) - set(gpu_types))
        if foreign:
            message = f"GPU type {foreign[0]!r} is not in the cluster ({', '.join(gpu_types)})"
            raise InputError(message, path=path, field=f"{where}.rates.{foreign[0]}")
        isolated = fields.get("t_isolated_s")
        if isolated is not None and not (_number(isolated) and 0 < isolated <= MAX_SECONDS):
            message = f"expected seconds above 0, at most {MAX_SECONDS:g}, not {isolated!r}"
            raise InputError(message, path=path, field=f"{where}.t_isolated_s")
        startups = _seconds(fields.get("startups", []), path, f"{where}.startups")
        switches = _seconds(fields.get("switches", []), path, f"{where}.switches")
        t_isolated = None if isolated is None else float(isolated)
        measured[int(key)] = MeasuredJob(rates, startups, t_isolated, switches)
    return measured


def _by_batch_size(raw: Any, path: Path, field: str) -> dict[int, float]:
    rates: dict[int, float] = {}
    for bs, rate in _object(raw, path, field).items():
        if not (_canonical(bs) and 0 < int(bs) < 10**9):
            raise InputError(f"{bs!r} is not a batch size", path=path, field=f"{field}.{bs}")
        if not _number(rate) or rate <= 0:
            message = f"expected a positive number of steps per second, not {rate!r}"
            raise InputError(message, path=path, field=f"{field}.{bs}")
        rates[int(bs)] = float(rate)
    return rates


def _nth(seconds: tuple[float, ...], n: int) -> float | None:
    """The `n`-th of `seconds`, their mean past the last, None where there are none."""
    if not seconds:
        return None
    return seconds[n] if n < len(seconds) else fmean(seconds)


def _seconds(raw: Any, path: Path, field: str) -> tuple[float, ...]:
    if not isinstance(raw, list):
        raise InputError("expected a list of seconds", path=path, field=field)
    for n, seconds in enumerate(raw):
        if not _number(seconds) or not 0 <= seconds <= MAX_SECONDS:
            message = f"expected seconds from 0 to {MAX_SECONDS:g}, not {seconds!r}"
            raise InputError(message, path=path, field=f"{field}[{n}]")
    return tuple(float(seconds) for seconds in raw)


def _number(value: Any) -> bool:
    """A finite JSON number (not a boolean, not an integer too large for a float)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _canonical(key: str) -> bool:
    """A decimal number written as Python writes it ("7", not "07"), so two keys never name one job or size; at
    most 18 digits, so reading it is cheap (Python refuses to read integers of over 4,300 digits)."""
    return key.isascii() and key.isdigit() and len(key) <= 18 and (key == "0" or key[0] != "0")


def _object(raw: Any, path: Path, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InputError(f"expected {SHAPE}", path=path, field=field)
    return raw
