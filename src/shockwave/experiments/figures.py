"""Figures of compared policies and of sweeps, as PNG and SVG, readable without a caption."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from shockwave.io.atomic import replacing
from shockwave.results.metrics import UNFAIR_RHO

HEADLINE = (
    ("makespan_s", "Makespan", "hours", 1 / 3600),
    ("avg_jct_s", "Average job completion time", "hours", 1 / 3600),
    ("worst_ftf", "Worst finish-time fairness ρ", "ρ (lower is fairer)", 1.0),
    ("unfair_fraction", f"Jobs treated unfairly (ρ > {UNFAIR_RHO})", "% of jobs", 100.0),
)
PLAIN_TEXT = {"text.parse_math": False}
"""Every figure is made and saved under these settings: its names come from files (policies, traces, clusters),
and a `$` in one is text to show, not mathtext that fails to draw."""


MANY = 10
"""Above this many policies, the palette grows past tab10 and the rho CDF and the timeline become small multiples,
one panel per family of policies."""


def colors(policies: list[str]) -> dict[str, Any]:
    """One color per policy, the same in every figure of a run (Shockwave always the first), none repeated: tab10
    for up to ten, then tab20 and its two companions (60 distinct colors), then a continuous map."""
    ordered = sorted(policies, key=lambda p: (p != "shockwave", policies.index(p)))
    if len(ordered) <= MANY:
        palette = list(plt.get_cmap("tab10").colors)
    else:
        palette = [c for name in ("tab20", "tab20b", "tab20c") for c in plt.get_cmap(name).colors]
    if len(ordered) > len(palette):
        palette = [plt.get_cmap("turbo")(x) for x in np.linspace(0.0, 1.0, len(ordered))]
    return {p: palette[i] for i, p in enumerate(ordered)}


def save(fig: plt.Figure, stem: Path) -> list[Path]:
    """`stem`.png and `stem`.svg, each written beside its name and renamed over it (a link there is replaced, not
    written through)."""
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    try:
        for path, dpi in zip(paths, (150, "figure"), strict=True):
            with replacing(path) as f:
                fig.savefig(f, format=path.suffix[1:], dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return paths


def _subtitle(results: list[dict[str, Any]]) -> str:
    first = results[0]
    cluster = str(first.get("cluster") or "")
    pools = cluster if "," in cluster else f"{first['gpus']} GPUs"  # several types: each pool, not their sum
    rounds = f"{first['round_seconds']:g} s rounds"
    return f"{Path(str(first['trace'])).name} · {pools} · {rounds} · {first['mechanics']} mechanics"


FAMILIES = (
    ("Shockwave, Themis, Sia, Pollux", ("shockwave", "themis", "sia", "pollux")),
    ("max-min fairness", ("max_min_fairness",)),
    ("finish-time fairness", ("finish_time_fairness",)),
    ("makespan and throughput", ("min_total_duration", "max_sum_throughput")),
)


def families(policies: list[str]) -> list[tuple[str, list[str]]]:
    """Policies by family, for small multiples: a name joins the first family one of whose prefixes it starts
    with, else "other policies" (FIFO, AlloX, Gandiva, fixed shares, plug-ins); empty families are left out."""
    grouped: dict[str, list[str]] = {title: [] for title, _ in FAMILIES} | {"other policies": []}
    for policy in policies:
        title = next((t for t, prefixes in FAMILIES if policy.startswith(prefixes)), "other policies")
        grouped[title].append(policy)
    return [(title, members) for title, members in grouped.items() if members]


def metric_bars(results: list[dict[str, Any]], stem: Path) -> list[Path]:
    return save(metric_bars_figure(results), stem)


@plt.rc_context(PLAIN_TEXT)
def metric_bars_figure(results: list[dict[str, Any]]) -> plt.Figure:
    """The four headline metrics as bars lying down, one per policy, names on the y axis and the figure as tall as
    they need: no name overlaps another at any number of policies."""
    policies = [r["policy"] for r in results]
    palette = colors(policies)
    fig, axes = plt.subplots(2, 2, figsize=(13, max(6.5, 2.2 + 0.5 * len(results))), layout="constrained")
    for ax, (key, title, unit, scale) in zip(axes.flat, HEADLINE, strict=True):
        values = [r[key] * scale for r in results]
        bars = ax.barh(range(len(results)), values, color=[palette[p] for p in policies])
        ax.bar_label(bars, fmt="%.2f" if scale == 1.0 or unit == "hours" else "%.1f", fontsize=8, padding=2)
        ax.set_yticks(range(len(results)), policies, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel(unit)
        ax.margins(x=0.2)
        if key == "makespan_s":
            bound = results[0]["makespan_lower_bound_s"] * scale
            ax.axvline(bound, color="black", linestyle="--", linewidth=1, label=f"lower\nbound\n{bound:.2f} h")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)  # beside: over no bar or label
        if key == "worst_ftf":
            ax.axvline(1.0, color="black", linestyle=":", linewidth=1, label="ρ = 1\n(fair\nshare)")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle(f"Headline metrics per policy\n{_subtitle(results)}")
    return fig


def rho_cdf(results: list[dict[str, Any]], stem: Path) -> list[Path]:
    return save(rho_cdf_figure(results), stem)


@plt.rc_context(PLAIN_TEXT)
def rho_cdf_figure(results: list[dict[str, Any]]) -> plt.Figure:
    """One CDF of rho per policy, the legend beside the plot, never over it; above MANY policies, one panel per
    family (Shockwave's curve, black, in each for reference), because thirty curves in one plot cannot be told apart."""
    palette = colors([r["policy"] for r in results])
    by_name = {r["policy"]: r for r in results}
    panels = families(list(by_name)) if len(results) > MANY else [("", list(by_name))]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(11, 1.5 + 3.2 * len(panels)) if len(panels) > 1 else (10, 5),
        sharex=True, squeeze=False, layout="constrained",
    )  # fmt: skip
    for ax, (title, members) in zip(axes[:, 0], panels, strict=True):
        reference = ["shockwave"] if len(panels) > 1 and "shockwave" in by_name and "shockwave" not in members else []
        for policy in [*members, *reference]:
            rhos = np.sort([job["ftf"] for job in by_name[policy]["jobs"]])
            is_reference = policy in reference
            ax.step(
                rhos,
                np.arange(1, len(rhos) + 1) / len(rhos),
                where="post",
                color="black" if is_reference else palette[policy],
                label=f"{policy} (reference)" if is_reference else policy,
                linewidth=1.0 if is_reference else 1.6,
                linestyle="--" if is_reference else "-",
            )
        ax.axvline(UNFAIR_RHO, color="black", linestyle=":", linewidth=1, label=f"ρ = {UNFAIR_RHO} (unfair above)")
        ax.set_ylabel("fraction of jobs\nwith ρ at most x")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        if title:
            ax.set_title(title, fontsize=10)
    axes[-1, 0].set_xlabel("finish-time fairness ρ = JCT / (T_iso × max(1, N/G))")
    fig.suptitle(f"Distribution of finish-time fairness\n{_subtitle(results)}")
    return fig


def timeline(results: list[dict[str, Any]], stem: Path) -> list[Path]:
    return save(timeline_figure(results), stem)


@plt.rc_context(PLAIN_TEXT)
def timeline_figure(results: list[dict[str, Any]]) -> plt.Figure:
    """Jobs running and GPUs busy in each round, per policy, the legend beside each row of plots; above MANY
    policies, one row per family (Shockwave, black, in each for reference)."""
    palette = colors([r["policy"] for r in results])
    by_name = {r["policy"]: r for r in results}
    panels = families(list(by_name)) if len(results) > MANY else [("", list(by_name))]
    fig, axes = plt.subplots(
        2 * len(panels) if len(panels) == 1 else len(panels), 1 if len(panels) == 1 else 2,
        figsize=(10, 7) if len(panels) == 1 else (15, 1.5 + 3.0 * len(panels)),
        sharex=True, squeeze=False, layout="constrained",
    )  # fmt: skip
    rows = [(axes[0, 0], axes[1, 0])] if len(panels) == 1 else [(row[0], row[1]) for row in axes]
    for (jobs_ax, gpus_ax), (title, members) in zip(rows, panels, strict=True):
        reference = ["shockwave"] if len(panels) > 1 and "shockwave" in by_name and "shockwave" not in members else []
        # Shockwave is drawn last and thicker so the other policies do not hide it.
        for policy in sorted([*members, *reference], key=lambda p: p == "shockwave"):
            points = np.asarray(by_name[policy]["timeline"], dtype=float).reshape(-1, 3)
            is_reference = policy in reference
            style = {
                "color": "black" if is_reference else palette[policy],
                "linewidth": 2.0 if policy == "shockwave" and not is_reference else 0.9,
                "linestyle": "--" if is_reference else "-",
                "label": f"{policy} (reference)" if is_reference else policy,
            }
            for ax, column in ((jobs_ax, 1), (gpus_ax, 2)):
                ax.step(points[:, 0] / 3600, points[:, column], where="post", **style)
        gpus_ax.axhline(results[0]["gpus"], color="black", linestyle=":", linewidth=1, label="cluster size")
        suffix = f" · {title}" if title else ""
        jobs_ax.set_ylabel("jobs running")
        jobs_ax.set_title(f"Jobs running in each round{suffix}", fontsize=10)
        gpus_ax.set_ylabel("GPUs busy")
        gpus_ax.set_title(f"GPUs busy in each round{suffix}", fontsize=10)
        for ax in (jobs_ax, gpus_ax):
            ax.grid(alpha=0.3)
        handles, labels = gpus_ax.get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: (labels[i] != "shockwave", labels[i] == "cluster size"))
        legend_ax = gpus_ax if len(panels) > 1 else jobs_ax
        legend_ax.legend(
            [handles[i] for i in order], [labels[i] for i in order], fontsize=8, loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
        )  # fmt: skip
    for ax in axes[-1]:
        ax.set_xlabel("simulated time (hours)")
    fig.suptitle(f"Cluster activity over time\n{_subtitle(results)}")
    return fig


def comparison_figures(results: list[dict[str, Any]], folder: Path) -> list[Path]:
    return [
        *metric_bars(results, folder / "metrics"),
        *rho_cdf(results, folder / "rho_cdf"),
        *timeline(results, folder / "timeline"),
    ]


@plt.rc_context(PLAIN_TEXT)
def scale_lines(rows: list[dict[str, Any]], stem: Path, title: str) -> list[Path]:
    """Each headline metric against cluster size; a line per policy through the mean, shaded from min to max."""
    policies = list(dict.fromkeys(row["policy"] for row in rows))
    palette = colors(policies)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (key, name, unit, scale) in zip(axes.flat, HEADLINE, strict=True):
        for policy in policies:
            mine = sorted((r for r in rows if r["policy"] == policy), key=lambda r: r["gpus"])
            gpus = [r["gpus"] for r in mine]
            mean = np.array([r[f"{key}_mean"] for r in mine]) * scale
            low = np.array([r[f"{key}_min"] for r in mine]) * scale
            high = np.array([r[f"{key}_max"] for r in mine]) * scale
            ax.plot(gpus, mean, marker="o", color=palette[policy], label=policy)
            ax.fill_between(gpus, low, high, color=palette[policy], alpha=0.2, linewidth=0)
        ax.set_xscale("log", base=2)
        sizes = sorted({r["gpus"] for r in rows})
        ax.set_xticks(sizes, [str(g) for g in sizes])
        ax.set_title(name)
        ax.set_xlabel("cluster size (GPUs)")
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{title}\nmean over seeds and workloads per cluster size; shading spans min to max")
    fig.tight_layout()
    return save(fig, stem)


@plt.rc_context(PLAIN_TEXT)
def load_lines(rows: list[dict[str, Any]], stem: Path, title: str) -> list[Path]:
    """Gavel's Figure 8 style: average JCT (of the measurement window) against the input job rate, a line per
    policy through the mean over seeds, shaded from min to max; one panel per cluster."""
    policies = list(dict.fromkeys(row["policy"] for row in rows))
    clusters = list(dict.fromkeys(row["cluster"] for row in rows))
    palette = colors(policies)
    fig, axes = plt.subplots(1, len(clusters), figsize=(5.5 * len(clusters), 4.2), squeeze=False)
    for ax, cluster in zip(axes.flat, clusters, strict=True):
        for policy in policies:
            mine = sorted((r for r in rows if r["policy"] == policy and r["cluster"] == cluster), key=_rate)
            if not mine:
                continue
            rate = [_rate(r) for r in mine]
            hours = [np.array([r[f"avg_jct_s_{s}"] for r in mine]) / 3600 for s in ("mean", "min", "max")]
            ax.plot(rate, hours[0], marker="o", color=palette[policy], label=policy)
            ax.fill_between(rate, hours[1], hours[2], color=palette[policy], alpha=0.2, linewidth=0)
        ax.set_title(cluster)
        ax.set_xlabel("input job rate (jobs/hour)")
        ax.set_ylabel("average JCT (hours)")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"{title}\nmean over seeds per rate; shading spans min to max")
    fig.tight_layout()
    return save(fig, stem)


def _rate(row: dict[str, Any]) -> float:
    return float(row["jobs_per_hour"])
