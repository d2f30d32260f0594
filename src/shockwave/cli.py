"""The `shockwave` command: one entry point for traces, simulation and reports.

Bad input raises InputError anywhere below; `main` turns it into one clear message on stderr and exit status 2.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from shockwave import __version__
from shockwave.core.errors import InputError, Interrupted, require_extra
from shockwave.io.atomic import ensure_writable, ensure_writable_file
from shockwave.results.provenance import this_command, with_command
from shockwave.workload_model.gavel_generator import GavelWorkload, generate_gavel
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.profile import load_workload
from shockwave.workload_model.summary import job_records, summarize
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import TraceError, TraceJob, require_gangs_fit, write_trace

# Plain help (rich_markup_mode=None): rich's help panels label every flag "<bool>".
HELP = """Fair and efficient scheduling of ML training jobs on shared GPU clusters (Shockwave, NSDI'23).

Generate and check traces, simulate one policy or compare several, sweep grids of experiments, and run jobs for real
on Ray. Options of the commands come after it (`-v` and `-q` before it): `shockwave -q simulate --help`."""
app = typer.Typer(
    help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None
)
trace_app = typer.Typer(help="Generate and inspect traces.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(trace_app, name="trace")

# Piped output (CI logs, `| tee`) gets a width that fits the comparison table instead of rich's 80 columns.
out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 130)

ThroughputsOpt = Annotated[
    Path | None,
    typer.Option("--throughputs", help="Gavel/Shockwave throughput JSON; default: the built-in throughput model."),
]
MECHANICS_HELP = (
    "corrected (default: the simulation model new studies use) or reference (reproduces the Shockwave artifact's "
    "published numbers, quirks included: it stops when the cluster is briefly empty, leaving later jobs unrun) or "
    "gavel (the reference Gavel simulator's behaviour: no restart cost, allocations recomputed at most every 1920 s)."
)
MechanicsOpt = Annotated[str, typer.Option("--mechanics", help=MECHANICS_HELP)]
GpusOpt = Annotated[
    int | None, typer.Option("--gpus", help="GPUs in the cluster, all of the default type (v100); or --cluster.")
]
ClusterOpt = Annotated[
    str | None,
    typer.Option("--cluster", help="GPU pools by type: TYPE:GPUS[:GPUS_PER_SERVER], comma-separated (v100:32,k80:16)."),
]
AllowUnfinishedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unfinished", help="Exit 0 even when jobs never finished (they are still listed and flagged)."
    ),
]
UNFINISHED_EXIT = 3
"""Exit status of a run that ended with jobs it never finished (unless --allow-unfinished)."""


@contextlib.contextmanager
def _native_output_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while the work runs, so stdout holds only what the command reports (only
    JSON with --json): native libraries write there behind Python's back (highspy 1.16 prints a banner whenever a
    solver is created)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).fflush(None)  # C stdio's buffer, written while 1 still points at stderr
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def _saying_what_was_kept(kept: str | None = None) -> Iterator[None]:
    """Ctrl-C ends the command with exit 130 and says what is on disk (typer would end it silently)."""
    try:
        yield
    except Interrupted as exc:
        err.print(f"interrupted: {exc.kept}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(130) from None
    except KeyboardInterrupt:
        err.print(f"interrupted: {kept or 'nothing was written'}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(130) from None


def _show_progress() -> bool:
    """Progress bars and per-cell lines, unless -q asked for errors only."""
    return logging.getLogger().level <= logging.INFO


def _version(value: bool) -> None:
    if value:
        out.print(f"shockwave {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[
        int, typer.Option("--verbose", "-v", count=True, help="Debug logging (solver statuses, each decision).")
    ] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Errors only: no warnings, no progress.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose else logging.INFO)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True)


def _floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"{flag} expects comma-separated numbers, got {text!r}") from None


def _window(text: str) -> tuple[int, int]:
    start, sep, stop = text.partition(":")
    if not (sep and start.isdigit() and stop.isdigit()) or int(start) >= int(stop):
        raise InputError(f"--window expects A:B with job ids A < B, got {text!r}")
    return int(start), int(stop)


@trace_app.command("generate")
def trace_generate(
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Output file; default: the conventional name (every knob in it) in the current folder.",
        ),
    ] = None,
    style: Annotated[
        str,
        typer.Option(
            "--style", help="shockwave: the Shockwave artifact's adaptive jobs; gavel: Gavel's Philly-derived jobs."
        ),
    ] = "shockwave",
    jobs: Annotated[int, typer.Option("--jobs", help="Number of jobs.")] = 120,
    min_hours: Annotated[float, typer.Option("--min-hours", help="Shortest candidate duration (hours).")] = 0.2,
    max_hours: Annotated[float, typer.Option("--max-hours", help="Longest candidate duration (hours).")] = 5.0,
    num_durations: Annotated[int, typer.Option("--num-durations", help="Evenly spaced candidate durations.")] = 100,
    lam: Annotated[
        float | None, typer.Option("--lam", help="Mean inter-arrival time (seconds); default 40 (shockwave style).")
    ] = None,
    jobs_per_hour: Annotated[
        float | None, typer.Option("--jobs-per-hour", help="Arrival rate instead of --lam (3600 / lam).")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed; default 25 (shockwave), 0 (gavel).")] = None,
    mode_mix: Annotated[str, typer.Option("--mode-mix", help="P(static),P(accordion),P(gns).")] = "0,0.5,0.5",
    gpu_mix: Annotated[str, typer.Option("--gpu-mix", help="P(1),P(2),P(4),P(8) GPUs per job.")] = "0.6,0.3,0.09,0.01",
    static: Annotated[bool, typer.Option("--static", help="Gavel style: every job arrives at time 0.")] = False,
    multi_gpu: Annotated[
        bool, typer.Option("--multi-gpu", help="Gavel style: gangs of 2, 4 and 8 GPUs (Philly's mix).")
    ] = False,
    multi_priority: Annotated[
        bool, typer.Option("--multi-priority", help="Gavel style: a fifth of the jobs get priority weight 5.")
    ] = False,
    slos: Annotated[
        bool,
        typer.Option("--slos", help="Gavel style: SLOs of 1.2, 2 or 10 x each job's duration (the reference's draw)."),
    ] = False,
    throughputs: ThroughputsOpt = None,
) -> None:
    """Generate a synthetic trace with a reference generator's sampling, so its job stream regenerates exactly."""
    if lam is not None and jobs_per_hour is not None:
        raise InputError("give --lam or --jobs-per-hour, not both")
    if jobs_per_hour is not None:
        if not jobs_per_hour > 0:
            raise InputError(f"--jobs-per-hour must be > 0, got {jobs_per_hour}")
        lam = 3600.0 / jobs_per_hour
    tm = load_throughputs(throughputs)
    make: Callable[[], list[TraceJob]]
    if style == "gavel":
        if static and lam:
            raise InputError("--static puts every job at time 0: it takes no --lam or --jobs-per-hour")
        if not static and lam is None:
            raise InputError("a continuous Gavel workload needs --lam (seconds between arrivals) or --jobs-per-hour")
        workload = GavelWorkload(
            jobs, float(lam or 0.0), 0 if seed is None else seed, multi_gpu, multi_priority, slos=slos
        )
        default = workload.file_name()
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
            mode_mix=_floats(mode_mix, "--mode-mix"),
            gpu_mix=_floats(gpu_mix, "--gpu-mix"),  # type: ignore[arg-type]
        )
        default = params.file_name()
        make = partial(generate, params, tm)
    else:
        raise InputError(f"unknown --style {style!r}; choose shockwave or gavel")
    path = output or Path(default)
    ensure_writable_file(path)
    trace = make()
    try:
        write_trace(trace, path)
    except OSError as exc:
        raise InputError(f"cannot write trace: {exc.strerror}", path=path) from None
    err.print(f"wrote {len(trace)} jobs to {path} (throughputs: {tm.name})", markup=False, highlight=False)


@trace_app.command("check")
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
    summary = summarize(jobs, profiles, None if spec is None else spec.gpus)
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


@trace_app.command("convert")
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


@app.command("simulate")
def simulate_cmd(
    trace: Annotated[Path, typer.Option("--trace", help="Trace file (12-column TSV).")],
    policy: Annotated[str, typer.Option("--policy", help="Name or alias (gavel, themis, ...) or file.py:Class.")],
    gpus: GpusOpt = None,
    cluster: ClusterOpt = None,
    gpus_per_server: Annotated[int, typer.Option("--gpus-per-server", help="GPUs per server.")] = 1,
    throughputs: ThroughputsOpt = None,
    round_seconds: Annotated[float, typer.Option("--round-seconds", help="Round length (seconds).")] = 120.0,
    restart_seconds: Annotated[
        float | None,
        typer.Option("--restart-seconds", help="Time a (re)started job loses (default: the preset's 20 s)."),
    ] = None,
    realloc_seconds: Annotated[
        float | None,
        typer.Option("--realloc-seconds", help="Gavel-style reallocation interval (default: the preset's 1000 s)."),
    ] = None,
    restart_by_gang: Annotated[
        str,
        typer.Option(
            "--restart-seconds-by-gang", help="Restart cost per gang size, e.g. '1:6.5,4:20' (others: the default)."
        ),
    ] = "",
    switch_by_gang: Annotated[
        str,
        typer.Option(
            "--switch-seconds-by-gang",
            help="With --batch-sizes: what a batch-size switch within a round costs per gang size, e.g. '1:5.5,2:7' "
            "(others: the restart cost).",
        ),
    ] = "",
    mechanics: MechanicsOpt = "corrected",
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Shockwave hyperparameters (a reference configurations/*.json); default: the tacc_32gpus values.",
        ),
    ] = None,
    batch_sizes: Annotated[
        Path | None,
        typer.Option(
            "--batch-sizes",
            help="Replay the per-epoch batch sizes a real run observed (DIR/batch_sizes.json of `shockwave run`).",
        ),
    ] = None,
    window: Annotated[
        str | None,
        typer.Option("--window", help="A:B: end when jobs A..B-1 are done; metrics over them only (Gavel's window)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seeds the policies' random draws (Gavel's type shuffle).")] = 0,
    policy_param: Annotated[
        list[str] | None,
        typer.Option(
            "--policy-param",
            help="KEY=VALUE: a parameter the policy declares (repeatable), e.g. entities=teams.toml (multi-level).",
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help="JSON/TOML file of dollars per GPU-hour by type: the result's cost, and the cost-aware policies' "
            "prices (default: Gavel's GCP prices, v100 0.74, p100 0.43, k80 0.135).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the result JSON on stdout.")] = False,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Also write result.json and rounds.csv here.")] = None,
    allow_unfinished: AllowUnfinishedOpt = False,
) -> None:
    """Simulate a policy on a trace and report makespan, JCT, finish-time fairness, utilisation and cost."""
    from shockwave.api import simulate
    from shockwave.core.cluster import ClusterSpec
    from shockwave.policies.registry import parse_policy_params, policy_info
    from shockwave.policies.shockwave.config import ShockwaveConfig
    from shockwave.results.report import print_run_summary, write_run
    from shockwave.simulator.mechanics import preset

    chosen = policy_info(policy)
    params = parse_policy_params(policy, policy_param or [])
    if config is not None and not chosen.takes_config:
        raise InputError(f"--config sets Shockwave's hyperparameters; policy {chosen.label!r} has none", path=config)
    by_gang = _gang_costs(restart_by_gang, "--restart-seconds-by-gang") if restart_by_gang else None
    switch_costs = _gang_costs(switch_by_gang, "--switch-seconds-by-gang") if switch_by_gang else None
    mech = (
        preset(mechanics)
        .with_round_seconds(round_seconds)
        .with_overrides(restart_seconds, realloc_seconds, by_gang, switch_costs)
    )
    spec = ClusterSpec.from_options(gpus, cluster, gpus_per_server)
    hyper = ShockwaveConfig.from_json(config) if config is not None else None
    if out_dir is not None:
        ensure_writable(out_dir)
    with _native_output_to_stderr(), _simulation_progress() as on_round:
        typed = simulate(
            trace,
            policy,
            spec,
            mechanics=mech,
            throughputs=throughputs,
            config=hyper,
            batch_sizes=batch_sizes,
            on_round=on_round,
            window=None if window is None else _window(window),
            seed=seed,
            policy_params=params,
            prices=prices,
        )
    result = with_command(typed.to_json_dict(), this_command())
    if out_dir is not None:
        write_run(out_dir, result, typed.rounds)
    if as_json:
        print(json.dumps(result))
    else:
        print_run_summary(out, result)
    _exit_if_unfinished([result], allow_unfinished)


def _exit_if_unfinished(results: list[dict[str, Any]], allowed: bool) -> None:
    """Jobs that never ran make every metric of the run misleading: say so, and fail unless the user allows it."""
    incomplete = [r for r in results if not r["complete"]]
    if not incomplete:
        return
    from shockwave.results.report import unfinished_line

    for result in incomplete:
        err.print(
            f"[red]incomplete:[/red] {escape(result['policy'])}: {unfinished_line(result)}"
            + (
                " (reference mechanics stop when the cluster is briefly empty)"
                if result["mechanics"] == "reference"
                else ""
            ),
            highlight=False,
            soft_wrap=True,
        )
    if not allowed:
        raise typer.Exit(UNFINISHED_EXIT)


@contextlib.contextmanager
def _simulation_progress() -> Iterator[Callable[[Any], None] | None]:
    """A progress bar on a terminal (jobs finished, simulated time); nothing when stderr is a file or a pipe."""
    if not err.is_terminal or not _show_progress():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs, {task.fields[clock]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("simulate", total=None, clock="")

        def on_round(update: Any) -> None:
            progress.update(
                task,
                completed=update.finished_jobs,
                total=update.total_jobs,
                clock=f"t = {update.now_s / 3600:.2f} h, {update.rounds} rounds",
            )

        yield on_round


PoliciesOpt = Annotated[str, typer.Option("--policies", help="Comma-separated names or file.py:Class, or 'all'.")]
ParallelOpt = Annotated[
    int | None, typer.Option("--jobs-in-parallel", "-j", min=1, help="Simulations at once; default: CPU count.")
]


def _policy_list(text: str) -> list[str]:
    from shockwave.policies.plugins import absolute_spec
    from shockwave.policies.registry import POLICIES

    if text.strip() == "all":
        return list(POLICIES)
    return [absolute_spec(p.strip()) for p in text.split(",") if p.strip()]  # a file: from here, not a sweep file


def _workers(requested: int | None) -> int:
    import os

    return requested or os.cpu_count() or 1


def _print_paths(paths: list[Path]) -> None:
    pngs = [p for p in paths if p.suffix == ".png"]
    if pngs:
        out.print("figures (PNG, with SVG beside each):")
        for path in pngs:
            out.print(f"  {path}", markup=False, highlight=False)


@app.command("compare")
def compare_cmd(
    trace: Annotated[Path, typer.Option("--trace", help="Trace file (12-column TSV).")],
    output: Annotated[Path, typer.Option("--out", help="Folder for results.json/csv and figures/.")],
    gpus: GpusOpt = None,
    cluster: ClusterOpt = None,
    policies: PoliciesOpt = "all",
    throughputs: ThroughputsOpt = None,
    config: Annotated[Path | None, typer.Option("--config", help="Shockwave hyperparameters (JSON).")] = None,
    mechanics: MechanicsOpt = "corrected",
    round_seconds: Annotated[float, typer.Option("--round-seconds", help="Round length (seconds).")] = 120.0,
    gpus_per_server: Annotated[int, typer.Option("--gpus-per-server", help="GPUs per server.")] = 1,
    parallel: ParallelOpt = None,
    allow_unfinished: AllowUnfinishedOpt = False,
) -> None:
    """Run several policies on one trace side by side and compare them (table, JSON, CSV, figures)."""
    from shockwave.experiments.compare import CompareRequest, compare
    from shockwave.experiments.figures import comparison_figures
    from shockwave.results.report import print_comparison

    request = CompareRequest(
        trace, gpus, _policy_list(policies), throughputs, config, mechanics, round_seconds, gpus_per_server, cluster
    )
    with _saying_what_was_kept():
        results, errors = compare(
            request,
            output,
            workers=_workers(parallel),
            console=err,
            show_progress=_show_progress(),
            command=this_command(),
        )
    if results:
        print_comparison(out, results)
        _print_paths(comparison_figures(results, output / "figures"))
        out.print(f"results: {output / 'results.json'}, {output / 'results.csv'}", markup=False, highlight=False)
    for policy, error in errors.items():
        err.print(f"[red]error:[/red] {escape(policy)} failed: {escape(error)}", highlight=False, soft_wrap=True)
    if errors:
        raise typer.Exit(1)
    _exit_if_unfinished(results, allow_unfinished)


def _as_list(value: Any) -> list[Any]:
    """A TOML key that may hold one value or a list of them."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


@app.command("sweep")
def sweep_cmd(
    spec_file: Annotated[Path | None, typer.Argument(help="Sweep description (TOML); flags override it.")] = None,
    output: Annotated[Path | None, typer.Option("--out", help="Results folder (finished cells are kept).")] = None,
    traces: Annotated[list[Path] | None, typer.Option("--trace", help="Trace file (repeatable).")] = None,
    generate: Annotated[
        list[str] | None,
        typer.Option(
            "--generate", help="Generator parameters, e.g. 'jobs=120,lam=40' (repeatable); one trace per seed."
        ),
    ] = None,
    gpus: Annotated[str | None, typer.Option("--gpus", help="Cluster sizes, comma-separated.")] = None,
    clusters: Annotated[
        list[str] | None,
        typer.Option("--cluster", help="A cluster by GPU type (TYPE:GPUS[:PER_SERVER],...); repeat for more."),
    ] = None,
    policies: Annotated[str | None, typer.Option("--policies", help="Comma-separated names, or 'all'.")] = None,
    seeds: Annotated[str | None, typer.Option("--seeds", help="Generator seeds, comma-separated.")] = None,
    throughputs: ThroughputsOpt = None,
    config: Annotated[Path | None, typer.Option("--config", help="Shockwave hyperparameters (JSON).")] = None,
    mechanics: Annotated[str | None, typer.Option("--mechanics", help=MECHANICS_HELP)] = None,
    parallel: ParallelOpt = None,
    ray: Annotated[bool, typer.Option("--ray", help="Run each cell as a Ray task.")] = False,
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster to join (with --ray).")] = None,
    allow_unfinished: AllowUnfinishedOpt = False,
) -> None:
    """Run a grid of workloads x cluster sizes x policies x seeds; re-running skips finished cells."""
    from shockwave.experiments.sweep import run_sweep
    from shockwave.experiments.sweep_spec import load_toml, parse_generator, spec_from

    raw: dict[str, Any] = load_toml(spec_file) if spec_file is not None else {}
    base = spec_file.parent if spec_file is not None else Path.cwd()
    if policies is not None:
        raw["policies"] = _policy_list(policies)
    if seeds is not None:
        raw["seeds"] = _ints(seeds, "--seeds", minimum=0)
    if gpus is not None:
        raw["gpus"] = _ints(gpus, "--gpus")
    if clusters:
        raw["clusters"] = clusters
    if mechanics is not None:
        raw["mechanics"] = mechanics
    for key, path in (("throughputs", throughputs), ("config", config)):
        if path is not None:
            raw[key] = str(path.resolve())
    raw["traces"] = [*_as_list(raw.get("traces")), *(str(t.resolve()) for t in traces or [])]
    raw["generate"] = [*_as_list(raw.get("generate")), *(parse_generator(g) for g in generate or [])]
    spec = spec_from(raw, base, spec_file)
    if address is not None and not ray:
        raise InputError("--address joins a Ray cluster: add --ray")
    if ray:
        require_extra("ray", "cluster", "--ray")  # before any folder is made
    folder = output or (Path("results") / spec_file.stem if spec_file is not None else None)
    if folder is None:
        raise InputError("--out is required without a sweep file")
    with _saying_what_was_kept():
        run = run_sweep(
            spec,
            folder,
            workers=_workers(parallel),
            ray=ray,
            address=address,
            console=err,
            show_progress=_show_progress(),
            command=this_command(),
        )
    out.print(
        f"{run.computed} computed, {run.reused} reused, {len(run.failed)} failed; results in {folder}",
        markup=False,
        highlight=False,
    )
    for key, error in run.failed.items():
        err.print(f"[red]failed:[/red] {key}: {escape(error.splitlines()[0])}", highlight=False, soft_wrap=True)
    if run.failed:
        raise typer.Exit(1)
    if run.incomplete:
        err.print(
            f"[red]incomplete:[/red] {len(run.incomplete)} cell(s) ended with unfinished jobs: "
            + escape(", ".join(run.incomplete)),
            highlight=False,
            soft_wrap=True,
        )
        if not allow_unfinished:
            raise typer.Exit(UNFINISHED_EXIT)


@app.command("report")
def report_cmd(
    folder: Annotated[Path, typer.Argument(help="A folder written by compare or sweep.")],
) -> None:
    """Re-render the tables and figures of saved results without running anything."""
    from shockwave.experiments.compare import render_comparison
    from shockwave.experiments.sweep import SPEC_FILE, render

    if (folder / SPEC_FILE).exists():
        paths = render(folder, out)
    elif (folder / "results.json").exists():
        paths = render_comparison(folder, out)
    else:
        raise InputError("no results of compare or sweep here (results.json or sweep.json)", path=folder)
    _print_paths(paths)


def _gang_costs(text: str, flag: str) -> dict[int, float]:
    """'1:6.5,4:20' -> {1: 6.5, 4: 20.0}."""
    costs = {}
    for item in text.split(","):
        gang, _, seconds = item.partition(":")
        try:
            costs[int(gang)] = float(seconds)
        except ValueError:
            raise InputError(f"{flag} expects GANG:SECONDS pairs, got {item!r}") from None
    return costs


def _ints(text: str, flag: str, minimum: int = 1) -> list[int]:
    """Whole numbers only: '8.7' or 'nan' is refused rather than truncated to 8 or met later as a traceback."""
    values = _floats(text, flag)
    if not all(v.is_integer() and v >= minimum for v in values):
        raise InputError(f"{flag} expects comma-separated whole numbers >= {minimum}, got {text!r}")
    return [int(v) for v in values]


@app.command("profile-workloads")
def profile_workloads_cmd(
    output: Annotated[Path, typer.Option("--out", help="Throughput table to write (Gavel JSON).")] = Path(
        "workload_throughputs.json"
    ),
    families: Annotated[
        str, typer.Option("--families", help="Comma-separated families (default: every built-in workload).")
    ] = "",
    batch_sizes: Annotated[
        str,
        typer.Option("--batch-sizes", help="Comma-separated batch sizes (default: templates and their doublings)."),
    ] = "",
    gangs: Annotated[str, typer.Option("--gangs", help="Comma-separated gang sizes.")] = "1,2,4",
    seconds: Annotated[float, typer.Option("--seconds", min=0.2, help="Training time measured per point.")] = 3.0,
) -> None:
    """Measure each built-in workload's throughput per batch size and gang size on this machine."""
    from rich.progress import Progress

    from shockwave.io.atomic import write_atomically

    require_extra("torch", "workloads", "profile-workloads")
    from shockwave.training.profiling import plan, profile, table_of
    from shockwave.workload_model.catalog import WORKLOAD_FAMILIES

    names = [f.strip() for f in families.split(",") if f.strip()] or list(WORKLOAD_FAMILIES)
    sizes = _ints(batch_sizes, "--batch-sizes") if batch_sizes else None
    points = plan(names, sizes, _ints(gangs, "--gangs"))
    ensure_writable_file(output)
    rates = {}
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("profiling", total=len(points))
        for point, rate in profile(points, seconds):
            rates[point] = rate
            write_atomically(output, json.dumps(table_of(rates).to_json(), indent=1))  # kept if a later point fails
            progress.update(task, advance=1, description=f"{point.family} bs {point.batch_size} x{point.gang}")
            out.print(f"{point.family:>15} batch size {point.batch_size:>5} x{point.gang} GPU(s): {rate:9.1f} steps/s")
    out.print(f"wrote {output}; use it with --throughputs {output}", markup=False, highlight=False)


RayClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="The GPUs by type as TYPE:GPUS[,TYPE:GPUS...] (v100:2,k80:2), instead of --gpus; on a Ray cluster "
        "(--address) each node declares a gpu_type:TYPE resource counting its GPUs.",
    ),
]
AddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="Join this Ray cluster (default: start a local one with logical GPUs)."),
]
MaxRestartsOpt = Annotated[
    int, typer.Option("--max-restarts", min=0, help="Restarts of a crashing job before it is marked failed.")
]
JobCommandOpt = Annotated[
    str | None,
    typer.Option(
        "--job-command",
        help="Command of each job (under serve: of a job whose spec has none); {family}, {batch_size}, {mode} and "
        "{job_id} are filled in.",
    ),
]


@app.command("run")
def run_cmd(
    output: Annotated[Path, typer.Option("--out", help="Folder for results.json, the journal and checkpoints.")],
    trace: Annotated[Path | None, typer.Option("--trace", help="Trace file (12-column TSV).")] = None,
    policy: Annotated[str | None, typer.Option("--policy", help="Policy name or alias, or file.py:Class.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, help="GPUs to schedule.")] = None,
    cluster: RayClusterOpt = None,
    address: AddressOpt = None,
    round_seconds: Annotated[float, typer.Option("--round-seconds", help="Round length (seconds).")] = 10.0,
    time_scale: Annotated[float, typer.Option("--time-scale", help="Divide arrivals and step counts by this.")] = 1.0,
    journal: Annotated[
        Path | None, typer.Option("--journal", help="SQLite journal; default DIR/journal.sqlite.")
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --journal.")] = False,
    throughputs: ThroughputsOpt = None,
    config: Annotated[Path | None, typer.Option("--config", help="Shockwave hyperparameters (JSON).")] = None,
    placement: Annotated[
        str,
        typer.Option(
            "--placement", help="Ray placement strategy of a gang: PACK, SPREAD, STRICT_PACK or STRICT_SPREAD."
        ),
    ] = "PACK",
    max_restarts: MaxRestartsOpt = 3,
    command: JobCommandOpt = None,
    realloc_seconds: Annotated[
        float | None,
        typer.Option(
            "--realloc-seconds", help="Gavel-style policies reallocate at most this often (default: every round)."
        ),
    ] = None,
    allow_unfinished: AllowUnfinishedOpt = False,
) -> None:
    """Run a trace's jobs for real on Ray, scheduled round by round by the same policy code as the simulator.
    `--resume` continues a run from its journal: name its policy (and job command) again, as what runs is never
    taken from the journal."""
    import shlex

    from shockwave.core.cluster import ClusterSpec
    from shockwave.results.report import print_run_summary
    from shockwave.runtime.run import RunRequest, replay_arguments, run

    if resume and policy is None:
        raise InputError("--resume needs --policy: the run's policy, which is never taken from its journal")
    if not resume and (trace is None or policy is None or (gpus is None and cluster is None)):
        raise InputError("--trace, --policy and --gpus or --cluster are required (unless --resume continues a journal)")
    assert policy is not None
    spec = ClusterSpec.from_options(gpus, cluster) if gpus is not None or cluster is not None else ClusterSpec.of(1)
    request = RunRequest(
        trace=trace or Path(),
        policy=policy,
        gpus=spec.gpus,
        cluster=spec.describe() if cluster is not None else None,
        out=output,
        address=address,
        round_seconds=round_seconds,
        time_scale=time_scale,
        journal=journal,
        resume=resume,
        throughputs=throughputs,
        config=config,
        placement=placement.upper(),
        max_restarts=max_restarts,
        command=command,
        realloc_seconds=realloc_seconds,
    )
    again = ["shockwave", "run", "--resume", "--out", str(output), "--policy", policy]
    again += [*(("--journal", str(journal)) if journal else ()), *(("--job-command", command) if command else ())]
    kept = (
        f"the journal {request.journal_path} keeps every job's progress up to its last checkpoint; "
        f"`{shlex.join(again)}` continues the run"
    )
    with _saying_what_was_kept(kept), _native_output_to_stderr():
        result = run(request, command=this_command())
    print_run_summary(out, result)
    out.print(f"results: {output / 'results.json'}", markup=False, highlight=False)
    replay = shlex.join(replay_arguments(output, result))
    out.print(f"replay it: shockwave simulate {replay}", markup=False, highlight=False, soft_wrap=True)
    if result["unfinished_jobs"]:
        err.print(f"[red]failed jobs:[/red] {escape(str(result['failed_jobs']))}", highlight=False, soft_wrap=True)
    _exit_if_unfinished([result], allow_unfinished)


ServiceDirOpt = Annotated[
    Path | None,
    typer.Option("--out", help="The service's folder (that of `shockwave serve`); default: $SHOCKWAVE_SERVICE_DIR."),
]


@app.command("serve")
def serve_cmd(
    output: Annotated[
        Path, typer.Option("--out", help="The service's folder: queue, journal, checkpoints, logs, endpoint.json.")
    ],
    cluster: RayClusterOpt = None,
    gpus: Annotated[
        int | None, typer.Option("--gpus", min=1, help="GPUs of the default type, instead of --cluster.")
    ] = None,
    policy: Annotated[str, typer.Option("--policy", help="Policy name or alias, or file.py:Class.")] = "shockwave",
    policy_param: Annotated[
        list[str] | None,
        typer.Option(
            "--policy-param",
            help="KEY=VALUE: a parameter the policy declares (repeatable); entities=teams.toml shares the cluster "
            "between the file's entities, each job in its spec's entity.",
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Shockwave hyperparameters (JSON).")] = None,
    round_seconds: Annotated[float, typer.Option("--round-seconds", help="Round length (seconds).")] = 30.0,
    address: AddressOpt = None,
    port: Annotated[int, typer.Option("--port", help="The API's port on 127.0.0.1 (default: any free one).")] = 0,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the service in --out after a crash or a stop.")
    ] = False,
    throughputs: ThroughputsOpt = None,
    max_restarts: MaxRestartsOpt = 3,
    command: JobCommandOpt = None,
) -> None:
    """A long-running scheduler on Ray: jobs are submitted, watched and cancelled through its API (`submit`,
    `status`, `cancel`, `logs`, the dashboard at its URL); SIGTERM or Ctrl-C stops it, `--resume` continues it
    (with the same --policy and --job-command: what runs is never taken from its journal)."""
    import shlex
    import signal
    import threading

    from shockwave.core.cluster import ClusterSpec
    from shockwave.results.report import print_run_summary
    from shockwave.service.serve import ServeRequest, serve

    if gpus is not None or cluster is not None:
        cluster = ClusterSpec.from_options(gpus, cluster).describe()
    request = ServeRequest(
        out=output,
        cluster=cluster,
        policy=policy,
        round_seconds=round_seconds,
        config=config,
        throughputs=throughputs,
        address=address,
        max_restarts=max_restarts,
        command=command,
        resume=resume,
        port=port,
        policy_params=tuple(policy_param or ()),
    )
    stop = threading.Event()

    def stopping(signum: int, frame: Any) -> None:
        if stop.is_set():  # asked twice: do not wait for the jobs' checkpoints
            raise KeyboardInterrupt
        err.print("stopping: running jobs checkpoint and exit (again to stop at once)", highlight=False)
        stop.set()

    def ready(url: str) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):  # after Ray's own handlers, which would end the process
            signal.signal(signum, stopping)
        err.print(f"serving on {url} (DIR/endpoint.json has its token)", markup=False, highlight=False)

    again = ["shockwave", "serve", "--resume", "--out", str(output), "--policy", policy]
    kept = (
        f"the journal {output / 'journal.sqlite'} and the queue keep every job; "
        f"`{shlex.join([*again, *(('--job-command', command) if command else ())])}` continues the service"
    )
    with _saying_what_was_kept(kept), _native_output_to_stderr():
        result = serve(request, stop, command=this_command(), ready=ready)
    print_run_summary(out, result)
    out.print(f"results: {output / 'results.json'}", markup=False, highlight=False)


@app.command("submit")
def submit_cmd(
    spec_file: Annotated[
        Path | None,
        typer.Argument(metavar="SPEC", help="Job spec (TOML, or JSON); the flags given replace its fields."),
    ] = None,
    output: ServiceDirOpt = None,
    name: Annotated[str | None, typer.Option("--name", help="The job's name, unique in the queue.")] = None,
    family: Annotated[
        str | None,
        typer.Option(
            "--family", help="Model family (ResNet-18, LM, ...); without a command in SPEC, its workload runs."
        ),
    ] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs of one type the job trains on (default 1).")] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Length in steps (at the initial batch size).")] = None,
    epochs: Annotated[int | None, typer.Option("--epochs", help="Length in epochs, instead of --steps.")] = None,
    batch_size: Annotated[
        int | None, typer.Option("--batch-size", help="Initial batch size (default: the family's smallest template).")
    ] = None,
    mode: Annotated[
        str | None, typer.Option("--mode", help="Batch-size adaptation: static (default), accordion or gns.")
    ] = None,
    gpu_types: Annotated[
        str | None, typer.Option("--gpu-types", help="GPU types it may run on, comma-separated (default: any).")
    ] = None,
    weight: Annotated[float | None, typer.Option("--weight", help="Priority weight, > 0 (default 1).")] = None,
    entity: Annotated[str | None, typer.Option("--entity", help="Who the job belongs to.")] = None,
) -> None:
    """Queue a job on the scheduler service; prints its name and id at once (the scheduler admits it next round)."""
    from shockwave.service.client import ServiceClient
    from shockwave.service.spec import JobSpec, load_spec

    flags: dict[str, Any] = {
        "name": name,
        "family": family,
        "gpus": gpus,
        "steps": steps,
        "epochs": epochs,
        "batch_size": batch_size,
        "mode": mode,
        "gpu_types": None if gpu_types is None else [t.strip() for t in gpu_types.split(",")],
        "weight": weight,
        "entity": entity,
    }
    given = {key: value for key, value in flags.items() if value is not None}
    spec = load_spec(spec_file, given) if spec_file is not None else JobSpec.from_mapping(given)
    job = ServiceClient.find(output).submit(spec, spec_file)
    out.print(f"submitted {job.name} (job {job.id})", markup=False, highlight=False)


@app.command("status")
def status_cmd(
    output: ServiceDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the jobs as JSON on stdout.")] = False,
) -> None:
    """The service's queue: each job's state, GPUs, progress, expected finish and finish-time fairness (rho)."""
    from shockwave.service.client import ServiceClient
    from shockwave.service.status import queue_table

    jobs = ServiceClient.find(output).jobs()
    if as_json:
        print(json.dumps([job.model_dump(mode="json") for job in jobs], indent=1))
        return
    out.print(queue_table(jobs) if jobs else "no jobs")


@app.command("cancel")
def cancel_cmd(
    name: Annotated[str, typer.Argument(help="The job's name.")],
    output: ServiceDirOpt = None,
) -> None:
    """Cancel a queued or running job (the scheduler stops a running one); cancelling it again changes nothing."""
    from shockwave.service.client import ServiceClient

    job = ServiceClient.find(output).cancel(name)
    out.print(f"cancelled {job.name}", markup=False, highlight=False)


@app.command("logs")
def logs_cmd(
    name: Annotated[str, typer.Argument(help="The job's name.")],
    output: ServiceDirOpt = None,
    lines: Annotated[int, typer.Option("--lines", "-n", min=1, help="How many of the last lines.")] = 200,
) -> None:
    """The end of a job's output."""
    from shockwave.service.client import ServiceClient

    sys.stdout.write(ServiceClient.find(output).logs(name, lines))


@app.command("scale-study")
def scale_study_cmd(
    output: Annotated[Path, typer.Option("--out", help="Folder for traces, results, scale.json/md and scale.png.")],
    sizes: Annotated[str, typer.Option("--sizes", help="Cluster sizes in GPUs, comma-separated.")] = (
        "256,512,1024,2048"
    ),
    policies: Annotated[str, typer.Option("--policies", help="Comma-separated policy names.")] = (
        "shockwave,max_min_fairness,finish_time_fairness,min_total_duration"
    ),
    jobs_per_gpu: Annotated[float, typer.Option("--jobs-per-gpu", help="Jobs in each trace per GPU.")] = 8000 / 2048,
    jobs_per_gpu_hour: Annotated[
        float, typer.Option("--jobs-per-gpu-hour", help="Arrivals per GPU per hour (mean gap: 3600 / (this x GPUs)).")
    ] = 3600 / (2.2 * 512),
    seed: Annotated[int, typer.Option("--seed", help="Generator seed of every size's trace.")] = 99,
    throughputs: ThroughputsOpt = None,
    config: Annotated[Path | None, typer.Option("--config", help="Shockwave hyperparameters (JSON).")] = None,
    mechanics: MechanicsOpt = "corrected",
) -> None:
    """Shockwave and baselines at growing cluster sizes, jobs in proportion: wall time, solver latency and quality
    per size as a table (scale.md), JSON and a figure. Runs one simulation at a time, each in a fresh process."""
    from shockwave.experiments.scale import Row as ScaleRow
    from shockwave.experiments.scale import ScaleStudy, run_study, table, write_outputs

    try:
        gpu_sizes = tuple(int(s) for s in sizes.split(",") if s.strip())
    except ValueError:
        raise InputError(f"--sizes must be comma-separated integers, got {sizes!r}") from None
    study = ScaleStudy(
        gpu_sizes,
        tuple(p.strip() for p in policies.split(",") if p.strip()),
        jobs_per_gpu,
        jobs_per_gpu_hour,
        seed,
        throughputs,
        config,
        mechanics,
    )

    def finished(row: ScaleRow) -> None:
        if _show_progress():
            err.print(f"{row.gpus} GPUs, {row.policy}: {row.wall_s:.1f} s", highlight=False)

    try:
        rows = run_study(study, output, on_row=finished)
    except RuntimeError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    out.print(table(rows), markup=False, highlight=False)
    _print_paths(write_outputs(study, rows, output))


DEMO_POLICIES = "shockwave,max_min_fairness,finish_time_fairness,min_total_duration"


@app.command("demo")
def demo(
    output_dir: Annotated[Path, typer.Option("--out", help="Where the demo writes its files.")] = Path("demo-out"),
) -> None:
    """Generate the default trace with the built-in throughput model; compare Shockwave and three baselines."""
    output_dir.mkdir(parents=True, exist_ok=True)
    params = GeneratorParams()
    path = output_dir / params.file_name()
    write_trace(generate(params, load_throughputs(None)), path)
    out.print(f"generated {path} ({params.jobs} jobs, built-in throughput model)", markup=False, highlight=False)
    trace_check(path, throughputs=None, gpus=32, cluster=None, as_json=False)
    compare_cmd(trace=path, gpus=32, cluster=None, output=output_dir, policies=DEMO_POLICIES, mechanics="corrected")


def main() -> None:
    try:
        app()
    except TraceError as exc:
        for problem in exc.problems:
            err.print(f"[red]error:[/red] {escape(str(problem))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except InputError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
