"""Commands that run real jobs: `run` a trace on Ray, and `profile-workloads` on this machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from shockwave.cli.common import (
    AddressOpt,
    AllowUnfinishedOpt,
    ConfigOpt,
    JobCommandOpt,
    MaxRestartsOpt,
    PolicyParamOpt,
    RayClusterOpt,
    RoundSecondsOpt,
    ThroughputsOpt,
    dataset_option,
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

if TYPE_CHECKING:
    from shockwave.runtime.run import RunRequest


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


# Options of `run` alone.
JournalOpt = Annotated[Path | None, typer.Option("--journal", help="SQLite journal; default DIR/journal.sqlite.")]
PlacementOpt = Annotated[
    str,
    typer.Option("--placement", help="Ray placement strategy of a gang: PACK, SPREAD, STRICT_PACK or STRICT_SPREAD."),
]
ReallocSecondsOpt = Annotated[
    float | None,
    typer.Option(
        "--realloc-seconds", help="Gavel-style policies reallocate at most this often (default: every round)."
    ),
]


@app.command("run")
def run_cmd(
    output: Annotated[Path, typer.Option("--out", help="Folder for results.json, the journal and checkpoints.")],
    trace: Annotated[Path | None, dataset_option("--trace", "trace", "Trace file or bundled trace.")] = None,
    policy: Annotated[str | None, typer.Option("--policy", help="Policy name or alias, or file.py:Class.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, help="GPUs to schedule.")] = None,
    cluster: RayClusterOpt = None,
    address: AddressOpt = None,
    round_seconds: RoundSecondsOpt = 10.0,
    time_scale: Annotated[float, typer.Option("--time-scale", help="Divide arrivals and step counts by this.")] = 1.0,
    journal: JournalOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --journal.")] = False,
    throughputs: ThroughputsOpt = None,
    config: ConfigOpt = None,
    policy_param: PolicyParamOpt = None,
    placement: PlacementOpt = "PACK",
    max_restarts: MaxRestartsOpt = 3,
    command: JobCommandOpt = None,
    realloc_seconds: ReallocSecondsOpt = None,
    allow_unfinished: AllowUnfinishedOpt = False,
) -> None:
    """Run a trace's jobs for real on Ray, scheduled round by round by the same policy code as the simulator.
    `--resume` continues a run from its journal: name its policy (and job command) again, as what runs is never
    taken from the journal."""
    from shockwave.core.cluster import ClusterSpec
    from shockwave.runtime.run import RunRequest, run

    policy = _require_run_inputs(resume, trace, policy, gpus, cluster)
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
    with saying_what_was_kept(_how_to_continue(request)), native_output_to_stderr():
        result = run(request, command=this_command())
    _report_real_run(output, result)
    exit_if_unfinished([result], allow_unfinished)


def _require_run_inputs(
    resume: bool, trace: Path | None, policy: str | None, gpus: int | None, cluster: str | None
) -> str:
    """The policy to run. A new run needs a trace and a cluster too; a resumed one finds those in its journal, but
    never its policy."""
    if resume and policy is None:
        raise InputError("--resume needs --policy: the run's policy, which is never taken from its journal")
    if not resume and (trace is None or policy is None or (gpus is None and cluster is None)):
        raise InputError("--trace, --policy and --gpus or --cluster are required (unless --resume continues a journal)")
    assert policy is not None
    return policy


def _how_to_continue(request: RunRequest) -> str:
    """What Ctrl-C leaves on disk, and the command that continues the run (with what is never taken from the
    journal: the policy and the job command)."""
    import shlex

    again = ["shockwave", "run", "--resume", "--out", str(request.out), "--policy", request.policy]
    again += [
        *(("--journal", str(request.journal)) if request.journal else ()),
        *(("--job-command", request.command) if request.command else ()),
    ]
    return (
        f"the journal {request.journal_path} keeps every job's progress up to its last checkpoint; "
        f"`{shlex.join(again)}` continues the run"
    )


def _report_real_run(output: Path, result: dict[str, Any]) -> None:
    """The run's summary, where its results are, the `simulate` command that replays it, and its failed jobs."""
    import shlex

    from shockwave.results.report import print_run_summary
    from shockwave.runtime.run import replay_arguments

    print_run_summary(out, result)
    out.print(f"results: {output / 'results.json'}", markup=False, highlight=False)
    replay = shlex.join(replay_arguments(output, result))
    out.print(f"replay it: shockwave simulate {replay}", markup=False, highlight=False, soft_wrap=True)
    if result["unfinished_jobs"]:
        err.print(f"[red]failed jobs:[/red] {escape(str(result['failed_jobs']))}", highlight=False, soft_wrap=True)
