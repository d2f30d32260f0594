"""The run summary's header names the cluster as it was given."""

from __future__ import annotations

from shockwave.results.report import gpus_of


def test_one_type_is_a_count_and_several_types_are_their_pools() -> None:
    assert gpus_of({"gpus": 32, "cluster": "v100:32"}) == "32 GPUs"
    assert gpus_of({"gpus": 32, "cluster": None}) == "32 GPUs"
    several = {"gpus": 64, "cluster": "aws:24:4,rtx:24:8,dgx-ext:16:8"}
    assert gpus_of(several) == "aws 24, rtx 24, dgx-ext 16 GPUs"


def test_the_comparison_of_every_built_in_fits_a_terminal_with_whole_headers() -> None:
    """29 policies, the longest named in 49 characters: the policy column folds names, no column is cut."""
    from rich.console import Console

    from shockwave.policies.names import BUILTIN_NAMES
    from shockwave.results.report import print_comparison

    results = [
        {
            "policy": name, "trace": "canonical-120.trace", "gpus": 32, "mechanics": "corrected",
            "round_seconds": 120.0,
            "makespan_s": 30000.0 + i, "avg_jct_s": 9000.0 + i, "worst_ftf": 1.5, "unfair_fraction": 0.25,
            "utilization": 0.6, "makespan_lower_bound_s": 20000.0, "num_rounds": 300, "wall_seconds": 1.0,
        }
        for i, name in enumerate(BUILTIN_NAMES)
    ]  # fmt: skip
    console = Console(width=140, record=True)
    print_comparison(console, results)
    shown = console.export_text()
    assert max(len(line) for line in shown.splitlines()) <= 140
    for header in ("makespan s", "x bound", "avg JCT s", "worst rho", "unfair %", "util %", "wall s"):
        assert header in shown
    assert "max_sum_throughput_normali" in shown and "zed_by_cost_packed_SLOs" in shown  # folded, not cut
