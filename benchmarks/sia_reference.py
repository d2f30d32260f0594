"""Our runs of Sia's workloads beside the Sia artifact's own simulator (printed, never asserted): `python
benchmarks/sia_reference.py --artifact DIR`, DIR the `sia-simulator/` folder of a copy of `siasosp23/artifacts` (it
has no licence, so none of its files ship here; `make bench` runs this when SIA_ARTIFACT names such a folder, `make
fidelity-sia SIA_ARTIFACT=DIR` with the artifact's runs it lacks).

`sia_reference.json` holds what the artifact measured on this machine kind (2 cores, Python 3.11), each with the
command that produced it and the artifact's commit. For each entry whose policy the project has, the same workload
runs here on the same cluster with the same round length, and both are printed: average and p99 JCT (hours, the
artifact's `print_run_stats.py` definitions), makespan (last finish less first arrival, hours), and CPU seconds;
then the spread of ours / the artifact's over the entries, per policy and cluster (within 5% on average JCT, the
geometric mean of the makespans' ratios). Sia's "gavel" is our `max_sum_throughput_perf` with rigid jobs.

`--run-artifact` first runs the artifact on every workload of `--workloads` (default: all it has, Saturn 1-10 and
Philly 1-8) under `sia` and `gavel` on the clusters of `--clusters` that `sia_reference.json` lacks
(`--artifact-python` runs it, `-j` at a time, each workload in a folder of its own under `--out`, as its driver
reads every CSV of a folder), and records them. The homogeneous cluster is the artifact's own commented-out
`cluster_nnodes = {"aws": 16}`, switched on in a scratch copy of the artifact under `--out`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import reference_diff as rd  # noqa: E402 - the benchmarks folder is not a package

REFERENCE = HERE / "sia_reference.json"
OURS = {"gavel": "max_sum_throughput_perf", "sia": "sia", "pollux": "pollux"}
"""The artifact's policy names the project implements, by our name."""
CLUSTERS = {"default-hetero": "aws:24:4,rtx:24:8,dgx-ext:16:8", "homogeneous-aws64": "aws:64:4"}
WORKLOADS = {"saturn": range(1, 11), "philly": range(1, 9)}
"""Every workload the artifact has for Sia's evaluation."""
ARTIFACT_FLAGS = {
    "sia": "--policy=sia --policy_p_val=-0.5 --mip_lambda_a=0.01 --mip_lambda_n=1.1 --interval=60 "
    "--project_throughputs --share_max_replicas",
    "gavel": "--policy=gavel --interval=360",
}
"""The artifact driver's flags per policy, as its README runs them (../shared/reference/RUNNING_REFERENCES.md)."""
HETERO_NODES, HOMOGENEOUS_NODES = 'cluster_nnodes = {"aws": 6, "dgx-ext": 2, "rtx": 3}', 'cluster_nnodes = {"aws": 16}'
MACHINE = "2 cores, Python 3.11.7, no GPU"
COMMIT = "aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70"
"""siasosp23/artifacts as measured (../shared/reference/RUNNING_REFERENCES.md)."""


def simulated(artifact: Path, workload: Path, entry: dict[str, Any]) -> tuple[Any, float]:
    """Our run of a workload as the entry ran it, and its CPU seconds."""
    from shockwave.api import simulate

    started = time.process_time()
    result = simulate(
        workload,
        OURS[entry["policy"]],
        CLUSTERS[entry["cluster"]],
        trace_format="sia",
        profiles=artifact / "traces",
        round_seconds=entry["interval_s"],
    )
    return result, time.process_time() - started


VARIANTS = {"jitter": rd.jittered, "order": rd.reordered}
"""Copies of a workload that should not matter: arrivals moved by under a second, lines in another order."""


def variant_of(entry: dict[str, Any]) -> tuple[str, int]:
    """The copy an entry ran: ("jitter" | "order", seed), or ("", 0) for the workload as it is."""
    for kind in VARIANTS:
        if entry.get(f"{kind}_seed"):
            return kind, entry[f"{kind}_seed"]
    return "", 0


def variant_copy(source: Path, variant: tuple[str, int], folder: Path) -> Path:
    """The workload file a variant runs: a copy in `folder`, or the workload itself."""
    kind, seed = variant
    return VARIANTS[kind](source, seed, folder) if kind else source


def ours(artifact: Path, entry: dict[str, Any]) -> dict[str, float]:
    """Our run of the entry's workload (the copy it ran, `variant_of`), in the artifact's measures."""
    with tempfile.TemporaryDirectory() as scratch:
        workload = variant_copy(artifact / "workloads" / entry["workload"], variant_of(entry), Path(scratch))
        result, cpu = simulated(artifact, workload, entry)
    jcts = sorted(job.jct_s for job in result.jobs)
    first = min(job.arrival_s for job in result.jobs)
    return {
        "avg_jct_h": sum(jcts) / len(jcts) / 3600,
        "p99_jct_h": jcts[int(0.99 * len(jcts))] / 3600,
        "makespan_h": (max(job.finish_s for job in result.jobs) - first) / 3600,
        "cpu_s": cpu,
    }


def artifact_copy(artifact: Path, cluster: str, out: Path) -> Path:
    """The artifact itself for its default cluster; for the homogeneous one a scratch copy whose config has the
    artifact's commented-out 64 T4s switched on."""
    if cluster == "default-hetero":
        return artifact
    copy = out / "homogeneous-artifact"
    if not copy.exists():
        shutil.copytree(artifact, copy)
        config = copy / "simulator_config.py"
        text = config.read_text()
        if HETERO_NODES not in text:
            raise SystemExit(f"{config}: no line {HETERO_NODES!r} to switch to the homogeneous cluster")
        config.write_text(text.replace(HETERO_NODES, HOMOGENEOUS_NODES, 1))
    return copy


def run_artifact(
    args: argparse.Namespace, workload: str, policy: str, cluster: str, variant: tuple[str, int] = ("", 0)
) -> dict[str, Any]:
    """One run of the artifact's driver on one workload (or a copy of it, `variant_of`), in the artifact's measures
    (from its summary.json, with `print_run_stats.py`'s definitions)."""
    kind, seed = variant
    name = f"{policy}_{workload.replace('/', '-').removesuffix('.csv')}_{cluster}" + (f"_{kind}{seed}" if kind else "")
    folder = args.out / name
    source = artifact_copy(args.artifact, cluster, args.out)
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "W").mkdir(parents=True)
    (folder / "O").mkdir()
    copy = variant_copy(args.artifact / "workloads" / workload, variant, folder / "O")
    shutil.copy(copy, folder / "W" / Path(workload).name)
    command = [args.artifact_python, "multi_simulator.py", f"{folder}/W/", *ARTIFACT_FLAGS[policy].split()]
    command.append(f"--output={folder}/O")
    started = time.perf_counter()
    with (folder / "stdout.txt").open("w") as out, (folder / "stderr.txt").open("w") as err:
        process = subprocess.Popen(command, cwd=source, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)  # this run's own CPU time, whatever else runs beside it
    wall, cpu = time.perf_counter() - started, usage.ru_utime + usage.ru_stime
    summary = folder / "O" / "summary.json"
    if status != 0 or not summary.exists():
        raise RuntimeError(f"the artifact failed on {workload}: {(folder / 'stderr.txt').read_text()[-2000:]}")
    jcts = next(iter(json.loads(summary.read_text())["jcts"].values()))
    arrivals = _arrivals(folder / "W" / Path(workload).name)
    values = sorted(jcts.values())
    note = f"  # run with scratch config {HOMOGENEOUS_NODES}" if source != args.artifact else ""
    return {
        "policy": policy,
        "workload": workload,
        **({f"{kind}_seed": seed} if kind else {}),
        "cluster": cluster,
        "interval_s": 60 if policy == "sia" else 360,
        "avg_jct_h": sum(values) / len(values) / 3600,
        "p99_jct_h": values[int(0.99 * len(values))] / 3600,
        "makespan_h": (max(arrivals[n] + j for n, j in jcts.items()) - min(arrivals.values())) / 3600,
        "num_jobs": len(values),
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "command": f"cd sia-simulator && python {shlex.join(command[1:])}{note}",
        "commit": args.artifact_commit,
        "machine": MACHINE,
    }


def _arrivals(workload: Path) -> dict[str, float]:
    import csv

    with workload.open() as handle:
        return {row["name"]: float(row["time"]) for row in csv.DictReader(handle)}


def run_missing(args: argparse.Namespace) -> None:
    """Run the artifact on the asked workloads, policies and clusters the record lacks, and record each run."""
    record = json.loads(REFERENCE.read_text())
    record.setdefault("jittered", [])
    have = {(e["policy"], e["workload"], e["cluster"], variant_of(e)) for e in record["runs"] + record["jittered"]}
    variants = [("", 0), *(("jitter", s) for s in range(1, args.jitter + 1))]
    variants += [("order", s) for s in range(1, args.reorder + 1)]
    wanted = [
        (f"{family}/workload-{i}.csv", policy, cluster, variant)
        for family, numbers in _workloads(args.workloads).items()
        for i in numbers
        for policy in args.policies.split(",")
        for cluster in args.clusters.split(",")
        for variant in variants
        if (policy, f"{family}/workload-{i}.csv", cluster, variant) not in have
    ]
    for cluster in {w[2] for w in wanted}:
        artifact_copy(args.artifact, cluster, args.out)  # before the runs share it
    print(f"running the artifact on {len(wanted)} workload(s) the record lacks, {args.jobs} at a time")
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for entry in pool.map(lambda w: _tried(args, *w), wanted):
            if entry is None:
                continue
            name = f"{entry['policy']} {entry['workload']} {entry['cluster']} {' '.join(map(str, variant_of(entry)))}"
            print(f"{name}: {entry['avg_jct_h']:.3f} h JCT, {entry['makespan_h']:.2f} h makespan, "
                  f"{entry['cpu_s']:.0f} CPU-s")  # fmt: skip
            record["jittered" if variant_of(entry)[0] else "runs"].append(entry)
            REFERENCE.write_text(json.dumps(record, indent=1) + "\n")


def _tried(
    args: argparse.Namespace, workload: str, policy: str, cluster: str, variant: tuple[str, int]
) -> dict[str, Any] | None:
    """A run, or None (said why) where the artifact failed: one failure does not lose the others."""
    try:
        return run_artifact(args, workload, policy, cluster, variant)
    except RuntimeError as exc:
        print(exc)
        return None


def _workloads(text: str) -> dict[str, range | list[int]]:
    """`saturn:1-10,philly:4-8` (default: every workload the artifact has)."""
    if not text:
        return dict(WORKLOADS)
    chosen: dict[str, list[int]] = {}
    for part in text.split(","):
        family, _, numbers = part.partition(":")
        low, _, high = numbers.partition("-")
        chosen.setdefault(family, []).extend(range(int(low), int(high or low) + 1))
    return chosen


def print_spread(rows: list[dict[str, Any]]) -> None:
    """Ours / the artifact's per policy and cluster: average JCT (share within 5%, range) and the makespans'
    geometric mean."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(f"{row['policy']} {row['cluster']}", []).append(row)
    table = Table(title="ours / the artifact's, over its workloads", title_justify="left")
    for header in ("policy, cluster", "workloads", "JCT within 5%", "JCT range", "makespan geomean", "range"):
        table.add_column(header)
    for name, members in sorted(groups.items()):
        jct = [m["ratios"]["avg_jct_h"] for m in members]
        span = [m["ratios"]["makespan_h"] for m in members]
        geomean = math.exp(sum(map(math.log, span)) / len(span))
        table.add_row(
            name, str(len(members)), f"{sum(abs(r - 1) <= 0.05 for r in jct)}/{len(jct)}",
            f"{min(jct):.3f}-{max(jct):.3f}", f"{geomean:.3f}", f"{min(span):.3f}-{max(span):.3f}",
        )  # fmt: skip
    Console(width=200).print(table)
    worst = rd.worst_cells(rows, "avg_jct_h", 5)
    print("furthest average JCT: " + ", ".join(f"{r['key']} {r['ratios']['avg_jct_h']:.3f}" for r in worst))


def print_variants(artifact: Path, entries: list[dict[str, Any]], known: dict[str, dict[str, float]]) -> None:
    """Where the record has runs of copies of a workload (`VARIANTS`): each side's average JCT per copy (seed 0: the
    workload as it is), its spread (max / min) and ours / the artifact's of the means, so that a single run's ratio is
    read against the noise of both sides. `known`: ours already run on the plain workloads, by `_key`."""
    plain = [entry for entry in entries if not variant_of(entry)[0]]
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        kind = variant_of(entry)[0]
        if entry["policy"] in OURS and kind:
            groups.setdefault((entry["policy"], entry["workload"], entry["cluster"], kind), []).append(entry)
    if not groups:
        return
    table = Table(title="average JCT (h) on copies of a workload that should not matter: the artifact's and ours")
    for header in ("policy, workload, cluster", "copies", "ref", "ours", "ours / ref", "ref spread", "ours spread",
                   "ours / ref of the means"):  # fmt: skip
        table.add_column(header)
    for (policy, workload, cluster, kind), copies in sorted(groups.items()):
        same = [e for e in plain if (e["policy"], e["workload"], e["cluster"]) == (policy, workload, cluster)]
        runs = same + sorted(copies, key=lambda run: variant_of(run)[1])
        ref = [run["avg_jct_h"] for run in runs]
        mine = [(known.get(_key(run)) or ours(artifact, run))["avg_jct_h"] for run in runs]
        table.add_row(
            f"{policy} {workload} {cluster}", f"{kind} " + " ".join(str(variant_of(run)[1]) for run in runs),
            " ".join(f"{v:.3f}" for v in ref), " ".join(f"{v:.3f}" for v in mine),
            " ".join(f"{m / r:.3f}" for m, r in zip(mine, ref, strict=True)),
            f"{max(ref) / min(ref):.3f}", f"{max(mine) / min(mine):.3f}", f"{sum(mine) / sum(ref):.3f}",
        )  # fmt: skip
    Console(width=200).print(table)


def _key(entry: dict[str, Any]) -> str:
    """An entry's policy, workload, cluster and copy, as the tables name it."""
    kind, seed = variant_of(entry)
    return f"{entry['policy']} {entry['workload']} {entry['cluster']}" + (f" {kind} {seed}" if kind else "")


def print_partial(artifact: Path | None, entry: dict[str, Any]) -> None:
    """A reference run that did not finish: our average JCT over the jobs it finished, on the same first jobs."""
    import csv

    done = entry["completed_jcts_s"]
    line = f"{entry['policy']} on the first {entry['first_jobs']} jobs of {entry['workload']}: the reference finished "
    line += f"{len(done)} in {entry['wall_s']:.0f} s wall, their average JCT {sum(done.values()) / len(done):.0f} s"
    if artifact is None:
        print(line)
        return
    source = artifact / "workloads" / entry["workload"]
    with source.open() as handle:
        rows = sorted(csv.DictReader(handle), key=lambda row: float(row["time"]))[: entry["first_jobs"]]
    with tempfile.TemporaryDirectory() as scratch:
        cut = Path(scratch) / "cut.csv"
        with cut.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        result, cpu = simulated(artifact, cut, entry)
    ours = {row["name"]: job.jct_s for row, job in zip(rows, result.jobs, strict=True)}
    mine = sum(ours[name] for name in done) / len(done)
    print(f"{line}; ours {mine:.0f} s ({mine / (sum(done.values()) / len(done)):.3f}x), all done in {cpu:.1f} CPU-s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifact", type=Path, help="the sia-simulator/ folder of a copy of siasosp23/artifacts")
    parser.add_argument("--run-artifact", action="store_true", help="first run the artifact where the record lacks")
    parser.add_argument("--artifact-python", default="python3", help="a Python the artifact runs under")
    parser.add_argument("--artifact-commit", default=COMMIT, help="the commit the copy was taken at (recorded)")
    parser.add_argument("--workloads", default="", help="e.g. saturn:1-10,philly:4-8 (default: all of them)")
    parser.add_argument("--clusters", default="default-hetero", help=f"of {', '.join(CLUSTERS)}")
    parser.add_argument("--out", type=Path, default=HERE.parent / "results" / "sia-artifact")
    parser.add_argument("--policies", default="sia,gavel", help="the artifact's policies --run-artifact runs")
    parser.add_argument("--jitter", type=int, default=0, help="--run-artifact also runs copies jittered by seeds 1-N")
    parser.add_argument("--reorder", type=int, default=0, help="--run-artifact also runs copies reordered by seeds 1-N")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="artifact runs at a time")
    args = parser.parse_args()
    if args.run_artifact:
        if args.artifact is None:
            raise SystemExit("--run-artifact runs the artifact: give --artifact DIR")
        args.artifact, args.out = args.artifact.resolve(), args.out.resolve()
        run_missing(args)
    entries = json.loads(REFERENCE.read_text())["runs"]
    table = Table(title="Sia's workloads: the artifact's simulator (ref) and ours, rigid jobs where ours is rigid")
    for column in (
        "policy",
        "workload",
        "cluster",
        "JCT h ref / ours",
        "p99 h ref / ours",
        "makespan h ref / ours",
        "CPU s ref / ours",
    ):
        table.add_column(column)
    compared = []
    known: dict[str, dict[str, float]] = {}
    for entry in entries:
        mine = ours(args.artifact, entry) if args.artifact is not None and entry["policy"] in OURS else None

        def pair(key: str, fmt: str, mine: dict[str, float] | None = mine, entry: dict[str, Any] = entry) -> str:
            ref = fmt.format(entry[key])
            return ref if mine is None else f"{ref} / {fmt.format(mine[key])} ({mine[key] / entry[key]:.2f}x)"

        table.add_row(
            entry["policy"],
            entry["workload"],
            entry["cluster"],
            pair("avg_jct_h", "{:.3f}"),
            pair("p99_jct_h", "{:.2f}"),
            pair("makespan_h", "{:.2f}"),
            pair("cpu_s", "{:.1f}"),
        )
        if mine is not None:
            ratios = {k: mine[k] / entry[k] for k in ("avg_jct_h", "makespan_h")}
            key = _key(entry)
            known[key] = mine
            compared.append({"key": key, "policy": entry["policy"], "cluster": entry["cluster"], "ratios": ratios})
    Console(width=200).print(table)
    if compared:
        print_spread(compared)
    if args.artifact is not None:
        print_variants(args.artifact, entries + json.loads(REFERENCE.read_text()).get("jittered", []), known)
    for entry in json.loads(REFERENCE.read_text()).get("partial", []):
        print_partial(args.artifact, entry)
    if args.artifact is None:
        print("reference numbers only: give --artifact DIR (a copy of sia-simulator/) to run ours beside them")


if __name__ == "__main__":
    main()
