"""`shockwave trace`: generate, check and convert traces."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from shockwave.cli.common import (
    ClusterOpt,
    ThroughputsOpt,
    err,
    out,
    parse_floats,
)
from shockwave.core.errors import InputError
from shockwave.io.atomic import ensure_writable_file
from shockwave.workload_model.gavel_generator import GavelWorkload, generate_gavel
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.profile import load_workload
from shockwave.workload_model.summary import job_records, summarize
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import TraceJob, require_gangs_fit, write_trace

app = typer.Typer(help="Generate and inspect traces.", no_args_is_help=True, rich_markup_mode=None)


# Options of `generate` alone.
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="Output file; default: the conventional name (every knob in it) in the current folder.",
    ),
]
StyleOpt = Annotated[
    str,
    typer.Option(
        "--style", help="shockwave: the Shockwave artifact's adaptive jobs; gavel: Gavel's Philly-derived jobs."
    ),
]
LamOpt = Annotated[
    float | None, typer.Option("--lam", help="Mean inter-arrival time (seconds); default 40 (shockwave style).")
]
JobsPerHourOpt = Annotated[
    float | None, typer.Option("--jobs-per-hour", help="Arrival rate instead of --lam (3600 / lam).")
]
MultiGpuOpt = Annotated[bool, typer.Option("--multi-gpu", help="Gavel style: gangs of 2, 4 and 8 GPUs (Philly's mix).")]
MultiPriorityOpt = Annotated[
    bool, typer.Option("--multi-priority", help="Gavel style: a fifth of the jobs get priority weight 5.")
]
SlosOpt = Annotated[
    bool,
    typer.Option("--slos", help="Gavel style: SLOs of 1.2, 2 or 10 x each job's duration (the reference's draw)."),
]


@app.command("generate")
def trace_generate(
    output: OutputOpt = None,
    style: StyleOpt = "shockwave",
    jobs: Annotated[int, typer.Option("--jobs", help="Number of jobs.")] = 120,
    min_hours: Annotated[float, typer.Option("--min-hours", help="Shortest candidate duration (hours).")] = 0.2,
    max_hours: Annotated[float, typer.Option("--max-hours", help="Longest candidate duration (hours).")] = 5.0,
    num_durations: Annotated[int, typer.Option("--num-durations", help="Evenly spaced candidate durations.")] = 100,
    lam: LamOpt = None,
    jobs_per_hour: JobsPerHourOpt = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed; default 25 (shockwave), 0 (gavel).")] = None,
    mode_mix: Annotated[str, typer.Option("--mode-mix", help="P(static),P(accordion),P(gns).")] = "0,0.5,0.5",
    gpu_mix: Annotated[str, typer.Option("--gpu-mix", help="P(1),P(2),P(4),P(8) GPUs per job.")] = "0.6,0.3,0.09,0.01",
    static: Annotated[bool, typer.Option("--static", help="Gavel style: every job arrives at time 0.")] = False,
    multi_gpu: MultiGpuOpt = False,
    multi_priority: MultiPriorityOpt = False,
    slos: SlosOpt = False,
    throughputs: ThroughputsOpt = None,
) -> None:
    """Generate a synthetic trace with a reference generator's sampling, so its job stream regenerates exactly."""
    lam = _mean_gap(lam, jobs_per_hour)
    tm = load_throughputs(throughputs)
    make: Callable[[], list[TraceJob]]
    if style == "gavel":
        workload = _gavel_workload(jobs, lam, seed, static, multi_gpu, multi_priority, slos)
        default, header = workload.file_name(), workload.header()
        make = partial(generate_gavel, workload, tm)
    elif style == "shockwave":
        if static or multi_gpu or multi_priority or slos:
            raise InputError("--static, --multi-gpu, --multi-priority and --slos belong to --style gavel")
        params = GeneratorParams(
            jobs=jobs,
            min_hours=min_hours,
            max_hours=max_hours,
            num_durations=num_durations,
            lam=40.0 if lam is None else lam,
            seed=25 if seed is None else seed,
            mode_mix=parse_floats(mode_mix, "--mode-mix"),
            gpu_mix=parse_floats(gpu_mix, "--gpu-mix"),  # type: ignore[arg-type]
        )
        default, header = params.file_name(), ""  # the artifact's traces, byte for byte: no comment line
        make = partial(generate, params, tm)
    else:
        raise InputError(f"unknown --style {style!r}; choose shockwave or gavel")
    _write_generated(make, output or Path(default), tm.name, header)


def _mean_gap(lam: float | None, jobs_per_hour: float | None) -> float | None:
    """Seconds between arrivals, given either way (--lam, or --jobs-per-hour as a rate); None if neither was."""
    if lam is not None and jobs_per_hour is not None:
        raise InputError("give --lam or --jobs-per-hour, not both")
    if jobs_per_hour is not None:
        if not jobs_per_hour > 0:
            raise InputError(f"--jobs-per-hour must be > 0, got {jobs_per_hour}")
        return 3600.0 / jobs_per_hour
    return lam


def _gavel_workload(
    jobs: int, lam: float | None, seed: int | None, static: bool, multi_gpu: bool, multi_priority: bool, slos: bool
) -> GavelWorkload:
    """Gavel's workload: static (all at time 0) or continuous (a mean gap between arrivals), never both."""
    if static and lam:
        raise InputError("--static puts every job at time 0: it takes no --lam or --jobs-per-hour")
    if not static and lam is None:
        raise InputError("a continuous Gavel workload needs --lam (seconds between arrivals) or --jobs-per-hour")
    return GavelWorkload(jobs, float(lam or 0.0), 0 if seed is None else seed, multi_gpu, multi_priority, slos=slos)


def _write_generated(make: Callable[[], list[TraceJob]], path: Path, source: str, header: str) -> None:
    """Generate only once the file is known to be writable: a long generation is not lost to a bad -o. The file
    opens with the generator's parameters where given (Gavel's), so a simulation of it takes the same seed."""
    ensure_writable_file(path)
    trace = make()
    try:
        write_trace(trace, path, generator=header)
    except OSError as exc:
        raise InputError(f"cannot write trace: {exc.strerror}", path=path) from None
    err.print(f"wrote {len(trace)} jobs to {path} (throughputs: {source})", markup=False, highlight=False)


@app.command("check")
def trace_check(
    trace: Annotated[Path, typer.Argument(help="Trace file to validate and summarise.")],
    throughputs: ThroughputsOpt = None,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, help="Cluster size for the work lower bound.")] = None,
    cluster: ClusterOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only JSON on stdout.")] = False,
) -> None:
    """Validate a trace; print every problem (exit 2) or a summary with makespan lower bounds.

    Also lists the throughputs the table does not hold and were estimated, on the cluster's GPU types (v100 without
    --cluster)."""
    from shockwave.core.cluster import ClusterSpec
    from shockwave.workload_model.throughput import DEFAULT_GPU_TYPE, estimates_among, require_gpu_types

    tm, jobs, profiles = load_workload(trace, throughputs)
    spec = None if gpus is None and cluster is None else ClusterSpec.from_options(gpus, cluster)
    if spec is not None:  # as simulate would refuse the trace on this cluster
        require_gpu_types(tm, spec.types)
        require_gangs_fit(jobs, spec.largest_pool, trace)
    summary = summarize(jobs, profiles, tm, spec)
    types = (DEFAULT_GPU_TYPE,) if spec is None else spec.types
    estimated = estimates_among(tm, {(j.model, j.batch_size, j.scale_factor) for j in jobs}, types)
    if as_json:
        records = [e._asdict() for e in estimated]
        print(json.dumps({"jobs": job_records(jobs, profiles), "summary": summary, "estimated": records}, indent=1))
        return
    from shockwave.results.report import print_trace_summary

    print_trace_summary(out, trace, summary)
    _print_estimates(estimated, tm.name, types)


def _print_estimates(estimated: tuple[Any, ...], source: str, types: tuple[str, ...]) -> None:
    """Which rates of the trace's jobs (on `types`) are estimates, not the throughput table's."""
    from rich.table import Table

    if not estimated:
        return
    table = Table(
        title=escape(f"{len(estimated)} throughput(s) estimated on {', '.join(types)}: not in {source}"),
        title_justify="left",
    )
    for header in ("model", "batch size", "GPUs", "type", "it/s", "from"):
        table.add_column(header, justify="left" if header in ("model", "type", "from") else "right")
    for e in estimated:
        table.add_row(
            escape(e.model), str(e.batch_size), str(e.gpus), escape(e.gpu_type), f"{e.rate:.4g}", escape(e.basis)
        )
    out.print(table)


@app.command("convert")
def trace_convert(
    trace: Annotated[Path, typer.Argument(help="Trace to convert: ours (12 columns) or Gavel's (10 or 7 columns).")],
    to: Annotated[
        str, typer.Option("--format", help="gavel (Gavel's 10-column format, for its simulator) or shockwave (ours).")
    ],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Output file; default: TRACE's name + .<format>.trace, current folder."),
    ] = None,
) -> None:
    """Write a trace in another format. Gavel's has no mode or duration: adaptive jobs lose them (and train at their
    initial batch size there); Gavel's jobs become static jobs of unstated duration in ours."""
    from shockwave.workload_model.trace import FORMATS, WRITABLE_FORMATS, read_trace, trace_format

    if to not in WRITABLE_FORMATS:
        raise InputError(f"unknown --format {to!r}; choose {' or '.join(WRITABLE_FORMATS)}")
    jobs = read_trace(trace)
    source = trace_format(trace)
    path = output or Path(f"{trace.stem}.{to}.trace")
    if path.resolve() == trace.resolve():
        raise InputError("the output would overwrite the trace being converted; give another -o", path=path)
    ensure_writable_file(path)
    try:
        write_trace(jobs, path, to)
    except OSError as exc:
        raise InputError(f"cannot write trace: {exc.strerror}", path=path) from None
    what = f"{FORMATS[to].label}, from {source.label if source else 'an unknown format'}"
    err.print(f"wrote {len(jobs)} jobs to {path} ({what})", markup=False, highlight=False, soft_wrap=True)
    adaptive = sum(job.mode != "static" for job in jobs)
    if to == "gavel" and adaptive:
        err.print(
            f"note: {adaptive} adaptive job(s) written without their mode and duration (Gavel's format has neither)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
