"""Where iteration rates come from: a measured Gavel/Shockwave JSON table, or the built-in model.

Both answer `throughput(model, batch_size, gpus, gpu_type)` in iterations (global minibatches) per second for the
whole gang. Only the isolated ("null") entries of a table are read; co-location entries serve packing policies we
do not implement yet.
"""

from __future__ import annotations

import ast
import math
import reprlib
from pathlib import Path
from typing import Protocol

from shockwave.errors import InputError
from shockwave.jsonfile import read_json_object
from shockwave.workload_model.catalog import split_job_type

DEFAULT_GPU_TYPE = "v100"


class UnknownThroughput(LookupError):
    """No throughput is known for this (model, batch size, gang size, GPU type)."""


class ThroughputModel(Protocol):
    name: str

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> float:
        """Iterations per second of the whole gang; raises UnknownThroughput when not known."""
        ...


def knows(tm: ThroughputModel, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> bool:
    try:
        tm.throughput(model, batch_size, gpus, gpu_type)
    except UnknownThroughput:
        return False
    return True


class TableThroughputs:
    """A Gavel-format table: worker_type -> "('<Model> (batch size B)', sf)" -> {"null": it/s, ...}."""

    def __init__(self, table: dict[tuple[str, str, int, int], float], name: str) -> None:
        self._table = table
        self.name = name

    @classmethod
    def from_json(cls, path: str | Path) -> TableThroughputs:
        path = Path(path)
        raw = read_json_object(path, "throughput", "a JSON object keyed by GPU type")
        table: dict[tuple[str, str, int, int], float] = {}
        for gpu_type, entries in raw.items():
            if not isinstance(entries, dict):
                raise InputError(f"entry for GPU type {gpu_type!r} is not an object", path=path)
            for key, values in entries.items():
                job_type, sf = _parse_key(key, path)
                given = values.get("null") if isinstance(values, dict) else values
                value = _rate(given) if isinstance(values, dict) else None
                if value is None:
                    raise InputError(
                        f"'null' throughput must be a finite number >= 0, got {reprlib.repr(given)}",
                        path=path,
                        field=f"{gpu_type}/{key}",
                    )
                if value == 0:
                    continue  # zero marks "not measured"
                try:
                    model, bs = split_job_type(job_type)
                except ValueError as exc:
                    raise InputError(str(exc), path=path, field=f"{gpu_type}/{key}") from None
                table[(gpu_type, model, bs, sf)] = value
        return cls(table, name=str(path))

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> float:
        try:
            return self._table[(gpu_type, model, batch_size, gpus)]
        except KeyError:
            raise UnknownThroughput(
                f"{self.name} has no {gpu_type} throughput for {model} at batch size {batch_size} on {gpus} GPU(s)"
            ) from None

    def entries(self, gpu_type: str = DEFAULT_GPU_TYPE) -> dict[tuple[str, int, int], float]:
        """(model, batch size, gpus) -> it/s for one GPU type."""
        return {(m, b, g): v for (t, m, b, g), v in self._table.items() if t == gpu_type}

    def to_json(self) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (gpu_type, model, bs, sf), value in sorted(self._table.items()):
            out.setdefault(gpu_type, {})[str((f"{model} (batch size {bs})", sf))] = {"null": value}
        return out


def _rate(value: object) -> float | None:
    """A finite number >= 0 as a float, else None (booleans too: JSON keeps them apart from numbers)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        rate = float(value)
    except OverflowError:  # an integer with hundreds of digits
        return None
    return rate if math.isfinite(rate) and rate >= 0 else None


def _parse_key(key: str, path: Path) -> tuple[str, int]:
    try:
        job_type, sf = ast.literal_eval(key)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise InputError(f"key {key!r} is not of the form \"('<job type>', <scale factor>)\"", path=path) from None
    if not isinstance(job_type, str) or not isinstance(sf, int) or isinstance(sf, bool) or sf < 1:
        raise InputError(f"key {key!r} must hold a job type string and a scale factor >= 1", path=path)
    return job_type, sf


def load_throughputs(path: str | Path | None) -> ThroughputModel:
    """The table at `path`, or the project's built-in model when no path is given."""
    if path is None:
        from shockwave.workload_model.builtin_throughput import BuiltinThroughputs

        return BuiltinThroughputs()
    return TableThroughputs.from_json(path)
