"""Shockwave on goodput-adaptive jobs: the window over configurations, the first round taken from it (sized by Sia's
ILP on one GPU type), and whole runs on the toy Sia profile (tests/sia_files.py: one GPU of type a at batch 32 makes
5 progress a second; b is twice as slow)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shockwave.api import simulate
from shockwave.policies.shockwave.config import ShockwaveConfig
from shockwave.policies.shockwave.elastic import ElasticWindow, first_round, leftover_pace
from shockwave.policies.shockwave.fairness import FairnessView
from shockwave.policies.shockwave.market import Fairness, MarketInputs, solve_market
from shockwave.policies.sia.configs import Config
from shockwave.results.model import Result
from sia_files import toy_application, write_csv

HEADER = "name,time,application,num_replicas,batch_size"
COLUMNS = [Config("a", 1), Config("a", 2), Config("a", 4), Config("b", 1), Config("b", 4)]
TYPE_OF = (0, 0, 0, 1, 1)
GPUS = np.array([1, 2, 4, 1, 4])


def _window(
    speeds: np.ndarray,
    current: list[int],
    pinned: list[bool],
    remaining_rounds: float = 50.0,
    move_factor: float = 1.0,
) -> ElasticWindow:
    n = len(speeds)
    remaining = np.full(n, remaining_rounds * 60.0)
    inputs = MarketInputs(
        scale_factors=np.ones(n, dtype=int),
        epochs=np.ones(n),
        progress=np.zeros(n),
        remaining_s=remaining,
        epoch_s=remaining,
        gpus=8,
        rounds=10,
        round_s=60.0,
        gpus_by_type=(4, 4),
        speeds=speeds,
        column_types=TYPE_OF,
        column_gpus=np.repeat(GPUS[None, :], n, axis=0),
    )
    fairness = FairnessView(
        now_s=0.0,
        share=1.0,
        round_s=60.0,
        submit_s=np.zeros(n),
        targets_s=remaining,
        remaining_s=remaining,
        after_current_s=remaining,
    )
    restart_rounds, factors = np.full(n, 0.5), np.full(n, move_factor)
    return ElasticWindow(
        inputs, fairness, COLUMNS, np.array(current), np.array(pinned), speeds.copy(), restart_rounds, factors
    )


def _run_long_jobs(
    tmp_path: Path, jobs: int, apart_s: int, gpus: int, cluster: str, config: ShockwaveConfig | None = None
) -> Result:
    """`jobs` toy jobs of 3000 progress (10 minutes on one GPU of a), `apart_s` apart, asking for `gpus` GPUs."""
    profiles = tmp_path / "profiles"
    toy_application(profiles, "long", epoch_progress=1000.0)
    rows = [f"long-{i},{apart_s * i},long,{gpus},64" for i in range(jobs)]
    workload = write_csv(tmp_path / "long.csv", HEADER, rows)
    return simulate(
        workload, "shockwave", cluster, trace_format="sia", profiles=profiles, round_seconds=60, config=config
    )


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any], Any]]:
    """Every call the Shockwave policy makes to its module's `name`: (args, kwargs, result)."""
    from shockwave.policies.shockwave import policy as module

    calls: list[tuple[tuple[Any, ...], dict[str, Any], Any]] = []
    real = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs, real(*args, **kwargs)))
        return calls[-1][2]

    monkeypatch.setattr(module, name, spy)
    return calls


def test_the_market_over_configurations_keeps_each_types_gpus() -> None:
    speeds = np.array([[1.0, 1.8, 3.0, 0.5, 1.5], [1.0, 1.9, 3.5, 0.5, 1.6], [1.0, 1.5, 2.0, 0.5, 1.0]])
    window = _window(speeds, [-1, -1, -1], [False] * 3)
    inputs = window.inputs
    solution = solve_market(inputs, ShockwaveConfig(), Fairness(np.full(3, np.inf), np.ones(3)))
    assert solution is not None
    counts = solution.by_type
    used = [(counts * GPUS)[:, np.array(TYPE_OF) == t].sum() for t in range(2)]
    assert used[0] <= 4 * inputs.rounds and used[1] <= 4 * inputs.rounds
    assert (counts.sum(axis=1) <= inputs.rounds).all()
    assert sum(used) > 0.9 * 8 * inputs.rounds  # three long jobs keep the cluster busy


def test_the_leftover_pace_is_the_fastest_configuration_within_the_jobs_share() -> None:
    # 8 GPUs over 3 jobs of one GPU: a share of 2.67 GPUs holds a:1, a:2 and b:1.
    speeds = np.array([[1.0, 1.8, 3.0, 0.5, 1.5], [0.0, 0.0, 3.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    gpus = np.repeat(GPUS[None, :], 3, axis=0)
    # a job that runs only in a larger configuration is paced there; one that runs nowhere at 1
    assert leftover_pace(speeds, gpus, np.ones(3), 8).tolist() == [1.8, 3.5, 1.0]
    # a job that asks for four GPUs is paced within them (a:4), as is every job of two on 8 GPUs
    assert leftover_pace(speeds[:1], gpus[:1], np.array([4]), 8).tolist() == [3.0]
    assert leftover_pace(speeds[:2], gpus[:2], np.ones(2), 8).tolist() == [3.0, 3.5]
    assert leftover_pace(np.zeros((0, 5)), np.zeros((0, 5)), np.zeros(0), 8).tolist() == []


def test_the_makespan_term_counts_leftovers_in_time_so_a_job_that_scales_badly_gets_the_fast_gpus() -> None:
    # Job 0 has less equal-share work left (150 rounds against 200) but scales badly: at its pace within its share
    # (1.2 on a:4) it needs 125 rounds, job 1 (4.0) 50. The makespan term gives job 0 type a; counted in equal-share
    # work (M >= L_j) it gave type a to job 1 and left job 0 on b:4.
    speeds = np.array([[1.0, 1.1, 1.2, 0.5, 0.6], [1.0, 2.0, 4.0, 0.5, 2.0]])
    remaining = np.array([150.0, 200.0]) * 60.0
    inputs = _window(speeds, [-1, -1], [False, False]).inputs
    paces = leftover_pace(speeds, inputs.gpus_in_column, inputs.scale_factors, inputs.gpus)
    inputs = replace(inputs, remaining_s=remaining, epoch_s=remaining, paces=paces)
    solution = solve_market(inputs, ShockwaveConfig(k=0.01), Fairness(np.full(2, np.inf), np.ones(2)))
    assert solution is not None
    on_a = solution.by_type[:, np.array(TYPE_OF) == 0].sum(axis=1)
    assert on_a[0] == inputs.rounds and on_a[1] <= 1


def test_the_first_round_fits_the_types_keeps_pins_and_fills_idle_gpus() -> None:
    speeds = np.array([[1.0, 1.8, 3.0, 0.5, 1.5], [1.0, 1.9, 3.5, 0.5, 1.6], [1.0, 1.5, 2.0, 0.5, 1.0]])
    window = _window(speeds, [0, 2, -1], [False, True, False])
    counts = np.array([[0, 0, 10, 0, 0], [0, 0, 10, 0, 0], [0, 0, 0, 0, 0]])  # both ask for all of type a
    chosen = first_round(counts, window, urgency=np.zeros(3))
    assert chosen[1] == 2  # pinned: keeps its four GPUs of a
    used = {t: sum(GPUS[c] for c in chosen.values() if TYPE_OF[c] == t) for t in (0, 1)}
    assert used[0] <= 4 and used[1] <= 4
    assert TYPE_OF[chosen[0]] == 1  # displaced from a, job 0 runs on b rather than waits
    assert 2 not in chosen and used[1] == 4  # job 2, left out of the plan, would only get idle GPUs
    smaller = first_round(np.array([[0, 10, 0, 0, 0], [0, 0, 10, 0, 0], [0, 0, 0, 0, 0]]), window, np.zeros(3))
    assert smaller == {1: 2, 0: 3, 2: 3}  # a displaced job takes no more GPUs than planned; job 2 gets idle ones


def test_a_move_that_gains_less_than_its_restart_is_not_taken() -> None:
    # Job 0 runs in a:1 at speed 1.0; a:2 is only 2% faster and a restart costs half a round of a 2-round job.
    speeds = np.array([[1.0, 1.02, 0.0, 0.0, 0.0]])
    window = _window(speeds, [0], [False], remaining_rounds=2.0)
    assert first_round(np.array([[0, 10, 0, 0, 0]]), window, np.zeros(1)) == {0: 0}
    faster = _window(np.array([[1.0, 3.0, 0.0, 0.0, 0.0]]), [0], [False], remaining_rounds=2.0)
    assert first_round(np.array([[0, 10, 0, 0, 0]]), faster, np.zeros(1)) == {0: 1}


def test_a_move_pays_back_over_all_the_work_left_and_must_beat_the_move_factor() -> None:
    # A 5% faster configuration repays half a round's restart after 10.5 rounds: beyond the 10-round window, well
    # within the 50 rounds the job has left.
    plan = np.array([[0, 10, 0, 0, 0]])
    speeds = np.array([[1.0, 1.05, 0.0, 0.0, 0.0]])
    assert first_round(plan, _window(speeds, [0], [False], remaining_rounds=50.0), np.zeros(1)) == {0: 1}
    assert first_round(plan, _window(speeds, [0], [False], remaining_rounds=5.0), np.zeros(1)) == {0: 0}
    # A job that has restarted so often that a move leaves it 90% of its life moves only for more than 1/0.9.
    often = _window(speeds, [0], [False], remaining_rounds=50.0, move_factor=0.9)
    assert first_round(plan, often, np.zeros(1)) == {0: 0}
    much = _window(np.array([[1.0, 1.2, 0.0, 0.0, 0.0]]), [0], [False], remaining_rounds=50.0, move_factor=0.9)
    assert first_round(plan, much, np.zeros(1)) == {0: 1}


def test_shockwave_grows_goodput_adaptive_jobs_and_finishes_them(tmp_path: Path) -> None:
    result = _run_long_jobs(tmp_path, 4, 30, 2, "a:8:4,b:8:8")
    assert result.complete and len(result.jobs) == 4
    assert all(j.jct_s < 30 + 3000 / 5 for j in result.jobs)  # faster than on one GPU of the faster type
    assert result.model_extra["elastic"]["restarts"] >= 4  # every job moves at least once
    (tmp_path / "again").mkdir()
    again = _run_long_jobs(tmp_path / "again", 4, 30, 2, "a:8:4,b:8:8")
    assert [j.jct_s for j in again.jobs] == [j.jct_s for j in result.jobs]  # deterministic


def test_a_mixed_workload_keeps_its_rigid_lines_rigid(tmp_path: Path) -> None:
    from shockwave.core.cluster import ClusterSpec
    from shockwave.workload_model.sia.rigid import read_sia_workload

    profiles = tmp_path / "profiles"
    toy_application(profiles, "mixed", epoch_progress=200.0)
    workload = write_csv(
        tmp_path / "mixed.csv",
        HEADER + ",category",
        ["m-0,0,mixed,2,64,rigid", "m-1,0,mixed,1,64,adaptive", "m-2,60,mixed,4,128,rigid"],
    )
    jobs, _, _ = read_sia_workload(workload, profiles, ClusterSpec.parse("a:8:4,b:8:8"), elastic=True)
    assert [(j.elastic, j.scale_factor) for j in jobs] == [(False, 2), (True, 1), (False, 4)]
    result = simulate(workload, "shockwave", "a:8:4,b:8:8", trace_format="sia", profiles=profiles, round_seconds=60)
    assert result.complete and len(result.jobs) == 3


@pytest.mark.parametrize("policy", ["sia", "shockwave"])
def test_every_adaptive_policy_runs_a_rigid_line_at_its_gang(policy: str, tmp_path: Path) -> None:
    profiles = tmp_path / "profiles"
    toy_application(profiles, "toy")
    workload = write_csv(tmp_path / "w.csv", HEADER + ",category", ["toy-0,0,toy,2,64,rigid", "toy-1,0,toy,1,32,"])
    adaptive = simulate(workload, policy, "a:8:4", trace_format="sia", profiles=profiles, round_seconds=60)
    rigid = simulate(workload, "fifo_perf", "a:8:4", trace_format="sia", profiles=profiles, round_seconds=60)
    assert adaptive.complete and adaptive.jobs[0].jct_s == pytest.approx(rigid.jobs[0].jct_s)


def test_a_left_out_rigid_gang_gets_idle_gpus_and_pins_stay() -> None:
    from shockwave.policies.shockwave.elastic import _discounted

    speeds = np.array([[0.0, 1.0, 0.0, 0.0, 0.0], [1.0, 1.8, 3.0, 0.5, 1.5]])  # job 0: a rigid pair on type a
    window = _window(speeds, [-1, -1], [False, False])
    assert first_round(np.zeros((2, 5), dtype=int), window, np.array([1.0, 0.0])) == {0: 1, 1: 1}
    raw = np.array([[1.0, 2.0, 3.0, 0.5, 1.5]] * 3)
    discounted = _discounted(raw, np.array([0, 1, -1]), np.array([False, True, False]), np.full(3, 0.75))
    assert discounted[0].tolist() == [1.0, 1.5, 2.25, 0.375, 1.125]  # running: every other column x its factor
    assert discounted[1].tolist() == [0.0, 2.0, 0.0, 0.0, 0.0]  # pinned: only where it runs
    assert discounted[2].tolist() == raw[2].tolist()  # waiting: pays the same restart anywhere


@pytest.mark.parametrize("stint", [0.0, 2.0])
def test_the_policy_holds_a_moved_job_for_its_stint_and_discounts_by_its_restarts(
    stint: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The toy application restarts in 30 s (Sia's default): with 60 s rounds a moved job has restored by the next
    # round, so only a stint (2 restarts' time: until 90 s after the move) holds it there.
    calls = _spy(monkeypatch, "observe_window")
    result = _run_long_jobs(tmp_path, 4, 30, 2, "a:8:4,b:8:8", ShockwaveConfig(elastic_min_stint=stint))
    assert result.complete
    # observe_window(view, ids, forecasts, targets, current, pinned, move_factors)
    held = sum(len(args[5]) for args, _, _ in calls)
    assert held > 0 if stint else held == 0
    assert min(args[6].min() for args, _, _ in calls) < 1.0  # a job that restarted moves at a discount


def test_the_policy_paces_leftovers_at_the_markets_discounted_speeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _spy(monkeypatch, "observe_window")
    _run_long_jobs(tmp_path, 4, 30, 2, "a:8:4,b:8:8")
    differs = 0
    for _, _, window in calls:
        inputs = window.inputs
        assert inputs.paces is not None
        args = (inputs.gpus_in_column, inputs.scale_factors, inputs.gpus)
        assert inputs.paces.tolist() == leftover_pace(inputs.speed, *args).tolist()
        differs += inputs.paces.tolist() != leftover_pace(window.speeds, *args).tolist()
    assert differs > 0  # some window discounted a job's pace-setting configuration


def test_windows_over_configurations_take_no_floor_of_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A round in any configuration, one GPU's too, would meet a floor of rounds (see ShockwavePolicy._late_floor).
    calls = _spy(monkeypatch, "solve_market")
    _run_long_jobs(tmp_path, 12, 10, 1, "a:4:4,b:4:4")
    assert calls and all(kwargs.get("floor") is None for _, kwargs, _ in calls)


def test_on_one_gpu_type_the_ilp_sizes_every_job_the_market_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _spy(monkeypatch, "sized_by_goodput")
    result = _run_long_jobs(tmp_path, 8, 60, 1, "a:16:4")
    assert result.complete and calls
    resized = 0
    for (view, _, window, _, taken), _, chosen in calls:
        assert set(taken) <= set(chosen)  # who runs is the market's
        assert sum(window.columns[c].gpus for c in chosen.values()) <= view.cluster.gpus
        assert all(chosen[r] == window.current[r] for r in np.flatnonzero(window.pinned))
        resized += chosen != taken
    assert resized > 0  # and some differently from the market


def test_on_several_gpu_types_the_market_sizes_the_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spy(monkeypatch, "sized_by_goodput")
    assert _run_long_jobs(tmp_path, 6, 10, 1, "a:4:4,b:4:4").complete
    assert not calls


def test_where_the_ilp_finds_no_plan_the_markets_first_round_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shockwave.policies.shockwave import sizing
    from shockwave.policies.solvers.highs import SolverFailure

    def fails(*args: Any, **kwargs: Any) -> dict[int, Config]:
        raise SolverFailure("no plan")

    monkeypatch.setattr(sizing, "choose", fails)
    calls = _spy(monkeypatch, "sized_by_goodput")
    assert _run_long_jobs(tmp_path, 6, 10, 1, "a:8:4").complete
    assert calls and all(chosen == args[4] for args, _, chosen in calls)


def test_the_ilp_weighs_each_job_by_the_markets_two_terms() -> None:
    from shockwave.policies.shockwave.sizing import weights

    window = _window(np.ones((3, 5)), [-1, -1, -1], [False] * 3)
    inputs = replace(window.inputs, remaining_s=np.array([600.0, 1200.0, 1200.0]), paces=np.array([1.0, 1.0, 2.0]))
    counts = np.zeros((3, 5), dtype=int)
    counts[0, 0], counts[1, 2] = 10, 5  # shares of the 10-round window: 1, 0.5, 0
    # leftovers in time: 10, 20 and 10 rounds, over the longest: 0.5, 1, 0.5
    assert weights(replace(window, inputs=inputs), counts).tolist() == [2.5, 2.5, 1.5]
