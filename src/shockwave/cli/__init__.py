"""The `shockwave` command: one entry point for traces, simulation and reports.

Bad input raises InputError anywhere below; `main` turns it into one clear message on stderr and exit status 2.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer
from rich.markup import escape

from shockwave import __version__
from shockwave.cli import cluster, datasets, service, simulation, trace
from shockwave.cli.common import err, out
from shockwave.core.errors import InputError
from shockwave.workload_model.trace import TraceError

# Plain help (rich_markup_mode=None): rich's help panels label every flag "<bool>".
HELP = """Fair and efficient scheduling of ML training jobs on shared GPU clusters (Shockwave, NSDI'23).

Generate and check traces, simulate one policy or compare several, sweep grids of experiments, and run jobs for real
on Ray. Options of the commands come after it (`-v` and `-q` before it): `shockwave -q simulate --help`."""
app = typer.Typer(
    help=HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None
)
app.add_typer(trace.app, name="trace")
for commands in (simulation.app, cluster.app, service.app, datasets.app):
    app.add_typer(commands)  # no name: their commands are the root's own (`shockwave simulate`, `shockwave serve`)


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
