"""Sia's measured per-application profiles: a folder per application with, for each GPU type T,
`placements-T.csv` and `scalability-T.csv` (seconds per optimizer step, and of it in gradient synchronisation, per
placement and per-GPU batch size) and, shared by the types, `validation-B.csv` per global batch size B (one line per
epoch: cumulative progress, iterations, and the gradient's squared norm and variance in that epoch).

A placement is the GPUs a job uses on each node, written as digits (`44`: two nodes of 4). Progress is counted in
iterations at the application's smallest profiled batch size, so a step at batch M makes `gain` of it, which
depends on the gradient noise (Pollux's statistical efficiency, `Application.gain`).

Per-application constants that the artifact keeps in code, not in these files (`applications.py` and
`simulator_config.py` at aaf7a0d): the seconds a restart costs (checkpoint and restore) and a calibration slowdown
that divides every measured rate; an application they do not list gets 30 s and 1.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.interpolate import LinearNDInterpolator
from scipy.spatial import QhullError

from shockwave.core.errors import InputError
from shockwave.io.text import TRACE_LIMIT, read_text
from shockwave.workload_model.sia.table import Row, rows
from shockwave.workload_model.sia.workload import APPLICATION

RESTART_S = {
    "bert": 120.0,
    "cifar10": 50.0,
    "deepspeech2": 25.0,
    "imagenet": 250.0,
    "yolov3": 80.0,
    "ncf": 15.0,
    "gpt_pmp": 30.0,
}
SLOWDOWN = {"bert": 1.2, "cifar10": 1.8, "deepspeech2": 1.2, "imagenet": 1.2, "yolov3": 1.2, "ncf": 1.5, "gpt_pmp": 1.0}
DEFAULT_RESTART_S = 30.0
MAX_NODES_INTERPOLATED = 16
"""Placements over more nodes are read from the scalability fit at 16 (the artifact's largest profiled count)."""

_PLACEMENTS = re.compile(r"placements-(.+)\.csv")
_VALIDATION = re.compile(r"validation-(\d+)\.csv")
_SCALABILITY = re.compile(r"scalability-(.+)\.csv")


@dataclass(frozen=True)
class StepTime:
    local_bsz: float
    step_s: float
    sync_s: float


@dataclass(frozen=True)
class Epoch:
    progress: float
    """Cumulative progress at the epoch's end."""
    grad_sqr: float
    grad_var: float


@dataclass(frozen=True)
class TypeProfile:
    gpu_type: str
    placements: dict[tuple[int, ...], tuple[StepTime, ...]]
    """Canonical placement (`canonical`) -> its rows by per-GPU batch size."""
    scalability: tuple[tuple[int, int, StepTime], ...]
    """(nodes, replicas, row) of the larger shapes."""

    def step(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float] | None:
        """(seconds per step, of which synchronisation) at `placement` and per-GPU batch `local_bsz`: interpolated
        along the batch among the placement's own rows, else over (nodes, replicas, batch) among every row; None
        outside what was measured. Worked out once per placement and batch (jobs ask again every round)."""
        key = (canonical(placement), local_bsz)
        if key not in self._steps:
            self._steps[key] = self._interpolated(*key)
        return self._steps[key]

    @functools.cached_property
    def _steps(self) -> dict[tuple[tuple[int, ...], float], tuple[float, float] | None]:
        return {}

    def _interpolated(self, placement: tuple[int, ...], local_bsz: float) -> tuple[float, float] | None:
        own = self.placements.get(placement)
        if own is not None:
            sizes = [r.local_bsz for r in own]
            if not sizes[0] <= local_bsz <= sizes[-1]:
                return None
            step = float(np.interp(local_bsz, sizes, [r.step_s for r in own]))
            return step, float(np.interp(local_bsz, sizes, [r.sync_s for r in own]))
        try:
            value = self._fit(np.array([(*_shape(placement), local_bsz)], dtype=float))[0]
        except QhullError:  # too few shapes measured to interpolate between them
            return None
        if not np.isfinite(value).all():
            return None
        return float(value[0]), float(value[1])

    def max_local_bsz(self, placement: tuple[int, ...]) -> float:
        """The largest per-GPU batch measured at `placement` (else on shapes at least as large)."""
        own = self.placements.get(canonical(placement))
        if own is not None:
            return own[-1].local_bsz
        nodes, replicas = _shape(placement)
        larger = [r.local_bsz for n, k, r in self._points if n >= nodes and k >= replicas]
        return max(larger, default=0.0)

    @functools.cached_property
    def local_bsz_range(self) -> tuple[float, float]:
        """Smallest and largest per-GPU batch measured on this type."""
        sizes = [r.local_bsz for rows_ in self.placements.values() for r in rows_]
        return min(sizes), max(sizes)

    def max_local_bsz_at(self, gpus: int) -> float | None:
        """The largest per-GPU batch measured on any placement of `gpus` GPUs (None: no such placement)."""
        return self._largest_by_gpus.get(gpus)

    @functools.cached_property
    def _largest_by_gpus(self) -> dict[int, float]:
        found: dict[int, float] = {}
        for key, rows_ in self.placements.items():
            found[sum(key)] = max(found.get(sum(key), 0.0), rows_[-1].local_bsz)
        return found

    @functools.cached_property
    def one_gpu_throughput(self) -> float:
        """Samples per second on one GPU as Sia projects between types: the largest per-GPU batch over the
        largest step time among the one-GPU measurements (the two maxima taken apart, as the artifact does);
        0 where one GPU was not measured."""
        single = [r for key, rows_ in self.placements.items() if sum(key) == 1 for r in rows_]
        return max(r.local_bsz for r in single) / max(r.step_s for r in single) if single else 0.0

    @functools.cached_property
    def _points(self) -> list[tuple[int, int, StepTime]]:
        """Every measured (nodes, replicas, row): the placements' rows averaged per shape and batch, then the
        scalability rows."""
        by_shape: dict[tuple[int, int, float], list[StepTime]] = {}
        for key, rows_ in self.placements.items():
            shape = (len(key), sum(key))
            for r in rows_:
                by_shape.setdefault((*shape, r.local_bsz), []).append(r)
        mean = [
            (n, k, StepTime(b, float(np.mean([r.step_s for r in rs])), float(np.mean([r.sync_s for r in rs]))))
            for (n, k, b), rs in sorted(by_shape.items())
        ]
        return mean + list(self.scalability)

    @functools.cached_property
    def _fit(self) -> LinearNDInterpolator:
        points = self._points
        x = np.array([[n, k, r.local_bsz] for n, k, r in points], dtype=float)
        y = np.array([[r.step_s, r.sync_s] for _, _, r in points], dtype=float)
        return LinearNDInterpolator(x, y)


@dataclass(frozen=True)
class Application:
    name: str
    types: dict[str, TypeProfile]
    validation: dict[int, tuple[Epoch, ...]]
    """Global batch size -> one entry per epoch."""
    restart_s: float
    slowdown: float

    @functools.cached_property
    def init_batch(self) -> int:
        return min(self.validation)

    @property
    def max_batch(self) -> int:
        return max(self.validation)

    @property
    def max_epochs(self) -> int:
        return min(len(epochs) for epochs in self.validation.values())

    def epoch_end(self, epoch: int) -> float:
        """Progress at the end of `epoch` (0-based): the least any batch size's file records."""
        return min(epochs[epoch].progress for epochs in self.validation.values())

    @functools.cached_property
    def epoch_ends(self) -> tuple[float, ...]:
        """Progress at each epoch's end."""
        return tuple(self.epoch_end(epoch) for epoch in range(self.max_epochs))

    @property
    def total_progress(self) -> float:
        return self.epoch_end(self.max_epochs - 1)

    def grad(self, batch: float, epoch: int) -> tuple[float, float]:
        """The gradient's squared norm and variance in `epoch` at global batch `batch`, interpolated between the
        profiled batch sizes around it (the nearest one outside them)."""
        sizes = sorted(self.validation)
        batch = min(max(batch, sizes[0]), sizes[-1])
        sqr = float(np.interp(batch, sizes, [self.validation[b][epoch].grad_sqr for b in sizes]))
        var = float(np.interp(batch, sizes, [self.validation[b][epoch].grad_var for b in sizes]))
        return sqr, var

    def gain(self, batch: float, epoch: int) -> float:
        """Progress one step at global batch `batch` makes in `epoch` (`statistical_gain` of its gradient)."""
        sizes = sorted(self.validation)
        return statistical_gain(*self.grad(batch, epoch), min(max(batch, sizes[0]), sizes[-1]) / self.init_batch)


def statistical_gain(sqr: float, var: float, scale: float) -> float:
    """Progress of a step at `scale` times the smallest batch, in steps at the smallest batch, given the gradient's
    squared norm and variance: (var + sqr) / (var / scale + sqr), between 1 and `scale` (Pollux's statistical
    efficiency times the scale)."""
    return (var + sqr) / (var / scale + sqr) if var / scale + sqr > 0 else scale


def packed(gpus: int, per_node: int) -> tuple[int, ...]:
    """GPUs per node of a gang on whole nodes first, then the rest on one more."""
    whole, rest = divmod(gpus, per_node)
    return (per_node,) * whole + ((rest,) if rest else ())


def canonical(placement: Iterable[int]) -> tuple[int, ...]:
    """A placement's key: its non-zero GPU counts per node, rotated to the smallest rotation (a placement on
    nodes 4, 4, 2 is the same measurement as 2, 4, 4 taken round the ring)."""
    counts = tuple(g for g in placement if g > 0)
    return min((counts[i:] + counts[:i] for i in range(len(counts))), default=())


def _shape(placement: tuple[int, ...]) -> tuple[int, int]:
    """(nodes, GPUs) of a placement as the interpolation reads it: nodes beyond MAX_NODES_INTERPOLATED count as
    that many."""
    return min(sum(1 for g in placement if g > 0), MAX_NODES_INTERPOLATED), sum(placement)


def load_profiles(folder: str | Path, applications: Iterable[str]) -> dict[str, Application]:
    """The profiles of `applications` under `folder` (one subfolder each)."""
    folder = Path(folder)
    require_folder(folder)
    loaded = {}
    for name in sorted(set(applications)):
        app = folder / name
        if not app.is_dir():
            known = sorted(p.name for p in folder.iterdir() if p.is_dir())
            raise InputError(f"no profile for application {name!r} (found: {', '.join(known) or 'none'})", path=app)
        loaded[name] = load_application(app)
    return loaded


def profile_files(folder: str | Path, applications: Iterable[str]) -> dict[str, str]:
    """The text of every profile file of `applications` under `folder`, by path relative to it (what a simulation
    elsewhere needs to read the same profiles)."""
    folder = Path(folder)
    require_folder(folder)
    found = {}
    for name in sorted(set(applications)):
        for path in sorted((folder / name).glob("*.csv")) if (folder / name).is_dir() else ():
            if (
                _PLACEMENTS.fullmatch(path.name)
                or _VALIDATION.fullmatch(path.name)
                or _SCALABILITY.fullmatch(path.name)
            ):
                found[f"{name}/{path.name}"] = read_text(path, "Sia profile file", TRACE_LIMIT)
    return found


def write_profile_files(files: dict[str, str], folder: Path) -> Path:
    """`profile_files` written back under `folder` (each an application's folder and a file name, nothing else)."""
    for relative, text in files.items():
        application, _, name = relative.partition("/")
        known = _PLACEMENTS, _SCALABILITY, _VALIDATION
        if (
            not APPLICATION.fullmatch(application)
            or application in (".", "..")
            or not any(pattern.fullmatch(name) and APPLICATION.fullmatch(name) for pattern in known)
        ):
            raise InputError(f"a profile file must be APPLICATION/NAME.csv, got {relative!r}")
        (folder / application).mkdir(parents=True, exist_ok=True)
        (folder / application / name).write_text(text)
    return folder


def require_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise InputError("Sia profile folder not found (give the artifact's `traces/` folder)", path=folder)


def load_application(folder: Path) -> Application:
    types = {}
    for path in sorted(folder.glob("placements-*.csv")):
        match = _PLACEMENTS.fullmatch(path.name)
        if match is None:
            continue
        gpu_type = match.group(1)
        scalability = folder / f"scalability-{gpu_type}.csv"
        types[gpu_type] = TypeProfile(
            gpu_type, _placements(path), _scalability(scalability) if scalability.exists() else ()
        )
    if not types:
        raise InputError("no placements-<gpu type>.csv in the application's profile folder", path=folder)
    validation = {}
    for path in sorted(folder.glob("validation-*.csv")):
        match = _VALIDATION.fullmatch(path.name)
        if match is not None and int(match.group(1)) > 0:
            validation[int(match.group(1))] = _validation(path)
    if not validation:
        raise InputError("no validation-<batch size>.csv in the application's profile folder", path=folder)
    name = folder.name
    return Application(name, types, validation, RESTART_S.get(name, DEFAULT_RESTART_S), SLOWDOWN.get(name, 1.0))


def _step(row: Row) -> StepTime:
    step = row.number("step_time", positive=True)
    sync = row.number("sync_time")
    if sync > step:
        raise InputError(
            f"sync_time {sync} is more than step_time {step}", path=row.path, line=row.line, field="sync_time"
        )
    return StepTime(row.number("local_bsz", positive=True), step, sync)


def _placements(path: Path) -> dict[tuple[int, ...], tuple[StepTime, ...]]:
    by_placement: dict[tuple[int, ...], list[StepTime]] = {}
    for row in rows(path, "Sia placements file", ("placement", "local_bsz", "step_time", "sync_time")):
        digits = row.text("placement")
        if not digits.isdigit() or "0" in digits or len(digits) > 64:
            raise InputError(
                f"expected GPUs per node as digits 1-9 (e.g. 44), got {digits!r}",
                path=path,
                line=row.line,
                field="placement",
            )
        by_placement.setdefault(canonical(int(d) for d in digits), []).append(_step(row))
    return {key: tuple(sorted(steps, key=lambda r: r.local_bsz)) for key, steps in by_placement.items()}


def _scalability(path: Path) -> tuple[tuple[int, int, StepTime], ...]:
    columns = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
    found = []
    for row in rows(path, "Sia scalability file", columns):
        nodes, replicas = row.whole("num_nodes"), row.whole("num_replicas")
        if replicas < nodes:
            raise InputError(
                f"{replicas} replicas on {nodes} nodes: at least one per node",
                path=path,
                line=row.line,
                field="num_replicas",
            )
        found.append((nodes, replicas, _step(row)))
    return tuple(found)


def _validation(path: Path) -> tuple[Epoch, ...]:
    epochs: list[Epoch] = []
    for row in rows(path, "Sia validation file", ("progress", "grad_sqr", "grad_var")):
        progress = row.number("progress", positive=True)
        if epochs and progress < epochs[-1].progress:
            raise InputError(
                "progress must not decrease from one epoch to the next", path=path, line=row.line, field="progress"
            )
        epochs.append(Epoch(progress, row.number("grad_sqr"), row.number("grad_var")))
    return tuple(epochs)
