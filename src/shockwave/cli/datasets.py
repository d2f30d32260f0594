"""`shockwave datasets`: the public datasets the package ships, by the names commands take for a file."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from shockwave.cli.common import out
from shockwave.datasets import DATASETS

app = typer.Typer()


@app.command("datasets")
def datasets(
    as_json: Annotated[bool, typer.Option("--json", help="Name, kind, description, source and path of each.")] = False,
) -> None:
    """List the bundled datasets (throughput tables, traces, configurations): each name works wherever its kind of
    file does (`--throughputs wisr`, `--trace canonical-120`, `--config tacc-32gpus`)."""
    if as_json:
        rows = [
            {"name": d.name, "kind": d.kind, "about": d.about, "source": d.source, "path": str(d.path)}
            for d in DATASETS.values()
        ]
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="bundled datasets (a file of the same name in the current folder wins)")
    for column in ("name", "kind", "what it is", "source"):
        table.add_column(column)
    for d in DATASETS.values():
        table.add_row(d.name, d.kind, d.about, d.source.split(",")[0])
    out.print(table)
