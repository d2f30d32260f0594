"""Pollux's objective and the deterministic search for it, on instances small enough to check by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shockwave.core.cluster import ClusterSpec
from shockwave.policies.pollux.policy import _lay_out
from shockwave.policies.pollux.search import Candidate, objective, search


def test_a_fair_mean_gives_every_job_a_gpu_before_any_a_second() -> None:
    jobs = [Candidate((0.0, 1.0, 1.9), 0), Candidate((0.0, 1.0, 1.9), 0)]
    assert search(jobs, 2, -1.0) == [1, 1]
    assert search(jobs, 4, -1.0) == [2, 2]
    # A job that barely speeds up leaves the GPU to one that does, under the utilitarian mean too.
    assert search([Candidate((0.0, 1.0, 1.05), 0), Candidate((0.0, 1.0, 1.9), 0)], 3, 1.0) == [1, 2]


def test_the_power_mean() -> None:
    jobs = [Candidate((0.0, 1.0), 0), Candidate((0.0, 3.0), 0)]
    assert objective(jobs, [1, 1], -1.0) == pytest.approx(2 / (1 / 1.001 + 1 / 3.001))
    assert objective(jobs, [1, 1], 0.0) == pytest.approx(3**0.5)
    assert objective(jobs, [1, 1], 1.0) == pytest.approx(2.001)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.floats(0.0, 8.0), min_size=1, max_size=6), st.integers(0, 6)), min_size=1, max_size=6
    ),
    st.integers(0, 12),
    st.sampled_from([-1.0, -0.5, 0.0, 1.0]),
)
def test_search_fits_and_never_does_worse_than_keeping_what_runs(
    jobs: list[tuple[list[float], int]], capacity: int, p: float
) -> None:
    candidates = [Candidate((0.0, *values), min(now, len(values))) for values, now in jobs]
    found = search(candidates, capacity, p)
    assert sum(found) <= capacity and all(0 <= g < len(c.speedups) for g, c in zip(found, candidates, strict=True))
    kept = [c.current for c in candidates]
    if sum(kept) <= capacity:
        assert objective(candidates, found, p) >= objective(candidates, kept, p) - 1e-12


def test_counts_are_laid_onto_types_keeping_jobs_where_they_are() -> None:
    cluster = ClusterSpec.parse("a:8:4,b:16:8")
    chosen = _lay_out(cluster, {0: 4, 1: 8, 2: 8, 3: 6}, {0: ("a", 4), 2: ("a", 4)})
    assert chosen[0] == ("a", 4)  # kept
    assert chosen[1] == ("b", 8) and chosen[2] == ("b", 8)  # largest first, on the freest type
    assert chosen[3] == ("a", 4)  # fits nowhere whole: what the freest type has left
