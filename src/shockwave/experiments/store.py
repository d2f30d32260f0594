"""Where experiments keep their results, so nothing finished is lost and `report` can re-render it.

A comparison folder holds results.json (a list of `simulate --json` objects, each with its per-round timeline),
results.csv (one row per policy) and <policy>/result.json. A sweep folder holds sweep.json (what was asked),
cells/<key>.json (one finished cell each), cells/<key>.error.json (the last failure of a cell), results.json and
results.csv (every finished cell), summary.csv (aggregated over seeds) and figures/. Files are written to a temporary
name and renamed, so an interrupted write never leaves half a file.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from shockwave.core.errors import InputError
from shockwave.experiments.cell import digest_of_key
from shockwave.io import jsonfile
from shockwave.io.atomic import ensure_writable, write_atomically
from shockwave.io.text import RESULTS_LIMIT
from shockwave.results.report import check_result, comparison_rows

CELLS = "cells"


def write_json(path: Path, data: Any) -> None:
    write_atomically(path, json.dumps(data, indent=1))


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = list(dict.fromkeys(key for row in rows for key in row))
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(path, text.getvalue())


def read_json(path: Path) -> Any:
    return jsonfile.read_json(path, "results", RESULTS_LIMIT)


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


def finished_cells(folder: Path) -> dict[str, Path]:
    """Digest -> file of every finished cell here: found by content, whatever the readable part of its name."""
    cells = folder / CELLS
    if not cells.is_dir():
        return {}
    names = sorted(p for p in cells.glob("*.json") if not p.name.endswith(".error.json"))
    return {digest_of_key(p.name[: -len(".json")]): p for p in names}


def read_cells(folder: Path, keys: list[str]) -> list[dict[str, Any]]:
    """The finished cells of `keys`; a damaged one is an InputError that names the file to remove."""
    found = finished_cells(folder)
    results = []
    for path in (found[digest] for digest in map(digest_of_key, keys) if digest in found):
        try:
            results.append(_read_cell(path))
        except InputError as exc:
            raise InputError(
                f"{exc.reason}; this cell's result is damaged: run the sweep again (it sets the file aside and "
                f"computes the cell anew) or remove {path}",
                path=path,
                line=exc.line,
                field=exc.field,
            ) from None
    return results


def reusable_cells(folder: Path, keys: list[str]) -> tuple[dict[str, Path], list[str]]:
    """The finished cells of `keys` that read back as results (digest -> file), and a warning for each damaged one
    (a write cut short by a full disk, a hand edit): it is renamed to <file>.damaged, kept for a look but no longer
    found, so that the sweep computes the cell anew instead of stopping on it."""
    found = finished_cells(folder)
    reusable, warnings = {}, []
    for digest in dict.fromkeys(map(digest_of_key, keys)):
        path = found.get(digest)
        if path is None:
            continue
        try:
            _read_cell(path)
        except InputError as exc:
            aside = path.with_name(f"{path.name}.damaged")
            os.replace(path, aside)
            warnings.append(f"{exc}: a damaged cell, moved to {aside.name}; it is computed again")
            continue
        reusable[digest] = path
    return reusable, warnings


def _read_cell(path: Path) -> dict[str, Any]:
    return check_result(read_json(path), path, needs=("cell",))


# -- one writer, one kind of results per folder ---------------------------------------------------------------------
LOCK = ".shockwave.lock"
MARKER = ".shockwave-folder.json"


@contextlib.contextmanager
def claimed(folder: Path, kind: str, identity: str | None = None) -> Iterator[None]:
    """Hold `folder` while a sweep or a comparison (`kind`) writes it. Refused: a folder another process is writing,
    a folder of the other kind, and (comparisons) one that holds a comparison of another trace, cluster or settings
    (`identity`): their results would mix. A sweep folder takes any sweep: a changed grid adds its new cells."""
    ensure_writable(folder)
    try:  # never through a link planted at its name: opening would create the file it points to
        handle = os.open(folder / LOCK, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        reason = (
            "it is a link, and links are never followed: remove it" if (folder / LOCK).is_symlink() else exc.strerror
        )
        raise InputError(f"cannot open the folder's lock file: {reason}", path=folder / LOCK) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        raise InputError(
            "another shockwave sweep or comparison is writing this folder: wait for it, or choose another --out",
            path=folder,
        ) from None
    try:
        _check_kind(folder, kind, identity)
        write_json(folder / MARKER, {"kind": kind, "identity": identity})
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        os.close(handle)


def _check_kind(folder: Path, kind: str, identity: str | None) -> None:
    marker = folder / MARKER
    held: dict[str, Any] | None = None
    if marker.exists():
        held = read_json(marker)
    elif (folder / "sweep.json").exists():
        held = {"kind": "sweep"}  # written before folders were marked
    elif (folder / "results.json").exists():
        held = {"kind": "comparison"}
    if not isinstance(held, dict) or "kind" not in held:
        return
    if held["kind"] != kind:
        raise InputError(
            f"this folder holds a {held['kind']}'s results; a {kind} would mix with them: choose another --out",
            path=folder,
        )
    if kind == "comparison" and held.get("identity") not in (None, identity):
        raise InputError(
            "this folder holds a comparison of another trace, cluster or settings; choose another --out "
            "(or delete it to start again)",
            path=folder,
        )
