"""Comparison figures stay legible at any number of policies: no tick label over another, legends beside the plot,
no color used twice (checked with matplotlib's own text extents)."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.transforms import Bbox

from shockwave.experiments.figures import colors, metric_bars_figure, rho_cdf_figure, timeline_figure
from shockwave.policies.names import BUILTIN_NAMES


def _results(count: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(count)
    names = [*BUILTIN_NAMES, *(f"my_policy_{i}" for i in range(count))][:count]
    return [
        {
            "policy": name, "makespan_s": float(rng.uniform(2e4, 4e4)), "avg_jct_s": float(rng.uniform(5e3, 2e4)),
            "worst_ftf": float(rng.uniform(0.8, 8)), "unfair_fraction": float(rng.uniform(0, 0.8)),
            "makespan_lower_bound_s": 2e4, "trace": "canonical-120.trace", "gpus": 32, "round_seconds": 120.0,
            "mechanics": "corrected", "jobs": [{"ftf": float(x)} for x in rng.uniform(0.5, 4, 40)],
            "timeline": [[t * 120.0, float(rng.integers(0, 40)), float(rng.integers(0, 32))] for t in range(50)],
        }
        for name in names
    ]  # fmt: skip


def _overlapping(boxes: list[Bbox]) -> list[tuple[int, int]]:
    return [(i, j) for (i, a), (j, b) in combinations(enumerate(boxes), 2) if a.overlaps(b)]


@pytest.mark.parametrize("count", [3, 8, 29, 30])
def test_no_policy_name_overlaps_another_on_the_bars(count: int) -> None:
    fig = metric_bars_figure(_results(count))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = [t for t in (*ax.get_xticklabels(), *ax.get_yticklabels()) if t.get_text() in BUILTIN_NAMES]
        assert len(labels) == min(count, len(BUILTIN_NAMES))
        assert _overlapping([t.get_window_extent(renderer) for t in labels]) == []
    plt.close(fig)


@pytest.mark.parametrize("build", [metric_bars_figure, rho_cdf_figure, timeline_figure])
@pytest.mark.parametrize("count", [3, 30])
def test_legends_stand_beside_the_plots(build: Any, count: int) -> None:
    fig = build(_results(count))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [legend for legend in (*fig.legends, *(ax.get_legend() for ax in fig.axes)) if legend is not None]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert not any(box.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
        assert _overlapping([t.get_window_extent(renderer) for t in legend.get_texts()]) == []
    plt.close(fig)


def test_thirty_policies_get_thirty_colors_and_shockwave_the_first() -> None:
    names = [r["policy"] for r in _results(30)][::-1]
    palette = colors(names)
    assert len({tuple(c) for c in palette.values()}) == 30
    assert palette["shockwave"] == colors(["shockwave"])["shockwave"]
