"""The docs' table of Shockwave against every heterogeneity-aware baseline on several GPU types, generated so it
cannot go stale (`make docs-tables` rewrites it; `--check` only compares and exits 1 when the page differs).

The released 120-, 220- and 460-job traces with the wisr table (V100, P100 and K80 rates), under corrected
mechanics, each on a cluster of three types; Shockwave with the reference configuration for the cluster's size. The
table sits between the two markers below in docs/shockwave.md; a line per trace of the same runs (Shockwave beside
the best baseline on each measure) sits in README.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from docs_tables import MIX, ROOT, arguments, lacking, simulate_all, update_page

PAGE = ROOT / "docs" / "shockwave.md"
BEGIN, END = "<!-- types-table:begin (make docs-tables) -->", "<!-- types-table:end -->"
README = ROOT / "README.md"
SUMMARY = ("<!-- types-summary:begin (make docs-tables) -->", "<!-- types-summary:end -->")
CASES = {
    "120": (f"120_0.2_5_100_40_25_{MIX}", "v100:16,p100:8,k80:8", "tacc_32gpus"),
    "220": (f"220_0.2_5_100_25_4_{MIX}", "v100:32,p100:16,k80:16", "scale_64gpus"),
    "460": (f"460_0.2_5_100_10_1_{MIX}", "v100:36,p100:36,k80:36", "scale_128gpus"),
}
POLICIES = ("shockwave", "themis", "max_min_fairness_perf", "finish_time_fairness_perf", "min_total_duration_perf")


def rows(name: str, results: dict[str, dict[str, Any]]) -> list[str]:
    _, cluster, _ = CASES[name]
    bound = results["shockwave"]["makespan_lower_bound_s"]
    lines = []
    for policy in POLICIES:
        r = results[policy]
        first = f"{name} jobs, {cluster} (bound {bound:,.0f} s)" if policy == POLICIES[0] else ""
        lines.append(
            f"| {first} | {policy} | {r['makespan_s']:,.0f} | {r['avg_jct_s']:,.0f} | {r['worst_ftf']:.2f} | "
            f"{100 * r['unfair_fraction']:.1f}% |"
        )
    return lines


def summary(name: str, results: dict[str, dict[str, Any]]) -> list[str]:
    """README's line for one trace: Shockwave's makespan, average JCT and worst rho, each beside the best baseline's."""
    _, cluster, _ = CASES[name]
    ours, others = results["shockwave"], [p for p in POLICIES if p != "shockwave"]

    def cell(key: str, form: str) -> str:
        best = min(others, key=lambda p: results[p][key])
        return f"{form.format(ours[key])} / {form.format(results[best][key])} ({best})"

    return [
        f"| {name} jobs, {cluster} | {cell('makespan_s', '{:,.0f} s')} | {cell('avg_jct_s', '{:,.0f} s')} | "
        f"{cell('worst_ftf', '{:.2f}')} |"
    ]


def simulated(names: list[str], workers: int) -> dict[str, dict[str, dict[str, Any]]]:
    """Trace -> policy -> its result."""
    jobs = [(name, policy) for name in names for policy in POLICIES]
    runs = [(CASES[n][0], "wisr", CASES[n][1], "corrected", CASES[n][2], p) for n, p in jobs]
    done = dict(zip(jobs, simulate_all(runs, workers), strict=True))
    return {name: {p: done[(n, p)] for n, p in jobs if n == name} for name in names}


def renderer(markers: tuple[str, str], header: list[str]) -> Callable[[dict[str, list[str]]], str]:
    """`update_page`'s render for a table of these columns: each trace's lines in `CASES`' order, between `markers`."""

    def render(by_trace: dict[str, list[str]]) -> str:
        lines = (line for name in CASES if name in by_trace for line in by_trace[name])
        head = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
        return "\n".join([markers[0], *head, *lines, markers[1]])

    return render


def main() -> None:
    args = arguments(list(CASES), __doc__)
    names = args.traces.split(",")
    results = simulated(names, args.j)
    page = {name: rows(name, by_policy) for name, by_policy in results.items()}
    readme = {name: summary(name, by_policy) for name, by_policy in results.items()}
    if args.check:
        stale = lacking(PAGE, (BEGIN, END), page) + lacking(README, SUMMARY, readme)
        sys.exit(1 if stale else 0)
    columns = ["trace, cluster (fluid makespan bound)", "policy", "makespan s", "avg JCT s", "worst rho", "unfair"]
    update_page(PAGE, (BEGIN, END), page, renderer((BEGIN, END), columns), check=False)
    summary_columns = ["released trace, cluster", "makespan: shockwave / best baseline", "average JCT", "worst rho"]
    update_page(README, SUMMARY, readme, renderer(SUMMARY, summary_columns), check=False)


if __name__ == "__main__":
    main()
