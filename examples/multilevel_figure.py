"""Gavel's Figure 11, simulated: three entities (weights 1, 2, 3) whose jobs arrive over time share 9 GPUs under
multi-level fairness (water-filling max-min with entities), on one GPU type and on three; the entity-unaware
max-min policy beside it for contrast. Each panel shows each entity's share of the cluster's effective throughput
(among the entities with demand; 1 while it is the only one) against its weight's share (dashed).

    .venv/bin/python examples/multilevel_figure.py [--out results/multilevel]

Writes OUT/figure11.png (and .svg), OUT/shares.csv (one row per phase and entity), the trace and entities file it
simulated, and prints the largest errors. The same experiment is checked by tests/test_multilevel.py.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from shockwave.experiments.multilevel import WEIGHTS, ShareRow, share_errors, simulate_multilevel, write_figure11_inputs

CLUSTERS = ("v100:9", "v100:3,p100:3,k80:3")
POLICIES = (
    ("max_min_fairness_water_filling_perf", "multi-level fairness (entities=FILE)"),
    ("max_min_fairness_perf", "max-min fairness, no entities"),
)
COLORS = dict(zip(WEIGHTS, plt.get_cmap("tab10").colors, strict=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/multilevel"))
    parser.add_argument("--round-seconds", type=float, default=120.0)
    args = parser.parse_args()
    trace, entities = write_figure11_inputs(args.out)
    fig, axes = plt.subplots(len(CLUSTERS), len(POLICIES), figsize=(13, 7.5), sharex=True, sharey=True, squeeze=False)
    rows_out = []
    for r, cluster in enumerate(CLUSTERS):
        for c, (policy, title) in enumerate(POLICIES):
            run = simulate_multilevel(trace, entities, cluster, policy, round_seconds=args.round_seconds)
            every_phase, every_stretch = share_errors(run), share_errors(run, merge=True)
            _panel(axes[r][c], every_phase, every_stretch, f"{title}\n{cluster}")
            rows_out += [(cluster, policy, "phase", row) for row in every_phase]
            rows_out += [(cluster, policy, "stretch", row) for row in every_stretch]
            # Errors where two or more entities have demand (alone, an entity's share is 1 by definition).
            phases, stretches = [x for x in every_phase if x.target < 1], [x for x in every_stretch if x.target < 1]
            long = [row for row in phases if row.rounds >= 20]
            print(
                f"{policy:38s} {cluster:22s} largest error: stretches {max(x.error for x in stretches):6.1%}, "
                f"phases of >= 20 rounds {max(x.error for x in long):6.1%}, allocation "
                f"{max(x.allocated_error for x in phases):.1e}"
            )
    for ax in axes[-1]:
        ax.set_xlabel("time (hours)")
    for ax in axes[:, 0]:
        ax.set_ylabel("share of effective throughput")
    handles = [plt.Line2D([], [], color=COLORS[e], lw=2, label=f"{e} (weight {w:g})") for e, w in WEIGHTS.items()]
    handles += [
        plt.Line2D([], [], color="gray", lw=1, ls="--", label="weight share among entities with demand"),
        plt.Line2D([], [], color="gray", lw=0.8, alpha=0.5, label="measured per allocation (phase)"),
        plt.Line2D([], [], color="gray", lw=2, label="measured per stretch of the same entities in demand"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    figure = args.out / "figure11.png"
    fig.savefig(figure, dpi=150)
    fig.savefig(figure.with_suffix(".svg"))
    with (args.out / "shares.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["cluster", "policy", "kind", "start_h", "end_h", "rounds", "entity", "measured", "target"])
        for cluster, policy, kind, row in rows_out:
            hours = (f"{row.start_s / 3600:.3f}", f"{row.end_s / 3600:.3f}")
            writer.writerow([cluster, policy, kind, *hours, row.rounds, row.entity, f"{row.measured:.4f}", row.target])
    print(f"figure: {figure}\nshares: {args.out / 'shares.csv'}")


def _panel(ax: plt.Axes, phases: list[ShareRow], stretches: list[ShareRow], title: str) -> None:
    for row in phases:
        hours = (row.start_s / 3600, row.end_s / 3600)
        ax.plot(hours, [row.measured] * 2, color=COLORS[row.entity], lw=0.8, alpha=0.5)
    for row in stretches:
        hours = (row.start_s / 3600, row.end_s / 3600)
        ax.plot(hours, [row.measured] * 2, color=COLORS[row.entity], lw=2)
        ax.plot(hours, [row.target] * 2, color=COLORS[row.entity], lw=1, ls="--")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)


if __name__ == "__main__":
    main()
