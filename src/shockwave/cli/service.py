"""The scheduler service: `serve`, and the clients `submit`, `status`, `cancel` and `logs`."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from shockwave.cli.common import (
    AddressOpt,
    ConfigOpt,
    JobCommandOpt,
    MaxRestartsOpt,
    PolicyParamOpt,
    RayClusterOpt,
    RoundSecondsOpt,
    ServiceDirOpt,
    TenantsOpt,
    ThroughputsOpt,
    err,
    native_output_to_stderr,
    out,
    saying_what_was_kept,
)
from shockwave.results.provenance import this_command

app = typer.Typer(rich_markup_mode=None)


# Options of `serve` alone.
ServeDirOpt = Annotated[
    Path, typer.Option("--out", help="The service's folder: queue, journal, checkpoints, logs, endpoint.json.")
]
ServeGpusOpt = Annotated[
    int | None, typer.Option("--gpus", min=1, help="GPUs of the default type, instead of --cluster.")
]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue the service in --out after a crash or a stop.")]
TenantOpt = Annotated[
    str | None,
    typer.Option("--tenant", help="Act as this tenant, with its token (DIR/tenants/NAME.token); default: the admin."),
]


@app.command("serve")
def serve_cmd(
    output: ServeDirOpt,
    cluster: RayClusterOpt = None,
    gpus: ServeGpusOpt = None,
    policy: Annotated[str, typer.Option("--policy", help="Policy name or alias, or file.py:Class.")] = "shockwave",
    policy_param: PolicyParamOpt = None,
    config: ConfigOpt = None,
    round_seconds: RoundSecondsOpt = 30.0,
    address: AddressOpt = None,
    port: Annotated[int, typer.Option("--port", help="The API's port on 127.0.0.1 (default: any free one).")] = 0,
    resume: ResumeOpt = False,
    throughputs: ThroughputsOpt = None,
    max_restarts: MaxRestartsOpt = 3,
    command: JobCommandOpt = None,
    tenants: TenantsOpt = None,
) -> None:
    """A long-running scheduler on Ray: jobs are submitted, watched and cancelled through its API (`submit`,
    `status`, `cancel`, `logs`, the dashboard at its URL); SIGTERM or Ctrl-C stops it, `--resume` continues it
    (with the same --policy and --job-command: what runs is never taken from its journal)."""
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
        tenants=tenants,
    )
    stop = threading.Event()
    with saying_what_was_kept(_how_to_continue(output, policy, command)), native_output_to_stderr():
        result = serve(request, stop, command=this_command(), ready=_stopping_on_signals(stop, output))
    print_run_summary(out, result)
    out.print(f"results: {output / 'results.json'}", markup=False, highlight=False)


def _stopping_on_signals(stop: threading.Event, output: Path) -> Callable[[str], None]:
    """What serve calls once it listens: from then on SIGTERM and Ctrl-C set `stop`, so running jobs checkpoint
    before the service ends; a second one ends it at once."""
    import signal

    def stopping(signum: int, frame: Any) -> None:
        if stop.is_set():  # asked twice: do not wait for the jobs' checkpoints
            raise KeyboardInterrupt
        err.print("stopping: running jobs checkpoint and exit (again to stop at once)", highlight=False)
        stop.set()

    def ready(url: str) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):  # after Ray's own handlers, which would end the process
            signal.signal(signum, stopping)
        err.print(f"serving on {url} ({output / 'endpoint.json'} has its token)", markup=False, highlight=False)

    return ready


def _how_to_continue(output: Path, policy: str, command: str | None) -> str:
    """What an interrupted service leaves on disk, and the command that continues it (with what is never taken from
    its journal: the policy and the job command)."""
    import shlex

    again = ["shockwave", "serve", "--resume", "--out", str(output), "--policy", policy]
    return (
        f"the journal {output / 'journal.sqlite'} and the queue keep every job; "
        f"`{shlex.join([*again, *(('--job-command', command) if command else ())])}` continues the service"
    )


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
    tenant: TenantOpt = None,
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
    job = ServiceClient.find(output, tenant).submit(spec, spec_file)
    out.print(f"submitted {job.name} (job {job.id})", markup=False, highlight=False)


@app.command("status")
def status_cmd(
    output: ServiceDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the jobs as JSON on stdout.")] = False,
    tenant: TenantOpt = None,
) -> None:
    """The service's queue (a tenant's: its own jobs): each job's tenant, state, GPUs, progress, expected finish and
    finish-time fairness (rho)."""
    from shockwave.service.client import ServiceClient
    from shockwave.service.status import queue_table

    jobs = ServiceClient.find(output, tenant).jobs()
    if as_json:
        print(json.dumps([job.model_dump(mode="json") for job in jobs], indent=1))
        return
    out.print(queue_table(jobs) if jobs else "no jobs")


@app.command("cancel")
def cancel_cmd(
    name: Annotated[str, typer.Argument(help="The job's name.")],
    output: ServiceDirOpt = None,
    tenant: TenantOpt = None,
) -> None:
    """Cancel a queued or running job (the scheduler stops a running one); cancelling it again changes nothing."""
    from shockwave.service.client import ServiceClient

    job = ServiceClient.find(output, tenant).cancel(name)
    out.print(f"cancelled {job.name}", markup=False, highlight=False)


@app.command("logs")
def logs_cmd(
    name: Annotated[str, typer.Argument(help="The job's name.")],
    output: ServiceDirOpt = None,
    lines: Annotated[int, typer.Option("--lines", "-n", min=1, help="How many of the last lines.")] = 200,
    tenant: TenantOpt = None,
) -> None:
    """The end of a job's output."""
    from shockwave.service.client import ServiceClient

    sys.stdout.write(ServiceClient.find(output, tenant).logs(name, lines))


tenants_app = typer.Typer(rich_markup_mode=None, help="A shared service's tenants.")
app.add_typer(tenants_app, name="tenants")


@tenants_app.command("reload")
def tenants_reload_cmd(output: ServiceDirOpt = None) -> None:
    """Read the service's tenants file again (as SIGHUP does): taken at the next round when valid; else refused,
    naming file, tenant and field, and the tenants stay as they were."""
    from shockwave.service.client import ServiceClient

    for tenant in ServiceClient.find(output).reload_tenants():
        cap = "no cap" if tenant["max_gpus"] is None else f"max_gpus {tenant['max_gpus']}"
        out.print(f"{tenant['name']}: weight {tenant['weight']:g}, {cap}", markup=False, highlight=False)


@app.command("accounting")
def accounting_cmd(
    output: ServiceDirOpt = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only jobs submitted since: ISO 8601 (2026-12-01T08:00) or Unix seconds."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the accounts as JSON on stdout.")] = False,
) -> None:
    """GPU-seconds per tenant and GPU type, jobs, queueing delay, and each tenant's share against its entitlement,
    read from the service's folder (while it serves or after)."""
    from rich.table import Table

    from shockwave.service.accounting import accounts
    from shockwave.service.endpoint import service_dir

    summary = accounts(service_dir(output), _moment(since))
    if as_json:
        print(json.dumps(summary, indent=1))
        return
    table = Table(caption="share: of all GPU-seconds; contended: of equal-share progress while every tenant waited")
    for header in ("tenant", "weight", "entitled", "GPU-s", "by type", "share", "contended", "jobs", "mean wait s"):
        table.add_column(header)

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    for row in summary["tenants"]:
        table.add_row(
            row["tenant"],
            "-" if row["weight"] is None else f"{row['weight']:g}",
            share(row["entitled_share"]),
            f"{row['gpu_seconds']:.0f}",
            ", ".join(f"{t} {s:.0f}" for t, s in row["gpu_seconds_by_type"].items()) or "-",
            share(row["share"]),
            share(row["contended_share"]),
            ", ".join(f"{n} {state}" for state, n in row["jobs_by_state"].items()) or "0",
            "-" if row["mean_queue_delay_s"] is None else f"{row['mean_queue_delay_s']:.0f}",
        )
    out.print(table)


def _moment(text: str | None) -> float | None:
    """`--since` as Unix time: a number of seconds, or an ISO 8601 date or time (local time unless it says)."""
    import datetime

    from shockwave.core.errors import InputError

    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise InputError(
            f"--since takes an ISO 8601 time (2026-12-01T08:00) or Unix seconds, got {text!r}", field="since"
        ) from None
