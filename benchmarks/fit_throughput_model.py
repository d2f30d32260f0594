"""Fit the built-in throughput model's constants to public throughput tables and report its errors per GPU type.

    python benchmarks/fit_throughput_model.py [TABLE.json] [--wisr WISR.json] [--gavel GAVEL.json]

Fits each family of `shockwave.workload_model.builtin_throughput` by least squares on log throughput (relative error):
v100 to the isolated ("null") v100 entries of TABLE (default: ../shared/reference/throughputs/tacc_throughputs.json
beside the project, the table the canonical trace was made with), p100 and k80 to those of GAVEL (default:
../shared/reference/gavel/simulation_throughputs.json). Prints the rounded constants as Python dicts to paste into
V100_CONSTANTS, P100_CONSTANTS and K80_CONSTANTS, and per type the median / worst relative error of those rounded
constants per family (v100 also vs the wisr table). Families measured at one batch size only (A3C, CycleGAN) are not
fitted. Deterministic: fixed starting point, no randomness.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping
from pathlib import Path

from scipy.optimize import least_squares

from shockwave.workload_model.builtin_throughput import PARAMETERS, BuiltinThroughputs, step_time_ms
from shockwave.workload_model.throughput import TableThroughputs

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TABLE = ROOT / ".." / "shared" / "reference" / "throughputs" / "tacc_throughputs.json"
DEFAULT_GAVEL = ROOT / ".." / "shared" / "reference" / "gavel" / "simulation_throughputs.json"
GAVEL_FITTED_TYPES = ("p100", "k80")
"""Types fitted to Gavel's table; v100 is fitted to TABLE."""
SIGNIFICANT_DIGITS = 3

Entries = dict[tuple[str, int, int], float]


def read_entries(path: str | Path, gpu_type: str) -> Entries:
    """(model, batch size, gpus) -> it/s from a table's "null" entries of one GPU type (zeros dropped)."""
    return TableThroughputs.from_json(path).entries(gpu_type)


def read_v100(path: str | Path) -> Entries:
    return read_entries(path, "v100")


def _round(x: float) -> float:
    return float(f"{x:.{SIGNIFICANT_DIGITS}g}") if x > 1e-9 else 0.0


def _least_squares(
    points: Mapping[tuple[int, int], float], names: tuple[str, ...], fixed: dict[str, float]
) -> dict[str, float]:
    """Best constants `names` (others held at `fixed`) for {(batch size, gpus): it/s}, in log space."""
    start = {"a": 5.0, "c": 50.0, "p": 1.0, "s0": 5.0, "s_intra": 5.0, "s_inter": 5.0}
    lower, upper = {"p": 0.5}, {"p": 1.5}

    def constants(x: list[float]) -> dict[str, float]:
        return fixed | {n: float(v) for n, v in zip(names, x, strict=True)}

    def residuals(x: list[float]) -> list[float]:
        k = constants(x)
        return [math.log(1000.0 * g / step_time_ms(k, b, g)) - math.log(v) for (b, g), v in sorted(points.items())]

    result = least_squares(
        residuals,
        [start[n] for n in names],
        bounds=([lower.get(n, 0.0) for n in names], [upper.get(n, math.inf) for n in names]),
        x_scale="jac",
        xtol=1e-12,
        ftol=1e-12,
    )
    return constants(list(result.x))


def fit_family(points: Mapping[tuple[int, int], float]) -> dict[str, float]:
    """Constants of one family from {(batch size, gpus): it/s}; sync terms stay 0 without multi-GPU data.

    The exponent p is rounded to 0.01 and the rest refitted with it, since (B/64)**p amplifies p's rounding error.
    """
    names = PARAMETERS if any(g > 1 for _, g in points) else PARAMETERS[:3]
    zeros = dict.fromkeys(PARAMETERS, 0.0)
    p = round(float(_least_squares(points, names, zeros)["p"]), 2)
    best = _least_squares(points, tuple(n for n in names if n != "p"), zeros | {"p": p})
    return {name: _round(value) if name != "p" else p for name, value in best.items()}


def fit(entries: Entries) -> dict[str, dict[str, float]]:
    """Rounded constants for every family in `entries` measured at two batch sizes or more, in name order."""
    families = sorted(f for f in {m for m, _, _ in entries} if len({b for m, b, _ in entries if m == f}) > 1)
    return {f: fit_family({(b, g): v for (m, b, g), v in entries.items() if m == f}) for f in families}


def relative_errors(model: BuiltinThroughputs, entries: Entries, gpu_type: str = "v100") -> dict[str, list[float]]:
    """Family -> |model / table - 1| over the table's entries (of `gpu_type`) that the model answers."""
    out: dict[str, list[float]] = {}
    for (m, b, g), v in sorted(entries.items()):
        if m in model.constants.get(gpu_type, {}):
            out.setdefault(m, []).append(abs(model.throughput(m, b, g, gpu_type) / v - 1.0))
    return out


def _format_constants(gpu_type: str, constants: Mapping[str, Mapping[str, float]]) -> str:
    rows = []
    for family, k in constants.items():
        values = ", ".join(f'"{name}": {value!r}' for name, value in k.items())
        rows.append(f'    "{family}": {{{values}}},')
    return f"{gpu_type.upper()}_CONSTANTS: dict[str, dict[str, float]] = {{\n" + "\n".join(rows) + "\n}"


def error_rows(model: BuiltinThroughputs, tables: Mapping[str, Entries], gpu_type: str = "v100") -> list[list[str]]:
    """One row per family and an overall row: n, then median and worst relative error (%) against each table."""
    errors = {name: relative_errors(model, entries, gpu_type) for name, entries in tables.items()}
    families = sorted({f for per_family in errors.values() for f in per_family})
    rows = []
    for label in [*families, "overall"]:
        row = [label]
        for per_family in errors.values():
            e = [x for f, xs in per_family.items() if label in (f, "overall") for x in xs]
            row += [str(len(e)), f"{100 * statistics.median(e):.1f}", f"{100 * max(e):.1f}"]
        rows.append(row)
    return rows


def disagreement(a: Entries, b: Entries) -> tuple[float, float]:
    """Median and worst |b / a - 1| over the entries both tables hold: how far apart the tables themselves are."""
    e = [abs(b[k] / a[k] - 1.0) for k in sorted(a.keys() & b.keys())]
    return statistics.median(e), max(e)


def _print_table(headers: list[str], rows: list[list[str]], title: str) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print("\t".join(headers))
        for row in rows:
            print("\t".join(row))
        return
    table = Table(title=title)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    Console(width=120).print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", nargs="?", type=Path, default=DEFAULT_TABLE, help="table to fit v100 to (Gavel JSON)")
    parser.add_argument("--wisr", type=Path, default=None, help="second v100 table to report (default: beside TABLE)")
    parser.add_argument("--gavel", type=Path, default=DEFAULT_GAVEL, help="table to fit p100 and k80 to (Gavel JSON)")
    args = parser.parse_args(argv)
    wisr = args.wisr or args.table.parent / "wisr_throughputs.json"

    fitted = {"v100": read_v100(args.table)}
    if args.gavel.exists():
        fitted |= {gpu_type: read_entries(args.gavel, gpu_type) for gpu_type in GAVEL_FITTED_TYPES}
    else:
        print(f"# {args.gavel} not found: p100 and k80 not fitted")
    constants = {gpu_type: fit(entries) for gpu_type, entries in fitted.items()}
    model = BuiltinThroughputs(constants)
    for gpu_type, per_family in constants.items():
        source = args.table if gpu_type == "v100" else args.gavel
        print(f"# fitted to {gpu_type} 'null' entries of {source.name}, least squares on log throughput")
        print(_format_constants(gpu_type, per_family))

    for gpu_type, entries in fitted.items():
        source = args.table if gpu_type == "v100" else args.gavel
        tables = {source.stem.removesuffix("_throughputs"): entries}
        if gpu_type == "v100" and wisr.exists() and wisr.resolve() != args.table.resolve():
            tables["wisr"] = read_v100(wisr)
        headers = ["family"] + [f"{t} {col}" for t in tables for col in ("n", "median", "worst")]
        title = f"built-in model on {gpu_type}: relative error of throughput (%)"
        _print_table(headers, error_rows(model, tables, gpu_type), title)
        if "wisr" in tables:
            median, worst = disagreement(entries, tables["wisr"])
            print(f"wisr vs {args.table.name} itself: median {100 * median:.1f}%, worst {100 * worst:.1f}%")


if __name__ == "__main__":
    main()
