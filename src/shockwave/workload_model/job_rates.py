"""Each job's own rates, as a real run measured them: a replay's truth where jobs of one kind ran at different speeds.

A throughput table has one rate per (model, batch size, gang, GPU type). On a real cluster two jobs of one kind can
still train at different speeds (what runs beside them, their data, their node); in a fidelity run on 2 cores
emulating 4 GPUs, two LM jobs of batch size 20 on 2 GPUs trained at 144 and 216 steps/s, and a replay at their
pooled 162 finished the slow one before a decision it really missed. `shockwave run` writes each job's rates to
DIR/job_rates.json; `simulate --job-rates` makes them the jobs' rates wherever they are known (the table, scaled by
its ratios, elsewhere).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.io.jsonfile import read_json_object
from shockwave.io.text import BATCH_SIZES_LIMIT

JobRates = dict[int, dict[str, dict[int, float]]]
"""Job id -> GPU type -> batch size -> steps/s."""
SHAPE = 'an object {"<job id>": {"<GPU type>": {"<batch size>": steps per second, ...}, ...}, ...}'


def read_job_rates(path: Path, jobs: int, gpu_types: Collection[str]) -> JobRates:
    """The job rates in `path`, checked against a trace of `jobs` jobs and a cluster of `gpu_types`: every rate a
    positive finite number of steps per second."""
    raw = read_json_object(path, "job rates", SHAPE, BATCH_SIZES_LIMIT)
    rates: JobRates = {}
    for key, by_type in raw.items():
        if not (key.isascii() and key.isdigit()) or int(key) >= jobs:
            raise InputError(f"{key!r} is not a job id of the trace (0..{jobs - 1})", path=path, field=key)
        rates[int(key)] = {
            gpu_type: _by_batch_size(by_size, path, f"{key}.{gpu_type}")
            for gpu_type, by_size in _object(by_type, path, key).items()
        }
        unknown = sorted(set(rates[int(key)]) - set(gpu_types))
        if unknown:
            raise InputError(
                f"GPU type {unknown[0]!r} is not in the cluster ({', '.join(gpu_types)})",
                path=path,
                field=f"{key}.{unknown[0]}",
            )
    return rates


def _by_batch_size(raw: Any, path: Path, field: str) -> dict[int, float]:
    rates: dict[int, float] = {}
    for bs, rate in _object(raw, path, field).items():
        if not (bs.isascii() and bs.isdigit() and 0 < int(bs) < 10**9):
            raise InputError(f"{bs!r} is not a batch size", path=path, field=f"{field}.{bs}")
        number = isinstance(rate, (int, float)) and not isinstance(rate, bool)
        if not number or not math.isfinite(rate) or rate <= 0:
            raise InputError(
                f"expected a positive number of steps per second, not {rate!r}", path=path, field=f"{field}.{bs}"
            )
        rates[int(bs)] = float(rate)
    return rates


def _object(raw: Any, path: Path, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InputError(f"expected {SHAPE}", path=path, field=field)
    return raw
