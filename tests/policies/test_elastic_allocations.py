"""What adaptive policies keep about their jobs (`policies/elastic.py`): restores, the minimum stint after one, and
the share of its life a job keeps if it moves again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from shockwave.policies.elastic import Allocations


def _job(job_id: int, *, arrival_s: float = 0.0, run_time_s: float = 0.0) -> Any:
    return SimpleNamespace(id=job_id, arrival_s=arrival_s, run_time_s=run_time_s, spec=SimpleNamespace(restart_s=30.0))


def test_a_moved_job_is_held_while_it_restores_and_then_for_its_stint() -> None:
    allocations = Allocations()
    jobs = {0: _job(0), 1: _job(1)}
    allocations.record(SimpleNamespace(now=100.0, jobs=jobs), {0: ("a", 2), 1: ("a", 1)})  # both restore to 130 s
    assert allocations.restoring(129.0) == {0: ("a", 2), 1: ("a", 1)}
    assert allocations.restoring(130.0) == {}
    held = allocations.restoring(130.0, {0: 30.0})  # job 0 then trains one restart's time
    assert held == {0: ("a", 2)}
    assert allocations.restoring(160.0, {0: 30.0}) == {}


def test_the_move_factor_spares_young_jobs_and_shrinks_with_restarts() -> None:
    allocations = Allocations()
    job = _job(0, run_time_s=60.0)
    view = SimpleNamespace(now=0.0, jobs={0: job})
    assert allocations.move_factor(job, 20.0, 30.0) == 1.0  # younger than one restart
    for config in (("a", 1), ("a", 2)):
        allocations.record(view, {0: config})
    assert allocations.restarts_of(job) == 2
    assert allocations.move_factor(job, 300.0, 30.0) == pytest.approx((300 - 2 * 30) / (300 + 30))
