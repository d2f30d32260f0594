"""What the reference-diff harnesses share (`gavel_diff.py`, `sia_reference.py`, `sia_jitter.py`): cells run side by
side with a cache per cell, the distribution of ours / reference over them, its table and its figure, and jittered
copies of a workload.

A cell is one simulation both simulators run; its key names its folder under `--out`, where each side's numbers
are kept as JSON once a run finishes, so an interrupted screen resumes where it stopped and a finished one is
re-reported without running anything.
"""

from __future__ import annotations

import csv
import json
import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(stderr=True, width=200)


def cached(folder: Path, name: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`folder/name.json`, computed and written (atomically) the first time."""
    path = folder / f"{name}.json"
    if path.exists():
        return json.loads(path.read_text())
    value = compute()
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(value, indent=1))
    partial.replace(path)
    return value


def run_all(cells: Sequence[Any], run: Callable[[Any], dict[str, Any]], workers: int) -> list[dict[str, Any]]:
    """`run(cell)` for every cell, `workers` at a time (each run's work is in subprocesses), in the cells' order; a
    failed cell is reported and left out, so one broken cell does not lose a screen of hours."""
    done: dict[int, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run, cell): i for i, cell in enumerate(cells)}
        for count, future in enumerate(as_completed(futures), start=1):
            i = futures[future]
            try:
                done[i] = future.result()
            except Exception as exc:  # a screen reports every cell it could not run
                console.print(f"[red]cell {cells[i]} failed:[/red] {exc}", highlight=False)
                continue
            row = done[i]
            console.print(f"{count}/{len(cells)} {row['key']}: {describe_ratio(row)}", highlight=False)
    return [done[i] for i in sorted(done)]


def describe_ratio(row: dict[str, Any]) -> str:
    return ", ".join(f"{metric} {ratio - 1:+.2%}" for metric, ratio in row["ratios"].items())


@dataclass(frozen=True)
class Spread:
    """The distribution of one metric's ours / reference over cells."""

    cells: int
    within_1pct: int
    within_3pct: int
    median: float
    p95: float
    worst: float
    """Largest |ours / reference - 1|."""
    low: float
    high: float

    @classmethod
    def of(cls, ratios: Iterable[float]) -> Spread:
        values = sorted(ratios)
        errors = sorted(abs(r - 1) for r in values)
        return cls(
            cells=len(values),
            within_1pct=sum(e <= 0.01 for e in errors),
            within_3pct=sum(e <= 0.03 for e in errors),
            median=statistics.median(errors),
            p95=quantile(errors, 0.95),
            worst=errors[-1],
            low=values[0],
            high=values[-1],
        )


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile by the nearest rank (a cell that is there, not an interpolation between two)."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def spreads(rows: Sequence[dict[str, Any]], group: str, metric: str) -> dict[str, Spread]:
    """Spread of `metric` per value of `group` (a cell field), and over all cells ("all")."""
    groups: dict[str, list[float]] = {}
    for row in rows:
        groups.setdefault(str(row["cell"][group]), []).append(row["ratios"][metric])
    out = {name: Spread.of(values) for name, values in sorted(groups.items())}
    out["all"] = Spread.of(row["ratios"][metric] for row in rows)
    return out


def markdown_table(by_group: dict[str, Spread], label: str) -> list[str]:
    """The spread as a markdown table: cells, share within 1% and 3%, median, p95 and worst |error|, range."""
    lines = [
        f"| {label} | cells | within 1% | within 3% | median error | p95 error | worst error | ours / reference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in by_group.items():
        lines.append(
            f"| {name} | {s.cells} | {s.within_1pct / s.cells:.1%} | {s.within_3pct / s.cells:.1%} "
            f"| {s.median:.3%} | {s.p95:.3%} | {s.worst:.3%} | {s.low:.4f} - {s.high:.4f} |"
        )
    return lines


def print_spreads(by_group: dict[str, Spread], title: str, label: str) -> None:
    table = Table(title=title, title_justify="left")
    for header in (label, "cells", "within 1%", "within 3%", "median err", "p95 err", "worst err", "range"):
        table.add_column(header, justify="left" if header == label else "right")
    for name, s in by_group.items():
        table.add_row(
            name, str(s.cells), f"{s.within_1pct / s.cells:.1%}", f"{s.within_3pct / s.cells:.1%}",
            f"{s.median:.3%}", f"{s.p95:.3%}", f"{s.worst:.3%}", f"{s.low:.4f}-{s.high:.4f}",
        )  # fmt: skip
    Console(width=150).print(table)


def worst_cells(rows: Sequence[dict[str, Any]], metric: str, count: int) -> list[dict[str, Any]]:
    """The `count` cells furthest from the reference on `metric`, furthest first."""
    return sorted(rows, key=lambda row: -abs(row["ratios"][metric] - 1))[:count]


def figure(rows: Sequence[dict[str, Any]], group: str, metric: str, path: Path, title: str) -> Path:
    """One strip per group value: each cell's ours / reference - 1 (in %), with the 1% band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({str(row["cell"][group]) for row in rows})
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(names) + 1.6))
    ax.axvspan(-1, 1, color="tab:green", alpha=0.12, label="within 1%")
    for y, name in enumerate(names):
        errors = [100 * (row["ratios"][metric] - 1) for row in rows if str(row["cell"][group]) == name]
        ax.scatter(errors, [y] * len(errors), s=14, alpha=0.7, color="tab:blue")
    ax.set_yticks(range(len(names)), [f"{n} ({sum(str(r['cell'][group]) == n for r in rows)})" for n in names])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"{metric}: ours / reference - 1 (%)")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def replace_between(page: Path, markers: tuple[str, str], lines: Sequence[str]) -> None:
    """Put `lines` between the page's two marker comments (which must be there)."""
    text = page.read_text()
    begin, end = markers
    if begin not in text or end not in text:
        raise SystemExit(f"{page}: the markers {begin!r} and {end!r} are missing")
    start, stop = text.index(begin) + len(begin), text.index(end)
    page.write_text(text[:start] + "\n" + "\n".join(lines) + "\n" + text[stop:])


def jittered(source: Path, seed: int, folder: Path) -> Path:
    """A copy of a Sia-format workload with each arrival later by U[0, 1) s (`random.Random(seed)`, one draw per line
    in file order, 3 decimals; seed 0: unchanged). A second cannot matter to a job that runs for hours, but it moves
    arrivals across round boundaries: what moves then is the run's noise, not its fidelity."""
    rows = _rows(source)
    if seed:
        rng = random.Random(seed)
        for row in rows:
            row["time"] = f"{float(row['time']) + rng.random():.3f}"
    return _written(rows, folder / f"{source.parent.name}-{source.stem}-{seed}.csv")


def reordered(source: Path, seed: int, folder: Path) -> Path:
    """A copy of a Sia-format workload with its lines in another order (`random.Random(seed).shuffle`; seed 0:
    unchanged), arrivals as they are. Both simulators list jobs in file order, so their solvers meet the same ties in
    another column order: what moves then is how the ties were broken."""
    rows = _rows(source)
    if seed:
        random.Random(seed).shuffle(rows)
    return _written(rows, folder / f"{source.parent.name}-{source.stem}-order{seed}.csv")


def _rows(source: Path) -> list[dict[str, str]]:
    with source.open(newline="") as file:
        return list(csv.DictReader(file))


def _written(rows: list[dict[str, str]], path: Path) -> Path:
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path
