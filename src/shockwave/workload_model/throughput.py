"""Where iteration rates come from: a measured Gavel/Shockwave JSON table, or the built-in model.

Both answer `throughput(model, batch_size, gpus, gpu_type)` in iterations (global minibatches) per second for the
whole gang. A table's co-location entries (two jobs of the same gang size sharing the same GPUs) answer
`colocated(...)`: the pair's two rates; the built-in model knows no pairs, so space sharing needs a measured table.

A table given by the user (`load_throughputs(path)`) also answers gang sizes it does not list (`TableWithFallback`):
Gavel's Philly-derived traces hold gangs of up to 64 GPUs, its tables only 1, 2, 4 and 8. Such a rate is an estimate,
and the model records it, so a result can say which of its numbers rest on one.
"""

from __future__ import annotations

import ast
import functools
import math
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from shockwave.core.errors import InputError
from shockwave.io.jsonfile import read_json_object
from shockwave.io.text import THROUGHPUT_LIMIT
from shockwave.workload_model.catalog import FAMILIES, split_job_type

DEFAULT_GPU_TYPE = "v100"


class UnknownThroughput(LookupError):
    """No throughput is known for this (model, batch size, gang size, GPU type)."""


class ThroughputModel(Protocol):
    name: str

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> float:
        """Iterations per second of the whole gang; raises UnknownThroughput when not known."""
        ...


@runtime_checkable
class TimesPlacements(Protocol):
    """A throughput model that also knows how fast a gang runs on the servers it was given, not only on the packed
    placement `throughput` assumes (Sia's profiles time each placement)."""

    def placed(self, model: str, batch_size: int, per_server: tuple[int, ...], gpu_type: str) -> float | None:
        """Iterations per second of the gang with these GPUs on each server it spans; None where not measured."""
        ...


@runtime_checkable
class KnowsEpochs(Protocol):
    """A throughput model whose jobs' epochs take unequal numbers of steps (Sia's applications: an epoch's steps at a
    batch are its progress over the statistical gain the epoch's gradient noise gives that batch)."""

    def epoch_ends(self, model: str, batch_size: int) -> Sequence[float]:
        """Steps at `batch_size` done when each epoch ends, in order (the last: the whole work)."""
        ...


def knows(tm: ThroughputModel, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> bool:
    try:
        tm.throughput(model, batch_size, gpus, gpu_type)
    except UnknownThroughput:
        return False
    return True


def rate_or_zero(
    tm: ThroughputModel, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE
) -> float:
    """The rate, or 0 where `tm` does not know one: the throughput tables' own "cannot run there"."""
    try:
        return tm.throughput(model, batch_size, gpus, gpu_type)
    except UnknownThroughput:
        return 0.0


Pair = tuple[float, float]
"""Rates of two jobs sharing the same GPUs: the first job's, then its partner's."""
PairKey = tuple[str, str, int, str, int, int]
"""(GPU type, model, batch size, partner's model, partner's batch size, gang size)."""


class TableThroughputs:
    """A Gavel-format table: worker_type -> "('<Model> (batch size B)', sf)" -> {"null": it/s, "<partner key>":
    [its it/s, the partner's it/s] when the two share the GPUs, ...}.

    An entry of 0 is not a rate: it answers UnknownThroughput like an absent one (Shockwave's tables mark what was not
    measured so; Gavel's marks ResNet-50 at batch 128 on 2-8 K80s, which cannot run there). `zeros` keeps those keys
    apart from absent ones, so that nothing estimates over a 0 the table states.
    """

    def __init__(
        self,
        table: dict[tuple[str, str, int, int], float],
        name: str,
        zeros: frozenset[tuple[str, str, int, int]] = frozenset(),
        pairs: dict[PairKey, Pair] | None = None,
    ) -> None:
        self._table = table
        self.name = name
        self.zeros = zeros
        self._pairs = pairs or {}
        self._gangs: dict[tuple[str, str, int], dict[int, float]] | None = None

    @classmethod
    def from_json(cls, path: str | Path) -> TableThroughputs:
        path = Path(path)
        raw = read_json_object(path, "throughput", "a JSON object keyed by GPU type", THROUGHPUT_LIMIT)
        table: dict[tuple[str, str, int, int], float] = {}
        zeros: set[tuple[str, str, int, int]] = set()
        pairs: dict[PairKey, Pair] = {}
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
                try:
                    model, bs = split_job_type(job_type)
                except ValueError as exc:
                    if value == 0:
                        continue  # a 0 states nothing: its key was never checked, and still is not
                    raise InputError(str(exc), path=path, field=f"{gpu_type}/{key}") from None
                if value == 0:
                    zeros.add((gpu_type, model, bs, sf))  # not measured, or cannot run there: not a rate
                else:
                    table[(gpu_type, model, bs, sf)] = value
                for other, pair in _pair_entries(values, path, f"{gpu_type}/{key}", sf):
                    pairs[(gpu_type, model, bs, *other, sf)] = pair
        return cls(table, name=str(path), zeros=frozenset(zeros), pairs=pairs)

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> float:
        try:
            return self._table[(gpu_type, model, batch_size, gpus)]
        except KeyError:
            raise UnknownThroughput(
                f"{self.name} has no {gpu_type} throughput for {model} at batch size {batch_size} on {gpus} GPU(s)"
            ) from None

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The GPU types it holds a rate for (a type listed with zeros only has none)."""
        return tuple(dict.fromkeys(gpu_type for gpu_type, *_ in self._table))

    def colocated(
        self, model: str, batch_size: int, other_model: str, other_batch_size: int, gpus: int, gpu_type: str
    ) -> Pair:
        """Both jobs' it/s while they share `gpus` GPUs of `gpu_type` (this job's first; zeros where the table says
        they cannot share); UnknownThroughput when the table does not list the pair there."""
        try:
            return self._pairs[(gpu_type, model, batch_size, other_model, other_batch_size, gpus)]
        except KeyError:
            raise UnknownThroughput(
                f"{self.name} has no {gpu_type} throughput for {model} (batch size {batch_size}) sharing {gpus} GPU(s) "
                f"with {other_model} (batch size {other_batch_size})"
            ) from None

    def gangs(self, model: str, batch_size: int, gpu_type: str = DEFAULT_GPU_TYPE) -> Mapping[int, float]:
        """Gang size -> it/s of every gang the table lists for this job on this type, 0 for a listed 0."""
        if self._gangs is None:
            index: dict[tuple[str, str, int], dict[int, float]] = {}
            for t, m, b, g in self.zeros:
                index.setdefault((t, m, b), {})[g] = 0.0
            for (t, m, b, g), value in self._table.items():
                index.setdefault((t, m, b), {})[g] = value
            self._gangs = index
        return self._gangs.get((gpu_type, model, batch_size), {})

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


def _pair_entries(values: object, path: Path, where: str, sf: int) -> Iterable[tuple[tuple[str, int], Pair]]:
    """The co-location entries of one table entry: ((partner's model, batch size), rates) for each partner of the
    same gang size the table lists (zeros included: "cannot share" is known too); models we do not know are
    skipped."""
    if not isinstance(values, dict):
        return
    for other_key, given in values.items():
        if other_key == "null":
            continue
        rates = [_rate(v) for v in given] if isinstance(given, list) and len(given) == 2 else [None]
        if any(rate is None for rate in rates):
            raise InputError(
                f"a co-location entry must be [rate, partner's rate], finite numbers >= 0, got {reprlib.repr(given)}",
                path=path,
                field=f"{where}/{other_key}",
            )
        other_type, other_sf = _parse_key(other_key, path)
        try:
            other = split_job_type(other_type)
        except ValueError:
            continue
        first, second = rates
        if other_sf == sf:
            yield other, (first, second)


def colocated_rates(
    tm: ThroughputModel, model: str, batch_size: int, other_model: str, other_batch_size: int, gpus: int, gpu_type: str
) -> Pair | None:
    """What `tm` knows of the pair sharing GPUs (this job's rate first), or None: a model without co-location
    entries (the built-in one) knows no pairs."""
    colocated = getattr(tm, "colocated", None)
    if colocated is None:
        return None
    try:
        return colocated(model, batch_size, other_model, other_batch_size, gpus, gpu_type)
    except UnknownThroughput:
        return None


def _parse_key(key: str, path: Path) -> tuple[str, int]:
    parsed = _literal_pair(key)
    if parsed is None:
        raise InputError(f"key {key!r} is not of the form \"('<job type>', <scale factor>)\"", path=path)
    job_type, sf = parsed
    if not isinstance(job_type, str) or not isinstance(sf, int) or isinstance(sf, bool) or sf < 1:
        raise InputError(f"key {key!r} must hold a job type string and a scale factor >= 1", path=path)
    return job_type, sf


@functools.lru_cache(maxsize=4096)
def _literal_pair(key: str) -> tuple[object, object] | None:
    """The two literals of a key (a table names each partner once per entry, so keys repeat thousands of times:
    read each once), or None where it is not a pair of literals."""
    try:
        first, second = ast.literal_eval(key)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return None
    return first, second


class Estimate(NamedTuple):
    """A rate the table does not list, and what it was made from."""

    model: str
    batch_size: int
    gpus: int
    gpu_type: str
    rate: float
    basis: str


class TableWithFallback:
    """A table that also answers gang sizes it does not list for a job it lists on that GPU type, and records them.

    A distributable job on g GPUs takes the rate of the nearest gang the table lists (the largest below g, else the
    smallest above), scaled by the fallback model's ratio between the two gangs: the table keeps its level, the
    built-in model (`builtin_throughput`, fitted per GPU type) gives only the shape of scaling. A job whose family does
    not train distributed (Recommendation, A3C, CycleGAN: Gavel's Philly traces give them gangs of up to 32) holds its
    gang but trains on one GPU: the table's 1-GPU rate. Nothing else is estimated: a batch size or GPU type the table
    lacks, any gang of a job the table lists as 0 on that type at some gang (it cannot run there, or was not
    measured: no guess around it), and a family unknown to the fallback stay unknown.
    """

    def __init__(self, table: TableThroughputs, fallback: ThroughputModel) -> None:
        self.table, self.fallback = table, fallback
        self.name = table.name
        self._estimates: dict[tuple[str, int, int, str], Estimate] = {}

    def colocated(
        self, model: str, batch_size: int, other_model: str, other_batch_size: int, gpus: int, gpu_type: str
    ) -> Pair:
        """The table's pair (never estimated: a pair the table does not list is not formed)."""
        return self.table.colocated(model, batch_size, other_model, other_batch_size, gpus, gpu_type)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The table's: nothing is estimated on a type it lacks."""
        return self.table.gpu_types

    @property
    def estimated(self) -> tuple[Estimate, ...]:
        """Every rate answered by estimation so far, sorted by (model, batch size, gpus, GPU type)."""
        return tuple(self._estimates[key] for key in sorted(self._estimates))

    def estimated_records(self) -> list[dict[str, Any]]:
        """`estimated` as JSON-ready records."""
        return [e._asdict() for e in self.estimated]

    def throughput(self, model: str, batch_size: int, gpus: int, gpu_type: str = DEFAULT_GPU_TYPE) -> float:
        try:
            return self.table.throughput(model, batch_size, gpus, gpu_type)
        except UnknownThroughput as missing:
            key = (model, batch_size, gpus, gpu_type)
            estimate = self._estimates.get(key) or self._estimate(*key)
            if estimate is None:
                raise missing from None
            self._estimates[key] = estimate
            return estimate.rate

    def _estimate(self, model: str, batch_size: int, gpus: int, gpu_type: str) -> Estimate | None:
        listed = self.table.gangs(model, batch_size, gpu_type)
        fam = FAMILIES.get(model)
        if fam is None or not listed or gpus in listed or gpus < 1 or 0.0 in listed.values():
            return None
        if not fam.distributable:
            if 1 not in listed:
                return None
            basis = "the table's 1-GPU rate: does not train distributed"
            return Estimate(model, batch_size, gpus, gpu_type, listed[1], basis)
        below = [g for g in listed if g < gpus]
        anchor = max(below) if below else min(listed)
        try:
            ratio = self.fallback.throughput(model, batch_size, gpus, gpu_type) / self.fallback.throughput(
                model, batch_size, anchor, gpu_type
            )
        except UnknownThroughput:
            return None
        basis = f"the table's {anchor}-GPU rate x the {self.fallback.name} model's ratio {gpus}/{anchor}"
        return Estimate(model, batch_size, gpus, gpu_type, listed[anchor] * ratio, basis)


def estimates_among(
    tm: ThroughputModel, jobs: Iterable[tuple[str, int, int]], gpu_types: Iterable[str]
) -> tuple[Estimate, ...]:
    """Which rates of these (model, batch size, gpus) on these GPU types `tm` estimates (none for a plain table or
    the built-in model), asking it for each so that they are known before a run needs them."""
    if not isinstance(tm, TableWithFallback):
        return ()
    wanted = {(m, b, g, t) for m, b, g in jobs for t in gpu_types}
    for key in sorted(wanted):
        try:
            tm.throughput(*key)
        except UnknownThroughput:
            continue
    return tuple(e for e in tm.estimated if (e.model, e.batch_size, e.gpus, e.gpu_type) in wanted)


def require_gpu_types(tm: ThroughputModel, gpu_types: Iterable[str]) -> None:
    """Refuse a cluster with a GPU type `tm` has no rate for (an InputError naming the type and the table or model):
    no job could run on those GPUs, and a run would end in an error once a job is admitted, or, beside known types,
    leave them idle and every metric misleading. A model that does not say which types it knows is not checked."""
    known = getattr(tm, "gpu_types", None)
    if known is None:
        return
    missing = [t for t in dict.fromkeys(gpu_types) if t not in known]
    if missing:
        source = "the built-in throughput model" if tm.name == "builtin" else f"the throughput table {tm.name}"
        raise InputError(
            f"{source} has no rates for GPU type {', '.join(map(repr, missing))} of the cluster; it knows "
            f"{', '.join(known) or 'none'}: give --throughputs a table that lists "
            f"{'it' if len(missing) == 1 else 'them'}, or a --cluster of those types"
        )


def load_throughputs(path: str | Path | None, *, estimate_gangs: bool = True) -> ThroughputModel:
    """The table at `path` (answering gangs it lacks by estimation unless `estimate_gangs` is off), or the project's
    built-in model when no path is given."""
    from shockwave.workload_model.builtin_throughput import BuiltinThroughputs

    if path is None:
        return BuiltinThroughputs()
    table = TableThroughputs.from_json(path)
    return TableWithFallback(table, BuiltinThroughputs()) if estimate_gangs else table
