"""Human-readable rendering of results (rich tables); machine-readable output stays JSON/CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def _mix(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def print_trace_summary(console: Console, trace: Path, summary: dict[str, Any]) -> None:
    table = Table(title=f"trace {trace.name}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    lo, hi = summary["arrival_span_s"]
    t_lo, t_hi = summary["t_isolated_range_s"]
    rows = [
        ("jobs", str(summary["jobs"])),
        ("models", _mix(summary["models"])),
        ("GPUs per job", _mix(summary["scale_factors"])),
        ("modes", _mix(summary["modes"])),
        ("total work", f"{summary['total_gpu_hours']:.1f} GPU-hours"),
        ("arrivals", f"{lo:.0f} s to {hi:.0f} s"),
        ("isolated runtime", f"{t_lo / 3600:.2f} h to {t_hi / 3600:.2f} h"),
        ("lower bound: max(arrival + T_iso)", f"{summary['lower_bound_arrival_plus_t_iso_s']:.0f} s"),
    ]
    if "gpus" in summary:
        rows.append((f"lower bound: work / {summary['gpus']} GPUs", f"{summary['lower_bound_work_over_gpus_s']:.0f} s"))
        rows.append(("makespan lower bound", f"{summary['makespan_lower_bound_s']:.0f} s"))
    for row in rows:
        table.add_row(*row)
    console.print(table)
