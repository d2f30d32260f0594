"""The scheduler's snapshot is plain, versioned JSON: no code is loaded from a journal, and a policy restored from its
state plans exactly as the one that saved it."""

from __future__ import annotations

import ast
import json
import math
import pickle
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, shockwave
from runtime_trace import write_runtime_trace
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.core.loop import RoundRecord
from shockwave.core.plan import RoundPlan
from shockwave.core.policy import Policy, SchedulerView
from shockwave.core.state import JobState
from shockwave.policies.registry import POLICIES, make_policy, policy_info
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.runtime.run import RunRequest, run
from shockwave.runtime.snapshot import FORMAT, Snapshot
from shockwave.simulator.engine import Simulator
from shockwave.simulator.mechanics import preset
from shockwave.workload_model.generator import GeneratorParams, generate
from shockwave.workload_model.job import Job
from shockwave.workload_model.profile import JobProfile, build_profile
from shockwave.workload_model.throughput import load_throughputs

SOURCES = ROOT / "src" / "shockwave"


# -- no code from data ---------------------------------------------------------------------------------------------
class Planted:
    """A pickle that creates `path` when loaded: what a hostile run folder could hold in its journal."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return Path.touch, (self.path,)


@pytest.fixture
def planted_run(tmp_path: Path) -> tuple[Path, Path]:
    """A finished run whose journal's memory row was replaced by the hostile pickle; (run folder, its marker)."""
    out, marker = tmp_path / "run", tmp_path / "planted"
    trace = write_runtime_trace(tmp_path / "rt8.trace")
    request = RunRequest(trace=trace, policy="max_min_fairness", gpus=4, out=out, round_seconds=0.1, time_scale=4)
    run(request, lambda req: FakeBackend(req.gpus, steps_per_s=400.0))
    blob = pickle.dumps(Planted(marker))
    pickle.loads(blob)  # the blob does what it says when unpickled
    assert marker.exists()
    marker.unlink()
    with sqlite3.connect(out / "journal.sqlite") as db:
        db.execute("UPDATE memory SET data = ?", (blob,))
    return out, marker


def test_a_pickled_snapshot_is_refused_and_never_loaded(planted_run: tuple[Path, Path]) -> None:
    out, marker = planted_run
    request = RunRequest(trace=Path(), policy="max_min_fairness", gpus=1, out=out, resume=True)
    with pytest.raises(InputError, match="snapshot is binary, not JSON") as refused:
        run(request, lambda req: FakeBackend(req.gpus, steps_per_s=400.0))
    assert refused.value.path == str(out / "journal.sqlite")
    assert not marker.exists()


def test_the_cli_refuses_it_in_one_line_with_exit_2(planted_run: tuple[Path, Path]) -> None:
    out, marker = planted_run
    result = shockwave("run", "--resume", "--out", out, "--policy", "max_min_fairness")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "journal.sqlite" in lines[0] and "never loaded" in lines[0]
    assert not marker.exists()


def test_no_module_imports_pickle() -> None:
    for path in SOURCES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
                assert not any("pickle" in name for name in names), f"{path} imports pickle"


# -- every policy resumes exactly ----------------------------------------------------------------------------------
def small_workload() -> tuple[list[Job], list[JobProfile]]:
    """10 jobs (static, accordion and gns; gangs of 1-4) arriving over ~5 minutes."""
    tm = load_throughputs(None)
    params = GeneratorParams(jobs=10, min_hours=0.1, max_hours=0.3, lam=30.0, seed=7, gpu_mix=(0.5, 0.3, 0.2, 0.0))
    jobs = [line.job() for line in generate(params, tm)]
    return jobs, [build_profile(job, tm) for job in jobs]


class Twinned(Policy):
    """Runs `policy` and checks it against copies restored from its journaled snapshot.

    At the rounds in `before` (before planning) and `after` (after planning, where the runtime journals) the snapshot
    goes through JSON text into a freshly built policy, with the admitted jobs rebuilt from the trace. From then on
    every hook reaches the copy too, and every round the copy must plan as the original does.
    """

    def __init__(self, make: Callable[[], Policy], workload: tuple[list[Job], list[JobProfile]]) -> None:
        self.make, self.workload = make, workload
        self.original = make()
        self.name, self.plans_gpu_types = self.original.name, self.original.plans_gpu_types
        self.copies: list[Policy] = []
        self.compared = 0
        self.before, self.after = {1, 5, 12}, {3, 9, 20}

    def _restored(self, view: SchedulerView) -> Policy:
        text = Snapshot(self.original, view.jobs, [RoundRecord(4, 1.5, 2, 3)]).dumps()
        restored = Snapshot.loads(text, self.make(), *self.workload, path=Path("journal.sqlite"))
        assert restored.jobs == view.jobs and restored.rounds == [RoundRecord(4, 1.5, 2, 3)]
        assert restored.policy.state_dict() == self.original.state_dict()
        assert Snapshot(restored.policy, restored.jobs, restored.rounds).dumps() == text
        return restored.policy

    def plan(self, view: SchedulerView) -> RoundPlan:
        if view.round_index in self.before:
            self.copies.append(self._restored(view))
        chosen = self.original.plan(view)
        for copy in self.copies:
            assert copy.plan(view) == chosen, f"round {view.round_index}"
            self.compared += 1
        if view.round_index in self.after:
            self.copies.append(self._restored(view))
        return chosen

    def job_added(self, view: SchedulerView, job: JobState) -> None:
        for policy in (self.original, *self.copies):
            policy.job_added(view, job)

    def job_removed(self, view: SchedulerView, job: JobState) -> None:
        for policy in (self.original, *self.copies):
            policy.job_removed(view, job)

    def round_executed(self, view: SchedulerView, job: JobState, exec_s: float, steps: int) -> None:
        for policy in (self.original, *self.copies):
            policy.round_executed(view, job, exec_s, steps)

    def round_failed(self, view: SchedulerView, job: JobState) -> None:
        for policy in (self.original, *self.copies):
            policy.round_failed(view, job)


def without_timing(state: dict[str, Any]) -> dict[str, Any]:
    """Shockwave's solve latencies are the machine's, not decisions."""
    if "stats" not in state:
        return state
    return {**state, "stats": {k: v for k, v in state["stats"].items() if k != "latencies_s"}}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_restored_policy_plans_every_later_round_as_the_original(name: str) -> None:
    workload = small_workload()
    twinned = Twinned(lambda: policy_info(name).offered(min_realloc_interval_s=240.0), workload)
    mechanics = preset("corrected")
    result = Simulator(*workload, load_throughputs(None), ClusterSpec.of(4), twinned, mechanics).run()
    assert result.summary["unfinished_jobs"] == []
    assert len(twinned.copies) == 6 and twinned.compared > 6 * 10
    final = without_timing(twinned.original.state_dict())
    assert all(without_timing(copy.state_dict()) == final for copy in twinned.copies)


@pytest.mark.parametrize("name", ["shockwave", "max_min_fairness_perf"])
def test_a_restored_policy_plans_as_the_original_on_several_gpu_types(name: str) -> None:
    """Shockwave's per-type plan, warm start and per-type measurements survive the journal too."""
    workload = small_workload()
    twinned = Twinned(lambda: policy_info(name).offered(min_realloc_interval_s=240.0), workload)
    cluster = ClusterSpec.parse("v100:4,p100:2,k80:2")
    result = Simulator(*workload, load_throughputs(None), cluster, twinned, preset("corrected")).run()
    assert result.summary["unfinished_jobs"] == [] and set(result.summary["utilization_by_type"]) == set(cluster.types)
    assert len(twinned.copies) >= 5 and twinned.compared > 5 * 10
    final = without_timing(twinned.original.state_dict())
    assert all(without_timing(copy.state_dict()) == final for copy in twinned.copies)


# -- what is refused, and why ----------------------------------------------------------------------------------------
@pytest.fixture
def saved() -> tuple[dict[str, Any], tuple[list[Job], list[JobProfile]]]:
    """A Shockwave memory with one admitted job that has run a round."""
    workload = small_workload()
    policy = make_policy("shockwave")
    view = SchedulerView(lambda: 0.0, round_seconds=120.0, cluster=ClusterSpec.of(4))
    job = JobState.admit(0, workload[0][0], workload[1][0], rates={"v100": 3.0})
    view.jobs[0] = job
    policy.job_added(view, job)
    policy.plan(view)
    job.steps_done += 360
    policy.round_executed(view, job, 120.0, 360)
    return json.loads(Snapshot(policy, view.jobs, [RoundRecord(0, 0.0, 1, 1)]).dumps()), workload


def load(memory: Any, workload: tuple[list[Job], list[JobProfile]], policy: str = "shockwave") -> Snapshot:
    text = memory if isinstance(memory, str | bytes) or memory is None else json.dumps(memory)
    return Snapshot.loads(text, make_policy(policy), *workload, path=Path("DIR/journal.sqlite"))


def test_the_saved_memory_loads(saved: tuple[dict[str, Any], Any]) -> None:
    memory, workload = saved
    assert memory["format"] == FORMAT and memory["policy"] == "shockwave"
    restored = load(memory, workload)
    assert restored.jobs[0].steps_done == 360 and restored.jobs[0].spec == workload[0][0]


@pytest.mark.parametrize(
    ("change", "policy", "message"),
    [
        (lambda m: {**m, "format": FORMAT + 1}, "shockwave", f"has format {FORMAT + 1} and this shockwave reads"),
        (lambda m: {k: v for k, v in m.items() if k != "format"}, "shockwave", "has format None"),
        (lambda m: m, "max_min_fairness", "is the 'shockwave' policy's, not the run's 'max_min_fairness'"),
        (lambda m: {**m, "kept": "0" * 16}, "shockwave", "keeps the shockwave policy's state in another shape than"),
        (lambda m: {k: v for k, v in m.items() if k != "kept"}, "shockwave", r"\(digest None, not '"),
        (lambda m: {**m, "policy": "fifo"}, "shockwave", "is the 'fifo' policy's, not the run's 'shockwave'"),
        (
            lambda m: {**m, "state": {}},
            "shockwave",
            f"not a shockwave snapshot of format {FORMAT} .ValueError: ShockwavePolicy keeps "
            ".'allocations', 'forecasts', .*, not ..",
        ),
        (
            lambda m: {**m, "state": [1]},
            "shockwave",
            f"not a shockwave snapshot of format {FORMAT} .ValueError: .* not list",
        ),
        (lambda m: {**m, "jobs": {"99": {}}}, "shockwave", r"IndexError: job 99 is not in the trace"),
        (lambda m: {**m, "jobs": {"-1": {}}}, "shockwave", r"IndexError: job -1 is not in the trace"),
        (lambda m: {**m, "jobs": {"0": {"steps_done": 1}}}, "shockwave", r"JobState keeps .*, not \['steps_done'\]"),
        (lambda m: {**m, "rounds": [[0, 0.0, "x", 1]]}, "shockwave", "ValueError: invalid literal"),
        (lambda m: "{", "shockwave", "is not JSON"),
        (lambda m: "[1, 2]", "shockwave", "is not a JSON object but list"),
        (lambda m: None, "shockwave", "is missing"),
        (lambda m: b"\x80\x04K\x01.", "shockwave", "is binary, not JSON"),
    ],
)
def test_a_snapshot_of_another_version_policy_or_shape_is_refused_naming_the_journal(
    saved: tuple[dict[str, Any], Any], change: Callable[[Any], Any], policy: str, message: str
) -> None:
    memory, workload = saved
    with pytest.raises(InputError, match=message) as refused:
        load(change(memory), workload, policy)
    assert str(refused.value).startswith("DIR/journal.sqlite: cannot resume: the journal's scheduler snapshot ")


def test_non_finite_floats_are_strict_json_and_come_back(saved: tuple[dict[str, Any], Any]) -> None:
    _, workload = saved
    policy = make_policy("max_min_fairness")
    policy.load_state_dict(
        {**policy.state_dict(), "deficits": {"v100": {"0": -math.inf}}, "job_time": {"v100": {"0": math.inf}}}
    )
    job = replace(JobState.admit(0, workload[0][0], workload[1][0], rates={"v100": math.inf}), run_time_s=math.nan)
    text = Snapshot(policy, {0: job}, []).dumps()

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    json.loads(text, parse_constant=no_constants)
    restored = load(text, workload, "max_min_fairness")
    assert restored.policy.state_dict()["deficits"] == {"v100": {"0": -math.inf}}
    assert restored.policy.state_dict()["job_time"] == {"v100": {"0": math.inf}}
    assert restored.jobs[0].rates == {"v100": math.inf} and math.isnan(restored.jobs[0].run_time_s)
