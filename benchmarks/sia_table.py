"""Sia's Table 3/4-style comparison, rebuilt with every policy in one command and no commercial solver: `python
benchmarks/sia_table.py --artifact DIR` (or `make sia-table SIA_ARTIFACT=DIR`), DIR the `sia-simulator/` folder of a
copy of `siasosp23/artifacts` (its workloads and profiles have no licence and do not ship here).

Each workload runs through `shockwave compare --trace-format sia` (Sia, Pollux and Shockwave with goodput-adaptive jobs
at 60 s rounds, the others with the rigid jobs the workload lines ask for at 360 s, as Sia ran them), with Sia's
simulator's mechanics (`--mechanics sia`, the default for its workloads), on Sia's heterogeneous cluster
(`aws:24:4,rtx:24:8,dgx-ext:16:8`) or its homogeneous one (`aws:64:4`). The table averages each policy over the
workloads: average and p99 JCT, makespan (last finish less first arrival), the worst finish-time fairness ratio (rho:
JCT over the job's time alone on an equal share of the cluster, at the GPUs and batch its line asks for) and the share
of jobs with rho > 1.05. `--write` puts it, and Shockwave against Sia workload by workload, into docs/reproducing.md
between their markers; `--figure` draws the CDF of
every job's rho per setting and policy. `--held-out` runs the artifact's other workloads (Saturn 4-10, Philly 4-8;
`make sia-held-out`) and prints the same tables, so that a change chosen on workloads 1-3 is checked on workloads it
was not chosen on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reproducing.md"
BEGIN, END = "<!-- sia-table:begin (make sia-table) -->", "<!-- sia-table:end -->"
VERSUS = ("<!-- sia-versus:begin (make sia-table) -->", "<!-- sia-versus:end -->")
ROUNDS = {
    60.0: ("sia", "pollux", "shockwave"),
    360.0: ("themis", "max_sum_throughput_perf", "finish_time_fairness_perf", "max_min_fairness_perf"),
}
"""Round length -> the policies run at it: the goodput-adaptive policies' 60 s (Sia's and Pollux's), the others' 360
s, as Sia's evaluation runs them (a 60 s round is shorter than most restarts, and the time-slicing policies move
jobs every round)."""
POLICIES = tuple(policy for policies in ROUNDS.values() for policy in policies)
BAR_WORKLOADS = {"saturn": (1, 2, 3), "philly": (1, 2, 3)}
"""The workloads of each trace family that the comparison in the docs (and the issues' bars) uses."""
HELD_OUT = {"saturn": tuple(range(4, 11)), "philly": tuple(range(4, 9))}
"""The artifact's other workloads (`--held-out`): a change chosen on three workloads is checked on these."""


def settings(numbers: dict[str, tuple[int, ...]]) -> dict[str, tuple[str, list[str]]]:
    """Setting -> its cluster and workload files, for the workload `numbers` of each trace family."""

    def files(*families: str) -> list[str]:
        return [f"{family}/workload-{i}.csv" for family in families for i in numbers[family]]

    return {
        "heterogeneous": ("aws:24:4,rtx:24:8,dgx-ext:16:8", files("saturn", "philly")),
        "homogeneous": ("aws:64:4", files("philly")),
    }


def workload_folder(out: Path, setting: str, workload: str) -> Path:
    """Where one workload's comparison is kept under `--out` (`make sia-bound` reads the results there)."""
    return out / setting / workload.replace("/", "-").removesuffix(".csv")


def run_workload(artifact: Path, workload: str, cluster: str, out: Path, workers: int) -> list[dict[str, Any]]:
    """Every policy on one workload, through one `compare` per round length (results.json kept under `out`)."""
    from shockwave.experiments.compare import CompareRequest, compare

    found = []
    for round_s, policies in ROUNDS.items():
        request = CompareRequest(
            artifact / "workloads" / workload,
            None,
            list(policies),
            round_seconds=round_s,
            cluster=cluster,
            trace_format="sia",
            profiles=artifact / "traces",
        )
        folder = out / f"{round_s:.0f}s"
        results, errors = compare(request, folder, workers=workers, console=Console(stderr=True), show_progress=False)
        if errors:
            raise SystemExit(f"{workload}: {errors}")
        found += results
    return found


def measures(result: dict[str, Any]) -> dict[str, Any]:
    jobs = result["jobs"]
    jcts = sorted(job["jct_s"] for job in jobs)
    first = min(job["arrival_s"] for job in jobs)
    return {
        "jct": statistics.fmean(jcts) / 3600,
        "p99": jcts[int(0.99 * len(jcts))] / 3600,
        "makespan": (max(job["finish_s"] for job in jobs) - first) / 3600,
        "rho": result["worst_ftf"],
        "unfair": 100 * result["unfair_fraction"],
        "wall": result["wall_seconds"],
        "rhos": [job["ftf"] for job in jobs],
    }


def table(rows: dict[str, dict[str, list[dict[str, Any]]]]) -> str:
    lines = [
        "| setting | policy | avg JCT h | p99 JCT h | makespan h | worst rho | unfair % | wall s per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for setting, by_policy in rows.items():
        for policy, runs in by_policy.items():

            def mean(key: str, runs: list[dict[str, Any]] = runs) -> float:
                return statistics.fmean(r[key] for r in runs)

            worst = max(r["rho"] for r in runs)
            lines.append(
                f"| {setting} ({len(runs)}) | {policy} | {mean('jct'):.2f} | {mean('p99'):.1f} | {mean('makespan'):.1f}"
                f" | {worst:.2f} | {mean('unfair'):.1f} | {mean('wall'):.1f} |"
            )
    return "\n".join(lines)


def versus(
    rows: dict[str, dict[str, list[dict[str, Any]]]],
    workloads: dict[str, tuple[str, list[str]]],
    policy: str = "shockwave",
    peer: str = "sia",
) -> str:
    """`policy` against `peer` workload by workload (`workloads`: what `settings` gave the rows): JCT and makespan as
    ratios, worst rho and unfair % side by side."""
    lines = ["| workload | avg JCT | makespan | worst rho | unfair % |", "|---|---|---|---|---|"]
    for setting, by_policy in rows.items():
        for workload, ours, theirs in zip(workloads[setting][1], by_policy[policy], by_policy[peer], strict=True):
            family, _, number = workload.removesuffix(".csv").partition("/workload-")
            lines.append(
                f"| {family.capitalize()} {number} ({setting}) | {ours['jct'] / theirs['jct']:.3f}x"
                f" | {ours['makespan'] / theirs['makespan']:.3f}x | {ours['rho']:.2f} / {theirs['rho']:.2f}"
                f" | {ours['unfair']:.1f} / {theirs['unfair']:.1f} |"
            )
    return "\n".join(lines)


def write(page: str, markers: tuple[str, str], text: str) -> str:
    """`page` with `text` between its two markers."""
    begin, end = markers
    head, _, rest = page.partition(begin)
    if end not in rest:
        raise SystemExit(f"the page has no {begin} ... {end} markers")
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{text}\n{end}{tail}"


def rho_cdf(rows: dict[str, dict[str, list[dict[str, Any]]]], path: Path) -> None:
    """One panel per setting: the CDF of every job's rho over its workloads, one line per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(rows), figsize=(6 * len(rows), 4), squeeze=False)
    colours = plt.get_cmap("tab10")
    for axis, (setting, by_policy) in zip(axes[0], rows.items(), strict=True):
        for k, (policy, runs) in enumerate(by_policy.items()):
            rhos = sorted(rho for run in runs for rho in run["rhos"])
            shares = [(i + 1) / len(rhos) for i in range(len(rhos))]
            axis.step(rhos, shares, where="post", label=policy, color=colours(k))
        axis.set_xscale("log")
        axis.axvline(1.0, color="grey", linewidth=0.8, linestyle=":")
        axis.set(title=f"{setting} ({len(next(iter(by_policy.values())))} workloads)", xlabel="rho (log)")
        axis.set_ylabel("share of jobs")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=150)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifact", type=Path, required=True, help="the sia-simulator/ folder of the artifact")
    parser.add_argument("--out", type=Path, default=Path("sia-table"), help="where each comparison is kept")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--write", action="store_true", help="put both tables into docs/reproducing.md")
    parser.add_argument("--figure", type=Path, help="draw the CDF of rho per setting and policy (a .png)")
    parser.add_argument(
        "--held-out", action="store_true", help="Saturn 4-10 and Philly 4-8 instead of 1-3 (not for --write)"
    )
    args = parser.parse_args()
    if args.held_out and args.write:
        parser.error("--write puts the 1-3 comparison into the docs; --held-out is for checking a change")
    chosen = settings(HELD_OUT if args.held_out else BAR_WORKLOADS)
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for setting, (cluster, workloads) in chosen.items():
        rows[setting] = {policy: [] for policy in POLICIES}
        for workload in workloads:
            folder = workload_folder(args.out, setting, workload)
            for result in run_workload(args.artifact, workload, cluster, folder, args.workers):
                rows[setting][result["policy"]].append(measures(result))
            print(f"{setting} {workload} done", file=sys.stderr)
    text = table(rows)
    print(text)
    (args.out / "table.json").write_text(json.dumps(rows, indent=1))
    if args.figure is not None:
        rho_cdf(rows, args.figure)
    against = versus(rows, chosen)
    print(against)
    if args.write:
        PAGE.write_text(write(write(PAGE.read_text(), (BEGIN, END), text), VERSUS, against))


if __name__ == "__main__":
    main()
