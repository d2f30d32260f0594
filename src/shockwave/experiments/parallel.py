"""Run cells side by side: a local process pool, or Ray tasks on a local or remote Ray cluster.

Results are handed back one by one as cells finish (so the caller can write each at once and an interrupted run
keeps them). A cell that raises comes back as its error message; the others go on. Ctrl-C stops the workers and
propagates as KeyboardInterrupt after the finished cells have been handed back. Nothing outlives the caller, even
killed with SIGKILL: pool workers die with it (Linux parent-death signal), progress travels on a plain queue (no
manager process), and a local Ray instance is torn down by a reaper (`shockwave.runtime.local_ray`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from shockwave.core.errors import InputError, require_extra
from shockwave.experiments.cell import Cell, run_cell
from shockwave.runtime.lifetime import die_with_parent

PROGRESS_INTERVAL_S = 0.25


@dataclass(frozen=True)
class Outcome:
    cell: Cell
    result: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class CellProgress:
    key: str
    now_s: float
    rounds: int
    finished_jobs: int
    total_jobs: int


OnProgress = Callable[[CellProgress], None]


def run_cells(
    cells: list[Cell],
    *,
    workers: int,
    ray: bool = False,
    address: str | None = None,
    on_start: Callable[[Cell], None] | None = None,
    on_progress: OnProgress | None = None,
) -> Iterator[Outcome]:
    if ray:
        yield from _on_ray(cells, address)
    else:
        yield from _on_pool(cells, max(1, workers), on_start, on_progress)


# -- local processes -------------------------------------------------------------------------------------------------
_updates: Any = None
"""In a pool worker: the queue progress goes to (None: nobody listens)."""


def _start_worker(updates: Any, parent: int) -> None:
    """A pool worker dies with the parent, leaves Ctrl-C to it (which stops the workers; otherwise each would report
    it as a failure), and reports progress on `updates`, a queue it inherits at its start."""
    global _updates
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _updates = updates


def _pooled(cell: Cell) -> tuple[dict[str, Any] | None, str | None]:
    return _guarded(cell, _updates)


def _reporting(cell: Cell, updates: Any) -> dict[str, Any]:
    last = [0.0]

    def report(progress: Any) -> None:
        now = time.monotonic()
        if updates is not None and (
            now - last[0] >= PROGRESS_INTERVAL_S or progress.finished_jobs == progress.total_jobs
        ):
            last[0] = now
            updates.put(
                CellProgress(cell.key, progress.now_s, progress.rounds, progress.finished_jobs, progress.total_jobs)
            )

    return run_cell(cell, report)


def _guarded(cell: Cell, updates: Any) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return _reporting(cell, updates), None
    except InputError as exc:
        return None, str(exc)
    except Exception as exc:  # a failed cell is reported, never allowed to stop the others
        return None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"


def _on_pool(
    cells: list[Cell], workers: int, on_start: Callable[[Cell], None] | None, on_progress: OnProgress | None
) -> Iterator[Outcome]:
    context = mp.get_context("spawn")
    updates = context.Queue() if on_progress is not None else None
    size = min(workers, len(cells)) or 1
    pool = context.Pool(size, initializer=_start_worker, initargs=(updates, os.getpid()))
    try:
        pending = {}
        for cell in cells:
            pending[cell.key] = (cell, pool.apply_async(_pooled, (cell,)))
        started: set[str] = set()
        while pending:
            _drain(updates, on_progress, on_start, pending, started)
            for key in [k for k, (_, job) in pending.items() if job.ready()]:
                cell, job = pending.pop(key)
                result, error = job.get()
                yield Outcome(cell, result, error)
            time.sleep(0.05)
        _drain(updates, on_progress, on_start, pending, started)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _drain(
    updates: Any,
    on_progress: OnProgress | None,
    on_start: Callable[[Cell], None] | None,
    pending: dict[str, Any],
    started: set[str],
) -> None:
    if updates is None:
        return
    while True:
        try:
            progress = updates.get_nowait()
        except queue.Empty:
            return
        if progress.key not in started and progress.key in pending:
            started.add(progress.key)
            if on_start is not None:
                on_start(pending[progress.key][0])
        if on_progress is not None:
            on_progress(progress)


# -- Ray ---------------------------------------------------------------------------------------------------------------
def _on_ray(cells: list[Cell], address: str | None) -> Iterator[Outcome]:
    """Ray schedules the tasks itself, so there is no per-cell progress, only cells finished."""
    require_extra("ray", "cluster", "--ray")
    import ray

    from shockwave.runtime.local_ray import LocalRay

    started_here = not ray.is_initialized()
    local: LocalRay | None = None
    if started_here:
        options = {"include_dashboard": False, "logging_level": "warning", "log_to_driver": False}
        if address is None:
            local = LocalRay(**options)
        else:
            ray.init(address=address, **options)
    refs: dict[Any, Cell] = {}
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_guarded)
        refs = {remote.remote(cell, None): cell for cell in cells}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            for ref in done:
                cell = refs.pop(ref)
                try:
                    result, error = ray.get(ref)
                except Exception as exc:  # the task's worker or node died
                    result, error = None, f"Ray task failed: {exc}"
                yield Outcome(cell, result, error)
    except BaseException:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    finally:
        if local is not None:
            local.close()
        elif started_here:
            ray.shutdown()
