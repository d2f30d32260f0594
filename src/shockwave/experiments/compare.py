"""`shockwave compare`: several policies on one trace and cluster, side by side, in parallel processes.

Every input is checked before anything runs. Each policy's result is written as it finishes
(DIR/<policy>/result.json, and DIR/results.json / results.csv rewritten), so an interrupted comparison keeps what it
finished; the figures are drawn at the end, or later with `shockwave report DIR`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError, Interrupted
from shockwave.experiments import store
from shockwave.experiments.cell import Cell
from shockwave.experiments.parallel import CellProgress, run_cells
from shockwave.experiments.store import claimed, write_comparison
from shockwave.experiments.sweep import headline
from shockwave.io.text import CONFIG_LIMIT, THROUGHPUT_LIMIT, TRACE_LIMIT, read_text
from shockwave.policies.plugins import short_name, source_of
from shockwave.policies.registry import canonical_names, policy_info
from shockwave.results.provenance import with_command

if TYPE_CHECKING:
    from shockwave.workload_model.job import Job
    from shockwave.workload_model.profile import JobProfile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompareRequest:
    trace: Path
    gpus: int | None
    policies: list[str]
    throughputs: Path | None = None
    config: Path | None = None
    mechanics: str | None = None
    """A preset's name (None: the trace format's own, `preset`)."""
    round_seconds: float | None = None
    """None: the mechanics preset's."""
    gpus_per_server: int = 1
    cluster: str | None = None
    """GPU pools by type (`--cluster`), instead of `gpus` GPUs of the default type."""
    trace_format: str = "auto"
    profiles: Path | None = None
    """Sia's profile folder, with trace_format "sia"."""


def build_cells(request: CompareRequest) -> list[Cell]:
    """One cell per policy, after checking the trace, throughputs, config and names (InputError on any problem)."""
    from shockwave.policies.shockwave.config import ShockwaveConfig
    from shockwave.simulator.mechanics import preset
    from shockwave.simulator.run import TRACE_FORMATS
    from shockwave.workload_model.profile import load_workload
    from shockwave.workload_model.summary import makespan_lower_bound
    from shockwave.workload_model.throughput import require_gpu_types
    from shockwave.workload_model.trace import require_gangs_fit

    policies = canonical_names(request.policies)
    if not policies:
        raise InputError("--policies names no policy")
    mechanics = preset(request.mechanics, request.trace_format)
    if request.round_seconds is not None:
        mechanics = mechanics.with_round_seconds(request.round_seconds)
    cluster = ClusterSpec.from_options(request.gpus, request.cluster, request.gpus_per_server)
    if request.trace_format not in TRACE_FORMATS:
        raise InputError(f"unknown trace format {request.trace_format!r}; choose {' or '.join(TRACE_FORMATS)}")
    if request.trace_format == "sia":
        jobs, profiles, texts = _sia_inputs(request, cluster)
    else:
        if request.profiles is not None:
            raise InputError("--profiles is the folder of Sia's profiles: it goes with --trace-format sia")
        tm, jobs, profiles = load_workload(request.trace, request.throughputs)
        require_gpu_types(tm, cluster.types)
        texts = ()
    require_gangs_fit(jobs, cluster.largest_pool, request.trace)
    mechanics.require_rounds(makespan_lower_bound(jobs, profiles, cluster.gpus))
    config_text = None
    if request.config is not None:
        ShockwaveConfig.from_json(request.config)
        config_text = read_text(request.config, "config file", CONFIG_LIMIT)
    throughputs_text = (
        read_text(request.throughputs, "throughput file", THROUGHPUT_LIMIT) if request.throughputs else None
    )
    trace_text = read_text(request.trace, "trace", TRACE_LIMIT)
    return [
        Cell(
            label=request.trace.stem,
            trace_text=trace_text,
            gpus=cluster.gpus,
            cluster=request.cluster,
            policy=policy,
            mechanics=mechanics.name,
            round_seconds=mechanics.round_seconds,
            gpus_per_server=request.gpus_per_server,
            trace_path=str(request.trace),
            throughputs_name=str(request.throughputs) if request.throughputs else None,
            throughputs_text=throughputs_text,
            config_name=str(request.config) if request.config and configured else None,
            config_text=config_text if configured else None,
            policy_text=source_of(policy),
            trace_format=request.trace_format,
            profiles_name=str(request.profiles) if request.profiles else None,
            profile_texts=texts,
        )
        for policy, configured in ((p, policy_info(p).takes_config) for p in policies)
    ]


def _sia_inputs(
    request: CompareRequest, cluster: ClusterSpec
) -> tuple[list[Job], list[JobProfile], tuple[tuple[str, str], ...]]:
    """Sia's workload and profiles checked as `simulate` reads them, and the profile files its cells carry."""
    from shockwave.workload_model.sia.profiles import profile_files
    from shockwave.workload_model.sia.rigid import read_sia_workload

    if request.profiles is None:
        raise InputError("--trace-format sia needs --profiles DIR (the `traces/` folder of Sia's simulator)")
    if request.throughputs is not None:
        raise InputError("--trace-format sia takes its rates from --profiles: no --throughputs")
    jobs, profiles, _ = read_sia_workload(request.trace, request.profiles, cluster)
    applications = {job.model for job in jobs}  # an imported job's model is its application
    return jobs, profiles, tuple(sorted(profile_files(request.profiles, applications).items()))


def compare(
    request: CompareRequest,
    out: Path,
    *,
    workers: int,
    console: Console,
    show_progress: bool = True,
    command: list[str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Results in the requested policy order, and the errors of policies that failed; `command` is recorded in
    each result's provenance."""
    cells = build_cells(request)
    with claimed(out, "comparison", cells[0].comparison_identity()):
        try:
            return _compare(cells, out, workers, console, show_progress, command)
        except KeyboardInterrupt:
            finished = len(store.read_json(out / "results.json")) if (out / "results.json").exists() else 0
            raise Interrupted(
                f"{finished} of {len(cells)} policies finished and are kept in {out / 'results.json'}"
            ) from None


def _compare(
    cells: list[Cell], out: Path, workers: int, console: Console, show_progress: bool, command: list[str] | None
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    order = [cell.policy for cell in cells]
    results: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    lines = show_progress and not console.is_terminal  # logs and pipes: a line per finished policy, not bars
    with Progress(
        TextColumn("{task.description:<24}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs"),
        TextColumn("{task.fields[clock]}"),
        TimeElapsedColumn(),
        console=console,
        disable=not show_progress or lines,
        transient=False,
    ) as progress:
        tasks = {cell.key: progress.add_task(short_name(cell.policy), total=None, clock="waiting") for cell in cells}

        def on_progress(update: CellProgress) -> None:
            progress.update(
                tasks[update.key],
                completed=update.finished_jobs,
                total=update.total_jobs,
                clock=f"t = {update.now_s / 3600:5.2f} h, {update.rounds} rounds",
            )

        for outcome in run_cells(cells, workers=workers, on_progress=on_progress):
            task = tasks[outcome.cell.key]
            if outcome.result is None:
                errors[outcome.cell.policy] = outcome.error or "failed"
                progress.update(task, clock="[red]failed[/red]")
                log.error("%s failed: %s", outcome.cell.policy, outcome.error)
                continue
            result = with_command(outcome.result, command) if command is not None else outcome.result
            results[outcome.cell.policy] = result
            progress.update(
                task,
                completed=len(result["jobs"]),
                total=len(result["jobs"]),
                clock=f"done in {result['wall_seconds']:.1f} s",
            )
            write_comparison(out, [results[p] for p in order if p in results])
            if lines:
                console.print(f"{outcome.cell.policy}: {headline(result)}", markup=False, highlight=False)
    return [results[p] for p in order if p in results], errors


def render_comparison(out: Path, console: Console) -> list[Path]:
    """Table and figures from a comparison folder's results.json."""
    from shockwave.experiments.figures import comparison_figures
    from shockwave.experiments.store import read_json
    from shockwave.results.report import check_results, print_comparison

    path = out / "results.json"
    results = check_results(read_json(path), path)
    print_comparison(console, results)
    return comparison_figures(results, out / "figures")
