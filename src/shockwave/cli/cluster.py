"""Commands that run real jobs: `run` a trace on Ray, and `profile-workloads` on this machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from shockwave.cli.common import (
    AddressOpt,
    AllowUnfinishedOpt,
    JobCommandOpt,
    MaxRestartsOpt,
    PolicyParamOpt,
    RayClusterOpt,
    ThroughputsOpt,
    err,
    exit_if_unfinished,
    native_output_to_stderr,
    out,
    parse_ints,
    saying_what_was_kept,
)
from shockwave.core.errors import InputError, require_extra
from shockwave.io.atomic import ensure_writable_file
from shockwave.results.provenance import this_command

app = typer.Typer(rich_markup_mode=None)


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
    sizes = parse_ints(batch_sizes, "--batch-sizes") if batch_sizes else None
    points = plan(names, sizes, parse_ints(gangs, "--gangs"))
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
    policy_param: PolicyParamOpt = None,
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
        policy_params=tuple(policy_param or ()),
    )
    again = ["shockwave", "run", "--resume", "--out", str(output), "--policy", policy]
    again += [*(("--journal", str(journal)) if journal else ()), *(("--job-command", command) if command else ())]
    kept = (
        f"the journal {request.journal_path} keeps every job's progress up to its last checkpoint; "
        f"`{shlex.join(again)}` continues the run"
    )
    with saying_what_was_kept(kept), native_output_to_stderr():
        result = run(request, command=this_command())
    print_run_summary(out, result)
    out.print(f"results: {output / 'results.json'}", markup=False, highlight=False)
    replay = shlex.join(replay_arguments(output, result))
    out.print(f"replay it: shockwave simulate {replay}", markup=False, highlight=False, soft_wrap=True)
    if result["unfinished_jobs"]:
        err.print(f"[red]failed jobs:[/red] {escape(str(result['failed_jobs']))}", highlight=False, soft_wrap=True)
    exit_if_unfinished([result], allow_unfinished)
