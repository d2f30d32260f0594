"""Where experiments keep their results, so nothing finished is lost and `report` can re-render it.

A comparison folder holds results.json (a list of `simulate --json` objects, each with its per-round timeline),
results.csv (one row per policy) and <policy>/result.json. A sweep folder holds sweep.json (what was asked),
cells/<key>.json (one finished cell each), cells/<key>.error.json (the last failure of a cell), results.json and
results.csv (every finished cell), summary.csv (aggregated over seeds) and figures/. Files are written to a temporary
name and renamed, so an interrupted write never leaves half a file.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from shockwave.atomic import write_atomically
from shockwave.errors import InputError
from shockwave.report import comparison_rows

CELLS = "cells"


def ensure_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise InputError(f"output folder is not writable: {exc.strerror}", path=folder) from None


def write_json(path: Path, data: Any) -> None:
    write_atomically(path, json.dumps(data, indent=1))


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False, newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(f.name, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("no results here", path=path) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read results: {exc}", path=path) from None


# -- comparisons -----------------------------------------------------------------------------------------------------
def write_comparison(folder: Path, results: list[dict[str, Any]]) -> None:
    for result in results:
        write_json(folder / result["policy"] / "result.json", result)
    write_json(folder / "results.json", results)
    write_csv(folder / "results.csv", comparison_rows(results))


# -- sweeps ----------------------------------------------------------------------------------------------------------
def cell_path(folder: Path, key: str) -> Path:
    return folder / CELLS / f"{key}.json"


def error_path(folder: Path, key: str) -> Path:
    return folder / CELLS / f"{key}.error.json"


def finished_keys(folder: Path) -> set[str]:
    cells = folder / CELLS
    if not cells.is_dir():
        return set()
    return {p.name[: -len(".json")] for p in cells.glob("*.json") if not p.name.endswith(".error.json")}


def read_cells(folder: Path, keys: list[str]) -> list[dict[str, Any]]:
    return [read_json(cell_path(folder, key)) for key in keys if cell_path(folder, key).exists()]
