"""`shockwave sweep`: a grid of workloads x cluster sizes x policies x seeds, resumable, locally or on Ray.

Cells already finished in the output folder (same inputs, same key) are kept and skipped; a failed cell is
recorded with its error and the others go on; the aggregated table and Fig. 9-style figures are made from every
finished cell of the sweep, also after an interruption.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from shockwave.core.errors import InputError, Interrupted
from shockwave.experiments import figures, store
from shockwave.experiments.cell import Cell
from shockwave.experiments.figures import HEADLINE
from shockwave.experiments.parallel import CellProgress, Outcome, run_cells
from shockwave.experiments.sweep_spec import Case, SweepSpec
from shockwave.io.text import CONFIG_LIMIT, THROUGHPUT_LIMIT, TRACE_LIMIT, read_text
from shockwave.policies.plugins import short_name
from shockwave.results.provenance import with_command

if TYPE_CHECKING:
    from shockwave.workload_model.throughput import ThroughputModel

log = logging.getLogger(__name__)
SPEC_FILE = "sweep.json"


@dataclass(frozen=True)
class SweepRun:
    cells: int
    reused: int
    computed: int
    failed: dict[str, str]
    incomplete: list[str]
    """Keys of finished cells whose simulation ended with jobs it never finished."""


@dataclass(frozen=True)
class _Workload:
    """One trace of a case, as its cells carry it: generated traces are already written to out/traces."""

    label: str
    text: str
    seed: int | None
    path: str | None
    extra: dict[str, Any]


def build_cells(spec: SweepSpec, out: Path) -> list[Cell]:
    """Every cell of the sweep; generated traces are written to out/traces (kept for the user)."""
    from shockwave.policies.plugins import source_of
    from shockwave.policies.registry import policy_info
    from shockwave.simulator.mechanics import preset
    from shockwave.workload_model.throughput import load_throughputs, require_gpu_types
    from shockwave.workload_model.trace import read_trace, require_gangs_fit

    _require_workloads_and_policies(spec)
    preset(spec.mechanics).with_round_seconds(spec.round_seconds)
    model = load_throughputs(spec.throughputs)
    throughputs_text = read_text(spec.throughputs, "throughput file", THROUGHPUT_LIMIT) if spec.throughputs else None
    configured = {policy: policy_info(policy).takes_config for policy in spec.policies}
    texts = {policy: source_of(policy) for policy in spec.policies}
    cells = []
    for case in spec.cases:
        cluster = case.spec(spec.gpus_per_server)
        require_gpu_types(model, cluster.types)
        config_path = case.config or spec.config
        config_text = _config_text(config_path)
        for workload in _workloads(spec, case, model, out):
            jobs = read_trace(workload.path, model) if workload.path else []
            require_gangs_fit(jobs, cluster.largest_pool, workload.path)
            for policy in spec.policies:
                shockwave = configured[policy]
                cells.append(
                    Cell(
                        label=workload.label,
                        trace_text=workload.text,
                        gpus=case.gpus,
                        cluster=case.cluster,
                        policy=policy,
                        mechanics=spec.mechanics,
                        round_seconds=spec.round_seconds,
                        gpus_per_server=spec.gpus_per_server,
                        seed=workload.seed,
                        trace_path=workload.path,
                        throughputs_name=str(spec.throughputs) if spec.throughputs else None,
                        throughputs_text=throughputs_text,
                        config_name=str(config_path) if shockwave and config_path else None,
                        config_text=config_text if shockwave else None,
                        extra=workload.extra,
                        policy_text=texts[policy],
                        window=spec.window,
                    )
                )
    return cells


def _require_workloads_and_policies(spec: SweepSpec) -> None:
    """An empty grid is a mistake in the invocation: say what to add rather than run nothing."""
    if not spec.cases:
        raise InputError(
            "the sweep names no workload: give traces (--trace) or generator parameters (--generate) "
            "with cluster sizes (--gpus), or [[case]] entries"
        )
    if not spec.policies:
        raise InputError("the sweep names no policy (--policies)")


def _config_text(path: Path | None) -> str | None:
    """A Shockwave config file's text, once it is known to be valid (a bad one fails the sweep, not each cell)."""
    from shockwave.policies.shockwave.config import ShockwaveConfig

    if path is None:
        return None
    ShockwaveConfig.from_json(path)
    return read_text(path, "config file", CONFIG_LIMIT)


def _workloads(spec: SweepSpec, case: Case, model: ThroughputModel, out: Path) -> list[_Workload]:
    """The case's trace file, or one generated trace per seed of the sweep."""
    if case.trace is not None:
        return [_Workload(case.trace.stem, read_text(case.trace, "trace", TRACE_LIMIT), None, str(case.trace), {})]
    return [_generated(case.generate or {}, seed, model, out) for seed in spec.seeds]


def _generated(parameters: dict[str, Any], seed: int, model: ThroughputModel, out: Path) -> _Workload:
    """A trace drawn with the case's generator parameters and `seed` (Gavel's generator for `style = "gavel"`),
    written to out/traces so that the user keeps it and each cell reads it as a file."""
    from shockwave.experiments.sweep_spec import gavel_workload
    from shockwave.workload_model.gavel_generator import generate_gavel
    from shockwave.workload_model.generator import GeneratorParams, generate
    from shockwave.workload_model.trace import write_trace

    table = dict(parameters)
    if table.get("style") == "gavel":
        workload = gavel_workload(table, seed)
        jobs, name = generate_gavel(workload, model), workload.file_name()
        about = {"style": "gavel", **asdict(workload), "jobs_per_hour": workload.jobs_per_hour}
    else:
        table.pop("style", None)
        params = GeneratorParams(**{k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}, seed=seed)
        jobs, name, about = generate(params, model), params.file_name(), asdict(params)
    path = out / "traces" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    write_trace(jobs, path)
    return _Workload(path.stem, read_text(path, "trace", TRACE_LIMIT), seed, str(path), {"generator": about})


class _CellBars:
    """The progress display of a sweep: an overall bar, and a bar per running cell while it runs."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.overall = progress.add_task("[bold]cells", total=total, note="")
        self.running: dict[str, TaskID] = {}

    def started(self, cell: Cell) -> None:
        """A bar for the cell, whose total is unknown until its first progress report."""
        self.running[cell.key] = self.progress.add_task(escape(f"  {_name(cell)}"), total=None, note="")

    def advanced(self, update: CellProgress) -> None:
        """The cell's jobs finished so far and its simulated time (reports of cells without a bar are dropped)."""
        if update.key in self.running:
            self.progress.update(
                self.running[update.key],
                completed=update.finished_jobs,
                total=update.total_jobs,
                note=f"t = {update.now_s / 3600:5.2f} h",
            )

    def finished(self, cell: Cell) -> None:
        """The cell's bar goes, and the overall bar counts it (failed or not)."""
        if cell.key in self.running:
            self.progress.remove_task(self.running.pop(cell.key))
        self.progress.advance(self.overall)


def _progress(console: Console, disable: bool) -> Progress:
    """The bars' columns: what is running, how far (jobs finished of all), simulated time, wall time."""
    return Progress(
        TextColumn("{task.description:<60}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        console=console,
        disable=disable,
    )


def _to_run(out: Path, cells: list[Cell]) -> list[Cell]:
    """The cells without a usable result in `out` (a damaged one is reported, and run again)."""
    finished, damaged = store.reusable_cells(out, [c.key for c in cells])
    for warning in damaged:
        log.warning("%s", warning)
    return [c for c in cells if c.digest not in finished]


def _record(outcome: Outcome, out: Path, command: list[str] | None, failed: dict[str, str]) -> dict[str, Any] | None:
    """Keep a cell's outcome in `out`: its result (any earlier error of it dropped), or its error, also added to
    `failed`; returns the result, or None when the cell failed."""
    key = outcome.cell.key
    if outcome.result is None:
        failed[key] = outcome.error or "failed"
        store.write_json(store.error_path(out, key), {"cell": outcome.cell.describe(), "error": failed[key]})
        log.error("cell %s failed: %s", key, failed[key].splitlines()[0])
        return None
    result = with_command(outcome.result, command) if command is not None else outcome.result
    store.write_json(store.cell_path(out, key), result)
    store.error_path(out, key).unlink(missing_ok=True)
    return result


def run_sweep(
    spec: SweepSpec,
    out: Path,
    *,
    workers: int,
    ray: bool,
    address: str | None,
    console: Console,
    show_progress: bool = True,
    command: list[str] | None = None,
    table: Console | None = None,
) -> SweepRun:
    """Run the cells not already finished in `out`; `command` is recorded in each new cell's provenance. Progress
    goes to `console`, the summary table to `table` (default: `console`), as compare prints its table."""
    with store.claimed(out, "sweep"):
        cells = build_cells(spec, out)
        store.write_json(out / SPEC_FILE, {"spec": spec.to_json(), "cells": [c.describe() for c in cells]})
        todo = _to_run(out, cells)
        reused = len(cells) - len(todo)
        console.print(
            f"{len(cells)} cells: {reused} already finished in {out} (kept), {len(todo)} to run"
            + (" on Ray" if ray else _on_processes(min(workers, max(len(todo), 1)))),
            markup=False,
            highlight=False,
        )
        lines = show_progress and not console.is_terminal  # logs and pipes: a line per finished cell, not bars
        failed: dict[str, str] = {}
        computed = 0
        try:
            with _progress(console, disable=not show_progress or lines) as progress:
                bars = _CellBars(progress, len(todo))
                for outcome in run_cells(
                    todo, workers=workers, ray=ray, address=address, on_start=bars.started, on_progress=bars.advanced
                ):
                    bars.finished(outcome.cell)
                    result = _record(outcome, out, command, failed)
                    if result is None:
                        continue
                    computed += 1
                    if lines:
                        console.print(
                            f"[{computed + len(failed)}/{len(todo)}] {_name(outcome.cell)}: {headline(result)}",
                            markup=False,
                            highlight=False,
                        )
        except KeyboardInterrupt:
            kept = reused + computed
            raise Interrupted(
                f"{kept} of {len(cells)} cells are kept in {out / store.CELLS}; "
                f"the same command runs the other {len(cells) - kept}"
            ) from None
        finally:
            results = store.read_cells(out, [c.key for c in cells])
            render_results(out, table or console, results, len(cells))
        incomplete = [r["cell"]["key"] for r in results if not r["complete"]]
        return SweepRun(len(cells), reused, computed, failed, incomplete)


def _name(cell: Cell) -> str:
    seed = f" seed {cell.seed}" if cell.seed is not None else ""
    return f"{cell.label[:30]} {cell.gpus} GPUs {short_name(cell.policy)}{seed}"


def headline(result: dict[str, Any]) -> str:
    """One finished simulation in a line (for logs and pipes)."""
    text = (
        f"makespan {result['makespan_s']:.0f} s, avg JCT {result['avg_jct_s']:.0f} s, "
        f"worst rho {result['worst_ftf']:.2f}, {result['wall_seconds']:.1f} s"
    )
    return text if result["complete"] else f"{text}; {len(result['unfinished_jobs'])} jobs unfinished"


def jobs_per_hour(result: dict[str, Any]) -> float | None:
    """The input job rate of a Gavel-style generated workload (None for other workloads)."""
    return (result.get("cell") or {}).get("generator", {}).get("jobs_per_hour")


def aggregate(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (cluster, input job rate, policy): mean, min and max of each headline metric over seeds and workloads
    (the rate only for Gavel-style generated workloads: a load study)."""
    groups: dict[tuple[int, str, float, str], list[dict[str, Any]]] = {}
    for r in results:
        rate = jobs_per_hour(r)
        key = (r["gpus"], r.get("cluster") or f"{r['gpus']} GPUs", -1.0 if rate is None else rate, r["policy"])
        groups.setdefault(key, []).append(r)
    rows = []
    for (gpus, cluster, rate, policy), members in sorted(groups.items()):
        row: dict[str, Any] = {
            "gpus": gpus,
            "cluster": cluster,
            **({"jobs_per_hour": rate} if rate >= 0 else {}),
            "policy": policy,
            "cells": len(members),
            "workloads": " ".join(sorted({m["cell"]["label"] for m in members})),
            "incomplete_cells": sum(not m["complete"] for m in members),
        }
        for key, *_ in HEADLINE:
            values = np.array([m[key] for m in members], dtype=float)
            row[f"{key}_mean"], row[f"{key}_min"], row[f"{key}_max"] = values.mean(), values.min(), values.max()
        rows.append(row)
    return rows


def cell_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = (
        "makespan_s",
        "avg_jct_s",
        "worst_ftf",
        "unfair_fraction",
        "utilization",
        "num_rounds",
        "makespan_lower_bound_s",
        "complete",
        "wall_seconds",
    )
    return [
        {
            "key": r["cell"]["key"],
            "label": r["cell"]["label"],
            "gpus": r["gpus"],
            "policy": r["policy"],
            "seed": r["cell"]["seed"],
            **{k: r[k] for k in keys},
        }
        for r in results
    ]


def _cell_keys(path: Path) -> list[str]:
    """The keys of the cells a sweep.json lists, or an InputError when it is not one that `sweep` wrote."""
    raw = store.read_json(path)
    cells = raw.get("cells") if isinstance(raw, dict) else None
    if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("key"), str) for c in cells):
        raise InputError('expected {"cells": [{"key": "...", ...}, ...]}, as `shockwave sweep` writes it', path=path)
    return [c["key"] for c in cells]


def render(out: Path, console: Console) -> list[Path]:
    """Table, results.json/csv, summary.csv and figures from the finished cells of the sweep in `out`."""
    keys = _cell_keys(out / SPEC_FILE)
    results = store.read_cells(out, keys)
    if not results:
        console.print(f"no finished cells in {out} yet", markup=False, highlight=False)
        return []
    return render_results(out, console, results, len(keys))


def render_results(out: Path, console: Console, results: list[dict[str, Any]], total: int) -> list[Path]:
    """The same from cells already read (`total`: the sweep's cell count)."""
    if not results:
        return []
    rows = aggregate(results)
    store.write_json(out / "results.json", results)
    store.write_csv(out / "results.csv", cell_rows(results))
    store.write_csv(out / "summary.csv", rows)
    title = f"Sweep in {out.name}: {len(results)} cells, {results[0]['mechanics']} mechanics"
    paths = figures.scale_lines([r for r in rows if "jobs_per_hour" not in r], out / "figures" / "scale", title)
    load = [r for r in rows if "jobs_per_hour" in r]
    if load:
        paths += figures.load_lines(load, out / "figures" / "load", title)
    print_summary(console, rows, len(results), total)
    return paths


def print_summary(console: Console, rows: list[dict[str, Any]], finished: int, total: int) -> None:
    table = Table(
        title=f"sweep: {finished} of {total} cells finished (mean, and min-max over seeds and workloads)",
        title_justify="left",
    )
    for column in ("cluster", "policy", "cells", "makespan s", "avg JCT s", "worst rho", "unfair %"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for row in rows:
        incomplete = row.get("incomplete_cells", 0)
        table.add_row(
            escape(str(row.get("cluster", row["gpus"]))),
            escape(row["policy"]),
            str(row["cells"]) + (f" [red]({incomplete} with unfinished jobs)[/red]" if incomplete else ""),
            _spread(row, "makespan_s", "{:.0f}"),
            _spread(row, "avg_jct_s", "{:.0f}"),
            _spread(row, "worst_ftf", "{:.2f}"),
            _spread(row, "unfair_fraction", "{:.1f}", 100),
        )
    console.print(table)


def _spread(row: dict[str, Any], key: str, fmt: str, scale: float = 1.0) -> str:
    mean, low, high = (row[f"{key}_{s}"] * scale for s in ("mean", "min", "max"))
    text = fmt.format(mean)
    return text if low == high else f"{text} ({fmt.format(low)}-{fmt.format(high)})"


def _on_processes(count: int) -> str:
    return f" on {count} local process" + ("" if count == 1 else "es")
