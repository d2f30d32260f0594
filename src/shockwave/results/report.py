"""Human-readable rendering of results (rich tables); machine-readable output stays JSON/CSV.

Every string taken from a file (policy, trace and model names, prices' names) is escaped before rich renders it: a
`[red]` in a hand-edited results.json is text to show, not markup to obey."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from shockwave.core.errors import InputError
from shockwave.io.atomic import write_atomically
from shockwave.results.model import Result, RoundRow


def _mix(counts: dict[str, int]) -> str:
    return escape(", ".join(f"{k} {v}" for k, v in counts.items()))


def print_trace_summary(console: Console, trace: Path, summary: dict[str, Any]) -> None:
    table = Table(title=escape(f"trace {trace.name}"), show_header=False, title_justify="left")
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
    ]
    if "lower_bound_arrival_plus_t_iso_s" in summary:
        rows.append(("lower bound: max(arrival + time alone)", f"{summary['lower_bound_arrival_plus_t_iso_s']:.0f} s"))
    if "lower_bound_work_over_gpus_s" in summary:
        rows.append((f"lower bound: work / {summary['gpus']} GPUs", f"{summary['lower_bound_work_over_gpus_s']:.0f} s"))
    if "makespan_lower_bound_s" in summary:
        on = f" on {summary['cluster']} (fluid)" if "cluster" in summary else ""
        rows.append((f"makespan lower bound{on}", f"{summary['makespan_lower_bound_s']:.0f} s"))
    for row in rows:
        table.add_row(*row)
    console.print(table)


def gpus_of(result: dict[str, Any]) -> str:
    """The cluster as a header names it: "32 GPUs", or on several types each pool ("aws 24, rtx 24 GPUs")."""
    pools = [part.split(":") for part in str(result.get("cluster") or "").split(",") if part]
    if len(pools) < 2:
        return f"{result['gpus']} GPUs"
    return ", ".join(f"{pool[0]} {pool[1]}" for pool in pools) + " GPUs"


def print_run_summary(console: Console, result: dict[str, Any]) -> None:
    title = (
        f"{result['policy']} on {Path(result['trace']).name}: {gpus_of(result)}, "
        f"{result['round_seconds']:g} s rounds, {result['mechanics']} mechanics"
    )
    table = Table(title=escape(title), show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    bound = result["makespan_lower_bound_s"]
    rows = [
        (
            "makespan",
            f"{result['makespan_s']:.1f} s"
            + (f" ({result['makespan_s'] / bound:.2f}x the lower bound)" if result["complete"] and bound > 0 else ""),
        ),
        ("average JCT", f"{result['avg_jct_s']:.1f} s"),
        ("worst finish-time fairness", f"{result['worst_ftf']:.3f}"),
        ("unfair jobs (rho > 1.05)", f"{100 * result['unfair_fraction']:.1f} %"),
        ("utilisation", f"{100 * result['utilization']:.1f} %"),
        ("rounds", str(result["num_rounds"])),
        ("makespan lower bound", f"{bound:.1f} s"),
        ("wall time", f"{result['wall_seconds']:.2f} s"),
    ]
    if "total_cost" in result:
        rows.append(("cost", cost_line(result)))
    elif "gpu_hours_by_type" in result:
        rows.append(("GPU-hours", escape(", ".join(f"{t} {h:.1f}" for t, h in result["gpu_hours_by_type"].items()))))
    if "slo_violations" in result:
        rows.append(("SLO violations", f"{result['slo_violations']} of {result['slo_jobs']} jobs with SLOs"))
    if "solver" in result:
        rows.append(("market solves", _solver_line(result["solver"])))
    if result.get("unfinished_jobs"):
        rows.insert(0, ("[red]unfinished jobs[/red]", f"[red]{unfinished_line(result)}[/red]"))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if result.get("tenants"):
        console.print(tenants_table(result))


def tenants_table(result: dict[str, Any]) -> Table:
    """What each tenant received: GPU-hours by type, and its share of progress while all waited, beside its weight's."""
    table = Table(title=f"tenants ({result.get('contended_rounds', 0)} rounds with every tenant waiting)")
    for header in ("tenant", "weight", "entitled", "contended share", "GPU-hours by type"):
        table.add_column(header)
    for row in result["tenants"]:
        share = row.get("contended_share")
        table.add_row(
            escape(str(row["tenant"])),
            f"{row['weight']:g}",
            f"{row['entitled_share']:.1%}",
            "-" if share is None else f"{share:.1%}",
            escape(", ".join(f"{t} {s / 3600:.1f}" for t, s in row["gpu_seconds_by_type"].items()) or "-"),
        )
    return table


def cost_line(result: dict[str, Any]) -> str:
    """'$12.34 (v100 10.0 GPU-h $7.40, k80 ...; prices: gcp)'."""
    hours, cost = result["gpu_hours_by_type"], result["cost_by_type"]
    parts = escape(", ".join(f"{t} {hours[t]:.1f} GPU-h ${cost[t]:.2f}" for t in cost))
    return f"${result['total_cost']:.2f} ({parts}; prices: {escape(result['prices']['name'])})"


def unfinished_line(result: dict[str, Any], shown: int = 12) -> str:
    """'29 of 30 never finished: 1, 2, ... (metrics cover finished jobs only)'."""
    ids = result["unfinished_jobs"]
    listed = ", ".join(map(str, ids[:shown])) + (", ..." if len(ids) > shown else "")
    return f"{len(ids)} of {len(ids) + len(result['jobs'])} never finished: {listed} (metrics cover finished jobs only)"


def _solver_line(stats: dict[str, Any]) -> str:
    line = (
        f"{stats['solves']}, latency p50 {stats['p50_s']:.2f} s / p95 {stats['p95_s']:.2f} s / "
        f"max {stats['max_s']:.2f} s; {stats['infeasible']} with fairness relaxed"
    )
    if stats["fallbacks"] or stats["node_limited"]:
        line += f"; {stats['fallbacks']} fallbacks, {stats['node_limited']} stopped on the node limit"
    return line


def write_run(out_dir: Path, result: dict[str, Any], rounds: list[Any]) -> None:
    """result.json (the `simulate --json` object) and rounds.csv (one `RoundRow` per round, from any object with
    its attributes), each replacing what is at its name (a link there is not followed)."""
    columns = list(RoundRow.model_fields)
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    writer.writerow(columns)
    for r in rounds:
        writer.writerow([getattr(r, column) for column in columns])
    try:
        write_atomically(out_dir / "result.json", json.dumps(result, indent=1))
        write_atomically(out_dir / "rounds.csv", table.getvalue())
    except OSError as exc:
        raise InputError(f"cannot write results: {exc.strerror}", path=out_dir) from None


RATIO_METRICS = ("makespan_s", "avg_jct_s", "worst_ftf", "unfair_fraction", "utilization")


def reference_policy(results: list[dict[str, Any]]) -> str:
    """Ratios are taken to Shockwave when it ran, else to the first policy."""
    policies = [r["policy"] for r in results]
    return "shockwave" if "shockwave" in policies else policies[0]


def _ratio(value: float, reference: float) -> float | None:
    return value / reference if reference else None


def comparison_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per policy: the headline metrics, each also over the reference policy's, and makespan over
    the physical lower bound."""
    if not results:
        return []
    ref_name = reference_policy(results)
    ref = next(r for r in results if r["policy"] == ref_name)
    rows = []
    for r in results:
        row: dict[str, Any] = {
            "policy": r["policy"],
            "trace": r["trace"],
            "gpus": r["gpus"],
            "mechanics": r["mechanics"],
            "reference_policy": ref_name,
        }
        for key in RATIO_METRICS:
            row[key] = r[key]
            row[f"{key}_vs_{ref_name}"] = _ratio(r[key], ref[key])
        row["makespan_vs_lower_bound"] = r["makespan_s"] / r["makespan_lower_bound_s"]
        row["makespan_lower_bound_s"] = r["makespan_lower_bound_s"]
        row["unfinished_jobs"] = len(r.get("unfinished_jobs", []))
        row["num_rounds"] = r["num_rounds"]
        row["wall_seconds"] = r["wall_seconds"]
        rows.append(row)
    return rows


def _with_ratio(text: str, ratio: float | None, reference: bool) -> str:
    return text if reference else f"{text} ({'–' if ratio is None else f'{ratio:.2f}x'})"


POLICY_WIDTH = 26
"""Characters of a policy name on one line of the comparison table (the published set's longest is 23)."""


def print_comparison(console: Console, results: list[dict[str, Any]]) -> None:
    """One row per policy; each metric also as a ratio to the reference policy, makespan to the lower bound."""
    rows = comparison_rows(results)
    ref = rows[0]["reference_policy"]
    first = results[0]
    table = Table(
        title=escape(
            f"{Path(first['trace']).name}: {gpus_of(first)}, {first['round_seconds']:g} s rounds, "
            f"{first['mechanics']} mechanics; (ratio to {ref})"
        ),
        title_justify="left",
    )
    # The policy column folds names longer than POLICY_WIDTH, so all 29 built-ins fit 140 columns, headers whole.
    table.add_column("policy", overflow="fold", max_width=POLICY_WIDTH)
    for column in ("makespan s", "x bound", "avg JCT s", "worst rho", "unfair %", "util %", "wall s"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        is_ref = row["policy"] == ref
        table.add_row(
            escape(row["policy"])
            + (f" [red]({row['unfinished_jobs']} unfinished)[/red]" if row["unfinished_jobs"] else ""),
            _with_ratio(f"{row['makespan_s']:.0f}", row[f"makespan_s_vs_{ref}"], is_ref),
            f"{row['makespan_vs_lower_bound']:.2f}x",
            _with_ratio(f"{row['avg_jct_s']:.0f}", row[f"avg_jct_s_vs_{ref}"], is_ref),
            _with_ratio(f"{row['worst_ftf']:.2f}", row[f"worst_ftf_vs_{ref}"], is_ref),
            _with_ratio(f"{100 * row['unfair_fraction']:.1f}", row[f"unfair_fraction_vs_{ref}"], is_ref),
            _with_ratio(f"{100 * row['utilization']:.1f}", row[f"utilization_vs_{ref}"], is_ref),
            f"{row['wall_seconds']:.1f}",
        )
    console.print(table)


# -- reading saved results back ------------------------------------------------------------------------------------
def check_results(results: Any, path: Path) -> list[dict[str, Any]]:
    """A comparison's results.json: a non-empty list of result objects, or an InputError naming what is wrong, so
    `report` on a hand-edited or foreign file says why instead of failing inside a table or a figure."""
    if not isinstance(results, list) or not results:
        raise InputError("expected a non-empty list of results", path=path)
    for index, result in enumerate(results):
        check_result(result, path, f"results[{index}]")
    return results


def check_result(result: Any, path: Path, where: str = "result", needs: tuple[str, ...] = ()) -> dict[str, Any]:
    """One saved result that matches the result format (`shockwave.results.model.Result`) and also holds the keys
    `needs`, or an InputError naming the first field that does not. The data is returned as read: readers index it."""
    Result.from_json_dict(result, path, where=where, needs=needs)
    return result
