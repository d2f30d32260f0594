"""What every command shares: the consoles, the options several commands take, and how output, Ctrl-C and
unfinished runs are reported."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from shockwave.core.errors import InputError, Interrupted
from shockwave.datasets import Kind, locate

# Piped output (CI logs, `| tee`) gets a width that fits the comparison table instead of rich's 80 columns.
out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 130)


def dataset_option(flag: str, kind: Kind, help: str) -> Any:
    """A typer option taking a file or a bundled dataset's name of `kind` (`shockwave datasets`)."""
    return typer.Option(flag, parser=lambda text: locate(text, kind), metavar="<path|name>", help=help)


ThroughputsOpt = Annotated[
    Path | None,
    dataset_option(
        "--throughputs",
        "throughputs",
        "Gavel/Shockwave throughput JSON, or a bundled table (tacc, wisr, gavel); default: the built-in model.",
    ),
]


MECHANICS_HELP = (
    "corrected (default: the simulation model new studies use) or reference (reproduces the Shockwave artifact's "
    "published numbers, quirks included: it stops when the cluster is briefly empty, leaving later jobs unrun) or "
    "gavel (the reference Gavel simulator's behaviour: no restart cost, allocations recomputed at most every 1920 s) "
    "or sia (Sia's simulator: a fixed clock, its port of Gavel's round robin; the default with --trace-format sia)."
)


MechanicsOpt = Annotated[str | None, typer.Option("--mechanics", help=MECHANICS_HELP)]


ConfigOpt = Annotated[
    Path | None,
    dataset_option(
        "--config", "config", "Shockwave hyperparameters (JSON), or a bundled configuration (tacc-32gpus, ...)."
    ),
]


RoundSecondsOpt = Annotated[float, typer.Option("--round-seconds", help="Round length (seconds).")]
TenantsOpt = Annotated[
    Path | None,
    typer.Option(
        "--tenants",
        help="TOML file of tenants (weight, max_gpus, guarantee per GPU type): the cluster is shared between them "
        "first, then among each one's jobs by the policy.",
    ),
]
PresetRoundOpt = Annotated[
    float | None,
    typer.Option(
        "--round-seconds",
        help="Round length (seconds); default: the mechanics preset's (120 s; gavel 360 s, as its driver; sia 60 s).",
    ),
]


GpusOpt = Annotated[
    int | None, typer.Option("--gpus", help="GPUs in the cluster, all of the default type (v100); or --cluster.")
]


ClusterOpt = Annotated[
    str | None,
    typer.Option("--cluster", help="GPU pools by type: TYPE:GPUS[:GPUS_PER_SERVER], comma-separated (v100:32,k80:16)."),
]


PolicyParamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--policy-param",
        help="KEY=VALUE: a parameter the policy declares (repeatable), e.g. entities=teams.toml (multi-level "
        "fairness: under serve, each job in its spec's entity).",
    ),
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
def native_output_to_stderr() -> Iterator[None]:
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
def saying_what_was_kept(kept: str | None = None) -> Iterator[None]:
    """Ctrl-C ends the command with exit 130 and says what is on disk (typer would end it silently)."""
    try:
        yield
    except Interrupted as exc:
        err.print(f"interrupted: {exc.kept}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(130) from None
    except KeyboardInterrupt:
        err.print(f"interrupted: {kept or 'nothing was written'}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(130) from None


def show_progress() -> bool:
    """Progress bars and per-cell lines, unless -q asked for errors only."""
    return logging.getLogger().level <= logging.INFO


def parse_floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"{flag} expects comma-separated numbers, got {text!r}") from None


def parse_window(text: str) -> tuple[int, int]:
    start, sep, stop = text.partition(":")
    if not (sep and start.isdigit() and stop.isdigit()) or int(start) >= int(stop):
        raise InputError(f"--window expects A:B with job ids A < B, got {text!r}")
    return int(start), int(stop)


def exit_if_unfinished(results: list[dict[str, Any]], allowed: bool) -> None:
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
def simulation_progress() -> Iterator[Callable[[Any], None] | None]:
    """A progress bar on a terminal (jobs finished, simulated time); nothing when stderr is a file or a pipe."""
    if not err.is_terminal or not show_progress():
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


PoliciesOpt = Annotated[
    str,
    typer.Option(
        "--policies",
        help="Comma-separated names, file.py:Class or groups: published (Shockwave and its paper's baselines), "
        "gavel-all, heterogeneity-aware, packed, all.",
    ),
]


ParallelOpt = Annotated[
    int | None, typer.Option("--jobs-in-parallel", "-j", min=1, help="Simulations at once; default: CPU count.")
]


def parse_policies(text: str) -> list[str]:
    from shockwave.policies.plugins import absolute_spec
    from shockwave.policies.registry import expand_groups

    names = expand_groups(p.strip() for p in text.split(",") if p.strip())
    return [absolute_spec(name) for name in names]  # a file: from here, not a sweep file


def worker_count(requested: int | None) -> int:
    import os

    return requested or os.cpu_count() or 1


def print_paths(paths: list[Path]) -> None:
    pngs = [p for p in paths if p.suffix == ".png"]
    if pngs:
        out.print("figures (PNG, with SVG beside each):")
        for path in pngs:
            out.print(f"  {path}", markup=False, highlight=False)


def as_list(value: Any) -> list[Any]:
    """A TOML key that may hold one value or a list of them."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def parse_gang_costs(text: str, flag: str) -> dict[int, float]:
    """'1:6.5,4:20' -> {1: 6.5, 4: 20.0}."""
    costs = {}
    for item in text.split(","):
        gang, _, seconds = item.partition(":")
        try:
            costs[int(gang)] = float(seconds)
        except ValueError:
            raise InputError(f"{flag} expects GANG:SECONDS pairs, got {item!r}") from None
    return costs


def parse_ints(text: str, flag: str, minimum: int = 1) -> list[int]:
    """Whole numbers only: '8.7' or 'nan' is refused rather than truncated to 8 or met later as a traceback."""
    values = parse_floats(text, flag)
    if not all(v.is_integer() and v >= minimum for v in values):
        raise InputError(f"{flag} expects comma-separated whole numbers >= {minimum}, got {text!r}")
    return [int(v) for v in values]


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


ServiceDirOpt = Annotated[
    Path | None,
    typer.Option("--out", help="The service's folder (that of `shockwave serve`); default: $SHOCKWAVE_SERVICE_DIR."),
]
