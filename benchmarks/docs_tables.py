"""The docs' result table of Shockwave against the fair baselines, generated so it cannot go stale
(`make docs-tables` rewrites it; `--check` only compares and exits 1 when the page differs).

Only deterministic numbers go in the table (makespan, average JCT, worst rho, unfair share, under reference
mechanics with the pinned solver stack); wall times and solver latencies depend on the machine and live in
`make bench`. The table sits between the two markers below in docs/reproducing.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference"
PAGE = ROOT / "docs" / "reproducing.md"
BEGIN, END = "<!-- results-table:begin (make docs-tables) -->", "<!-- results-table:end -->"
MIX = "0,0.5,0.5_0.6,0.3,0.09,0.01_multigpu_dynamic.trace"
TRACES = {
    "120": (f"120_0.2_5_100_40_25_{MIX}", "tacc", 32, "tacc_32gpus"),
    "220": (f"220_0.2_5_100_25_4_{MIX}", "wisr", 64, "scale_64gpus"),
    "460": (f"460_0.2_5_100_10_1_{MIX}", "wisr", 128, "scale_128gpus"),
    "900": (f"900_0.2_5_1000_5_15_{MIX}", "wisr", 256, "scale_256gpus"),
}
BASELINES = ("max_min_fairness", "finish_time_fairness")
PUBLISHED = "| | published Shockwave | 24,197 | 9,958 | 1.78 | 5.0% |"
"""The NSDI'23 artifact's numbers on the 120-job trace (published_canonical.json)."""


Run = tuple[str, str, str, str, str, str]
"""(trace file, throughput table, cluster: a GPU count or pools by type, mechanics, Shockwave's config, policy)."""


def simulate_run(run: Run) -> dict[str, Any]:
    """One simulation of a released trace, Shockwave with the named reference configuration."""
    from shockwave.core.cluster import ClusterSpec
    from shockwave.policies.shockwave.config import ShockwaveConfig
    from shockwave.simulator.mechanics import preset
    from shockwave.simulator.run import simulate

    trace, table, cluster, mechanics, config, policy = run
    hyper = (
        ShockwaveConfig.from_json(REFERENCE / "configurations" / f"{config}.json") if policy == "shockwave" else None
    )
    result, _ = simulate(
        REFERENCE / "traces" / trace,
        policy,
        ClusterSpec.parse(cluster) if ":" in cluster else ClusterSpec.of(int(cluster)),
        preset(mechanics),
        REFERENCE / "throughputs" / f"{table}_throughputs.json",
        hyper,
    )
    return result


def simulate_all(runs: list[Run], workers: int) -> list[dict[str, Any]]:
    """`runs`, `workers` at a time, each in its own process."""
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(simulate_run, runs))


def _pair(results: list[dict[str, Any]], key: str, fmt: str) -> str:
    return " / ".join(fmt.format(r[key]) for r in results)


def rows(name: str, results: dict[str, dict[str, Any]]) -> list[str]:
    _, table, gpus, config = TRACES[name]
    ours, base = results["shockwave"], [results[b] for b in BASELINES]
    lines = [
        f"| {name} jobs ({table}) | {gpus}, {config} | {ours['makespan_s']:,.0f} | {ours['avg_jct_s']:,.0f} | "
        f"{ours['worst_ftf']:.2f} | {100 * ours['unfair_fraction']:.1f}% |"
    ]
    if name == "120":
        lines.append(PUBLISHED)
    lines.append(
        f"| | [{' / '.join(BASELINES)}] | {_pair(base, 'makespan_s', '{:,.0f}')} | "
        f"{_pair(base, 'avg_jct_s', '{:,.0f}')} | {_pair(base, 'worst_ftf', '{:.2f}')} | "
        + " / ".join(f"{100 * r['unfair_fraction']:.0f}%" for r in base)
        + " |"
    )
    return lines


def table(names: list[str], workers: int) -> dict[str, list[str]]:
    jobs = [(name, policy) for name in names for policy in ("shockwave", *BASELINES)]
    runs: list[Run] = []
    for name, policy in jobs:
        trace, rates, gpus, config = TRACES[name]
        runs.append((trace, rates, str(gpus), "reference", config, policy))
    done = dict(zip(jobs, simulate_all(runs, workers), strict=True))
    return {name: rows(name, {p: done[(n, p)] for n, p in jobs if n == name}) for name in names}


def render(by_trace: dict[str, list[str]], versions: dict[str, str]) -> str:
    stack = ", ".join(f"{k} {versions[k]}" for k in ("highspy", "scipy", "numpy", "cvxpy"))
    head = [
        BEGIN,
        f"Reference mechanics, pinned solver stack ({stack}); baselines on the same trace and cluster in brackets:",
        "",
        "| trace | GPUs, config | makespan s | avg JCT s | worst rho | unfair |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join([*head, *(line for name in TRACES if name in by_trace for line in by_trace[name]), END])


def update_page(
    page: Path,
    markers: tuple[str, str],
    generated: dict[str, list[str]],
    render: Callable[[dict[str, list[str]]], str],
    *,
    check: bool,
) -> None:
    """Rewrite the table between `markers` in `page` with `render(generated)`, or with `check` only report (exit 1)
    the generated lines the page lacks."""
    if check:
        sys.exit(1 if lacking(page, markers, generated) else 0)
    text = _marked(page, markers)
    begin, end = markers
    start, stop = text.index(begin), text.index(end) + len(end)
    page.write_text(text[:start] + render(generated) + text[stop:])
    print(f"rewrote the table between {begin} and {end} in {page}")


def lacking(page: Path, markers: tuple[str, str], generated: dict[str, list[str]]) -> list[str]:
    """The generated lines `page` lacks, each printed."""
    text = _marked(page, markers)
    stale = [line for lines in generated.values() for line in lines if line not in text]
    for line in stale:
        print(f"{page.name} lacks: {line}")
    return stale


def _marked(page: Path, markers: tuple[str, str]) -> str:
    text = page.read_text()
    begin, end = markers
    if begin not in text or end not in text:
        sys.exit(f"{page}: the markers {begin!r} and {end!r} are missing")
    return text


def arguments(traces: list[str], description: str | None = __doc__) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="compare with the page instead of rewriting it")
    parser.add_argument("--traces", default=",".join(traces), help=f"comma-separated, of {', '.join(traces)}")
    parser.add_argument("-j", type=int, default=2, help="simulations at once")
    args = parser.parse_args()
    if not args.check and set(args.traces.split(",")) != set(traces):
        sys.exit("rewriting the table needs every trace (drop --traces)")  # before minutes of simulations
    return args


def main() -> None:
    from shockwave.results.provenance import library_versions

    args = arguments(list(TRACES))
    names = args.traces.split(",")
    generated = table(names, args.j)
    versions = library_versions()
    update_page(PAGE, (BEGIN, END), generated, lambda g: render(g, versions), check=args.check)


if __name__ == "__main__":
    main()
