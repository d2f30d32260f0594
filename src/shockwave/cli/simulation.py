"""Simulation commands: `simulate` one policy, `compare` several, `sweep` grids, `report` results, `scale-study`,
and the `demo`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from shockwave.cli import trace
from shockwave.cli.common import (
    MECHANICS_HELP,
    UNFINISHED_EXIT,
    AllowUnfinishedOpt,
    ClusterOpt,
    ConfigOpt,
    GpusOpt,
    MechanicsOpt,
    ParallelOpt,
    PoliciesOpt,
    PolicyParamOpt,
    PresetRoundOpt,
    TenantsOpt,
    ThroughputsOpt,
    as_list,
    dataset_option,
    err,
    exit_if_unfinished,
    native_output_to_stderr,
    out,
    parse_gang_costs,
    parse_ints,
    parse_policies,
    parse_window,
    print_paths,
    saying_what_was_kept,
    show_progress,
    simulation_progress,
    worker_count,
)
from shockwave.core.errors import InputError, require_extra
from shockwave.io.atomic import ensure_writable
from shockwave.policies.names import BUILTIN_NAMES
from shockwave.results.provenance import this_command, with_command
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import write_trace

app = typer.Typer(rich_markup_mode=None)

if TYPE_CHECKING:
    from shockwave.experiments.sweep import SweepRun
    from shockwave.simulator.mechanics import Mechanics


# Options of several commands here.
TraceOpt = Annotated[
    Path,
    dataset_option(
        "--trace",
        "trace",
        "Trace file (12-column TSV, or Gavel's), or a bundled trace (canonical-120, ...: `shockwave datasets`).",
    ),
]
GpusPerServerOpt = Annotated[int, typer.Option("--gpus-per-server", help="GPUs per server.")]

# Options of `simulate` alone.
POLICY_HELP = f"A built-in policy ({', '.join(BUILTIN_NAMES)}), an alias (gavel, ossp, mst) or file.py:Class."
RestartSecondsOpt = Annotated[
    float | None,
    typer.Option("--restart-seconds", help="Time a (re)started job loses (default: the preset's 20 s)."),
]
ReallocSecondsOpt = Annotated[
    float | None,
    typer.Option("--realloc-seconds", help="Gavel-style reallocation interval (default: the preset's 1000 s)."),
]
RestartByGangOpt = Annotated[
    str,
    typer.Option(
        "--restart-seconds-by-gang", help="Restart cost per gang size, e.g. '1:6.5,4:20' (others: the default)."
    ),
]
SwitchByGangOpt = Annotated[
    str,
    typer.Option(
        "--switch-seconds-by-gang",
        help="With --batch-sizes: what a batch-size switch within a round costs per gang size, e.g. '1:5.5,2:7' "
        "(others: the restart cost).",
    ),
]
ReferenceConfigOpt = Annotated[
    Path | None,
    dataset_option(
        "--config",
        "config",
        "Shockwave hyperparameters (a reference configuration: a file, or bundled: tacc-32gpus, scale-64gpus, ...); "
        "default: the tacc-32gpus values.",
    ),
]
BatchSizesOpt = Annotated[
    Path | None,
    typer.Option(
        "--batch-sizes",
        help="Replay the per-epoch batch sizes a real run observed (DIR/batch_sizes.json of `shockwave run`).",
    ),
]
MeasurementsOpt = Annotated[
    Path | None,
    typer.Option(
        "--measurements",
        help="What a real run measured (DIR/measurements.json of `shockwave run`): each job's own steps/s by GPU type "
        "and batch size, start-ups, switches and T_iso, and each round's length (needs --batch-sizes): a replay's jobs "
        "and rounds go as the real ones did; --throughputs (the run's table) gives the profiles and pair slowdowns.",
    ),
]
WindowOpt = Annotated[
    str | None,
    typer.Option("--window", help="A:B: end when jobs A..B-1 are done; metrics over them only (Gavel's window)."),
]
PricesOpt = Annotated[
    Path | None,
    typer.Option(
        "--prices",
        help="JSON/TOML file of dollars per GPU-hour by type: the result's cost, and the cost-aware policies' "
        "prices (default: Gavel's GCP prices, v100 0.74, p100 0.43, k80 0.135).",
    ),
]


TraceFormatOpt = Annotated[
    str,
    typer.Option(
        "--trace-format",
        help="auto: the project's or Gavel's trace (told apart by their columns); sia: Sia's workload CSV (needs "
        "--profiles): goodput-adaptive jobs under sia, else rigid jobs at the GPUs and batch size each line asks for.",
    ),
]
ProfilesOpt = Annotated[
    Path | None,
    typer.Option("--profiles", help="With --trace-format sia: the folder of Sia's per-application profiles."),
]


@app.command("simulate")
def simulate_cmd(
    trace: TraceOpt,
    policy: Annotated[str, typer.Option("--policy", help=POLICY_HELP)],
    gpus: GpusOpt = None,
    cluster: ClusterOpt = None,
    gpus_per_server: GpusPerServerOpt = 1,
    throughputs: ThroughputsOpt = None,
    round_seconds: PresetRoundOpt = None,
    restart_seconds: RestartSecondsOpt = None,
    realloc_seconds: ReallocSecondsOpt = None,
    restart_by_gang: RestartByGangOpt = "",
    switch_by_gang: SwitchByGangOpt = "",
    mechanics: MechanicsOpt = None,
    config: ReferenceConfigOpt = None,
    batch_sizes: BatchSizesOpt = None,
    measurements: MeasurementsOpt = None,
    window: WindowOpt = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Seeds the policies' random draws (Gavel's type shuffle); default: the seed a trace from `trace "
            "generate` was drawn with (as the reference simulators take one seed for both), else 0.",
            min=0,
        ),
    ] = None,
    policy_param: PolicyParamOpt = None,
    prices: PricesOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the result JSON on stdout.")] = False,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Also write result.json and rounds.csv here.")] = None,
    allow_unfinished: AllowUnfinishedOpt = False,
    trace_format: TraceFormatOpt = "auto",
    profiles: ProfilesOpt = None,
    tenants: TenantsOpt = None,
) -> None:
    """Simulate a policy on a trace and report makespan, JCT, finish-time fairness, utilisation and cost."""
    from shockwave.api import simulate  # looked up here, when it runs (tests replace it)
    from shockwave.core.cluster import ClusterSpec

    mech = _mechanics(
        mechanics,
        trace_format,
        round_seconds,
        restart_seconds,
        realloc_seconds,
        restart_by_gang,
        switch_by_gang,
    )
    spec = ClusterSpec.from_options(gpus, cluster, gpus_per_server)
    if out_dir is not None:
        ensure_writable(out_dir)
    with native_output_to_stderr(), simulation_progress() as on_round:
        typed = simulate(
            trace,
            policy,
            spec,
            mechanics=mech,
            throughputs=throughputs,
            config=config,
            batch_sizes=batch_sizes,
            measurements=measurements,
            on_round=on_round,
            window=None if window is None else parse_window(window),
            seed=seed,
            policy_params=policy_param or (),
            prices=prices,
            trace_format=trace_format,
            profiles=profiles,
            tenants=tenants,
        )
    result = with_command(typed.to_json_dict(), this_command())
    _report_run(result, typed.rounds, out_dir, as_json)
    exit_if_unfinished([result], allow_unfinished)


def _mechanics(
    name: str | None,
    trace_format: str,
    round_seconds: float | None,
    restart_seconds: float | None,
    realloc_seconds: float | None,
    restart_by_gang: str,
    switch_by_gang: str,
) -> Mechanics:
    """The named preset (None: the trace format's own) with what the flags change: the round, and the costs of
    restarts, switches and reallocations (the preset's own where a flag is not given)."""
    from shockwave.simulator.mechanics import preset

    chosen = preset(name, trace_format)
    by_gang = parse_gang_costs(restart_by_gang, "--restart-seconds-by-gang") if restart_by_gang else None
    switch_costs = parse_gang_costs(switch_by_gang, "--switch-seconds-by-gang") if switch_by_gang else None
    if round_seconds is not None:
        chosen = chosen.with_round_seconds(round_seconds)
    return chosen.with_overrides(restart_seconds, realloc_seconds, by_gang, switch_costs)


def _report_run(result: dict[str, Any], rounds: list[Any], out_dir: Path | None, as_json: bool) -> None:
    """Keep the run (with --out) and show it: with --json the result alone on stdout, so it can be piped; else the
    summary table."""
    from shockwave.results.report import print_run_summary, write_run

    if out_dir is not None:
        write_run(out_dir, result, rounds)
    if as_json:
        print(json.dumps(result))
    else:
        print_run_summary(out, result)


@app.command("compare")
def compare_cmd(
    trace: TraceOpt,
    output: Annotated[Path, typer.Option("--out", help="Folder for results.json/csv and figures/.")],
    gpus: GpusOpt = None,
    cluster: ClusterOpt = None,
    policies: PoliciesOpt = "published",
    throughputs: ThroughputsOpt = None,
    config: ConfigOpt = None,
    mechanics: MechanicsOpt = None,
    round_seconds: PresetRoundOpt = None,
    gpus_per_server: GpusPerServerOpt = 1,
    parallel: ParallelOpt = None,
    allow_unfinished: AllowUnfinishedOpt = False,
    trace_format: TraceFormatOpt = "auto",
    profiles: ProfilesOpt = None,
) -> None:
    """Run several policies on one trace side by side and compare them (table, JSON, CSV, figures)."""
    from shockwave.experiments.compare import CompareRequest, compare
    from shockwave.experiments.figures import comparison_figures
    from shockwave.results.report import print_comparison

    request = CompareRequest(
        trace,
        gpus,
        parse_policies(policies),
        throughputs=throughputs,
        config=config,
        mechanics=mechanics,
        round_seconds=round_seconds,
        gpus_per_server=gpus_per_server,
        cluster=cluster,
        trace_format=trace_format,
        profiles=profiles,
    )
    with saying_what_was_kept():
        results, errors = compare(
            request,
            output,
            workers=worker_count(parallel),
            console=err,
            show_progress=show_progress(),
            command=this_command(),
        )
    if results:
        print_comparison(out, results)
        print_paths(comparison_figures(results, output / "figures"))
        out.print(f"results: {output / 'results.json'}, {output / 'results.csv'}", markup=False, highlight=False)
    for policy, error in errors.items():
        err.print(f"[red]error:[/red] {escape(policy)} failed: {escape(error)}", highlight=False, soft_wrap=True)
    if errors:
        raise typer.Exit(1)
    exit_if_unfinished(results, allow_unfinished)


# Options of `sweep` alone.
SweepFileArg = Annotated[Path | None, typer.Argument(help="Sweep description (TOML); flags override it.")]
GenerateOpt = Annotated[
    list[str] | None,
    typer.Option("--generate", help="Generator parameters, e.g. 'jobs=120,lam=40' (repeatable); one trace per seed."),
]
SweepClustersOpt = Annotated[
    list[str] | None,
    typer.Option("--cluster", help="A cluster by GPU type (TYPE:GPUS[:PER_SERVER],...); repeat for more."),
]


@app.command("sweep")
def sweep_cmd(
    spec_file: SweepFileArg = None,
    output: Annotated[Path | None, typer.Option("--out", help="Results folder (finished cells are kept).")] = None,
    traces: Annotated[
        list[Path] | None, dataset_option("--trace", "trace", "Trace file or bundled trace (repeatable).")
    ] = None,
    generate: GenerateOpt = None,
    gpus: Annotated[str | None, typer.Option("--gpus", help="Cluster sizes, comma-separated.")] = None,
    clusters: SweepClustersOpt = None,
    policies: Annotated[
        str | None, typer.Option("--policies", help="Comma-separated names or groups (published, all, ...).")
    ] = None,
    seeds: Annotated[str | None, typer.Option("--seeds", help="Generator seeds, comma-separated.")] = None,
    throughputs: ThroughputsOpt = None,
    config: ConfigOpt = None,
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
    raw.update(_replaced_by_flags(policies, seeds, gpus, clusters, mechanics, throughputs, config))
    raw["traces"] = [*as_list(raw.get("traces")), *(str(t.resolve()) for t in traces or [])]
    raw["generate"] = [*as_list(raw.get("generate")), *(parse_generator(g) for g in generate or [])]
    spec = spec_from(raw, spec_file.parent if spec_file is not None else Path.cwd(), spec_file)
    _require_ray_flags(ray, address)
    folder = _sweep_folder(output, spec_file)
    with saying_what_was_kept():
        run = run_sweep(
            spec,
            folder,
            workers=worker_count(parallel),
            ray=ray,
            address=address,
            console=err,
            show_progress=show_progress(),
            command=this_command(),
            table=out,
        )
    _report_sweep(run, folder, allow_unfinished)


def _replaced_by_flags(
    policies: str | None,
    seeds: str | None,
    gpus: str | None,
    clusters: list[str] | None,
    mechanics: str | None,
    throughputs: Path | None,
    config: Path | None,
) -> dict[str, Any]:
    """The sweep file's keys that the flags given replace (--trace and --generate add to its lists instead); paths
    absolute, as the file's own are taken from its folder."""
    flags: dict[str, Any] = {}
    if policies is not None:
        flags["policies"] = parse_policies(policies)
    if seeds is not None:
        flags["seeds"] = parse_ints(seeds, "--seeds", minimum=0)
    if gpus is not None:
        flags["gpus"] = parse_ints(gpus, "--gpus")
    if clusters:
        flags["clusters"] = clusters
    if mechanics is not None:
        flags["mechanics"] = mechanics
    for key, path in (("throughputs", throughputs), ("config", config)):
        if path is not None:
            flags[key] = str(path.resolve())
    return flags


def _require_ray_flags(ray: bool, address: str | None) -> None:
    """--address only with --ray, and Ray installed for it: refused before any folder is made."""
    if address is not None and not ray:
        raise InputError("--address joins a Ray cluster: add --ray")
    if ray:
        require_extra("ray", "cluster", "--ray")


def _sweep_folder(output: Path | None, spec_file: Path | None) -> Path:
    """--out, or results/<the sweep file's name>: a sweep run again finds its finished cells there."""
    folder = output or (Path("results") / spec_file.stem if spec_file is not None else None)
    if folder is None:
        raise InputError("--out is required without a sweep file")
    return folder


def _report_sweep(run: SweepRun, folder: Path, allow_unfinished: bool) -> None:
    """Count the cells, name the failed ones (exit 1) and those with unfinished jobs (exit 3 unless allowed)."""
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
    print_paths(paths)


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
    config: ConfigOpt = None,
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
        if show_progress():
            err.print(f"{row.gpus} GPUs, {row.policy}: {row.wall_s:.1f} s", highlight=False)

    try:
        rows = run_study(study, output, on_row=finished)
    except RuntimeError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    out.print(table(rows), markup=False, highlight=False)
    print_paths(write_outputs(study, rows, output))


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
    trace.trace_check(path, throughputs=None, gpus=32, cluster=None, as_json=False)
    compare_cmd(trace=path, gpus=32, cluster=None, output=output_dir, policies=DEMO_POLICIES, mechanics="corrected")
