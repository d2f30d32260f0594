"""The runtime scheduler on an in-process fake cluster, and the job-side lease client: fast, no Ray, no torch."""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import shockwave
from runtime_trace import (
    PAIR_JOBS,
    TYPED_JOBS,
    DyingScheduler,
    write_pair_throughputs,
    write_runtime_trace,
    write_typed_throughputs,
)
from shockwave.core.clock import Clock, VirtualClock
from shockwave.core.errors import InputError
from shockwave.policies.registry import make_policy
from shockwave.policies.shockwave.policy import ShockwavePolicy
from shockwave.runtime.backend import GangStatus, Launch
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.runtime.journal import JobRecord, Journal
from shockwave.runtime.run import RunRequest, replay_arguments, run
from shockwave.runtime.snapshot import Snapshot
from shockwave.training import lease as client
from shockwave.workload_model.profile import load_workload
from shockwave.workload_model.throughput import load_throughputs
from shockwave.workload_model.trace import read_trace

RATE = 400.0  # fake steps per second: time-scaled by 4, the trace needs 5 GPU-seconds, arriving over 1.25 s


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return write_runtime_trace(tmp_path / "rt8.trace")


def request(trace: Path, out: Path, policy: str = "max_min_fairness", **changes: object) -> RunRequest:
    return replace(RunRequest(trace=trace, policy=policy, gpus=4, out=out, round_seconds=0.1, time_scale=4), **changes)


# -- the runtime scheduler ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["max_min_fairness", "shockwave", "finish_time_fairness"])
def test_every_job_completes_once_with_its_full_step_count(trace: Path, tmp_path: Path, policy: str) -> None:
    fakes: list[FakeBackend] = []

    def backend(req: RunRequest) -> FakeBackend:
        fakes.append(FakeBackend(req.gpus, steps_per_s=RATE))
        return fakes[-1]

    result = run(request(trace, tmp_path, policy), backend)
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 8
    assert result["makespan_s"] >= result["makespan_lower_bound_s"] > 0  # a bound from what the run really did
    journal = Journal(tmp_path / "journal.sqlite").jobs()
    assert all(r.status == "done" and r.steps == r.total_steps for r in journal.values())
    launches = fakes[0].launches
    for job_id, record in journal.items():
        mine = [launch for launch in launches if launch.job_id == job_id]
        assert len(mine) == len(record.starts) == 1 + record.preemptions + record.restarts
        resumed = [int(launch.checkpoint) for launch in mine[1:] if launch.checkpoint]
        assert all(step > 0 for step in resumed)  # every later lease starts from a checkpoint
    assert sum(r.preemptions for r in journal.values()) > 0  # 13 GPUs of gangs on 4 GPUs: time sharing
    assert all(j["measured_throughput"] == pytest.approx(RATE, rel=0.3) for j in result["jobs"])
    assert json.loads((tmp_path / "results.json").read_text())[0]["mechanics"] == "runtime"
    hours = sum(result["gpu_hours_by_type"].values())  # priced as the simulator prices its GPU-hours
    assert hours > 0 and result["total_cost"] == pytest.approx(hours * 0.74)  # V100s at Gavel's GCP price
    assert (tmp_path / "trace.scaled.trace").exists() and (tmp_path / "measured_throughputs.json").exists()


def test_a_fake_run_does_not_depend_on_how_busy_the_machine_is(trace: Path, tmp_path: Path) -> None:
    """On the virtual clock time moves only while the scheduler waits, never while it computes: two runs, however
    slow the machine, make the same decisions at the same (virtual) times."""
    first, second = (
        run(request(trace, tmp_path / name), lambda req: FakeBackend(req.gpus, steps_per_s=RATE))
        for name in ("first", "second")
    )
    assert first["timeline"] == second["timeline"] and first["jobs"] == second["jobs"]
    assert first["wall_seconds"] == second["wall_seconds"]


def test_slow_checkpoints_of_preempted_jobs_never_let_kept_leases_lapse(trace: Path, tmp_path: Path) -> None:
    """Preempted jobs take longer to checkpoint and exit than a lease outlives its round: the jobs kept running must
    still never stop on their own (every launch after the first is a preemption or a crash, not a lapsed lease), and
    a job preempted before its first step is not waited for."""
    slow = FakeBackend(4, steps_per_s=RATE, startup_s=0.05, exit_s=1.5)
    result = run(request(trace, tmp_path, round_seconds=0.2), lambda req: slow)
    assert result["unfinished_jobs"] == []
    journal = Journal(tmp_path / "journal.sqlite").jobs()
    assert sum(r.preemptions for r in journal.values()) > 0
    for job_id, record in journal.items():
        assert len([launch for launch in slow.launches if launch.job_id == job_id]) == 1 + record.preemptions
    # Each preemption of a job that had started took its exit time to checkpoint; each lease spent its start-up in
    # the job's own process (the fake starts its process at once).
    assert any(record.checkpoints_s for record in journal.values())
    for record in journal.values():
        assert len(record.checkpoints_s) <= record.preemptions
        assert all(1.5 <= seconds <= 1.5 + 0.1 for seconds in record.checkpoints_s), record.checkpoints_s
        assert record.restores and all(seconds == pytest.approx(0.05) for seconds in record.restores)
    assert all(len(job["checkpoint_s"]) == len(journal[job["id"]].checkpoints_s) for job in result["jobs"])


@pytest.mark.parametrize(("exit_s", "second_starts"), [(0.6, 4.5), (3.0, 9.0)])
def test_a_job_exiting_at_a_rounds_end_is_not_planned_another_round(
    tmp_path: Path, exit_s: float, second_starts: float
) -> None:
    """Job 0 takes its last step 0.2 s before its 4 s round ends. The round's end waits for it to write its final
    checkpoint and exit, at most half a lease's hold (1 s of 2 s), looking every 0.25 s: exiting in 0.6 s, job 1
    gets the GPU at the next look, not a round later with the GPU idle meanwhile; exiting in 3 s, it is planned
    again once the wait is over (bounded, so the leases of jobs kept on never lapse) and job 1 starts a round
    later."""
    trace = write_runtime_trace(
        tmp_path / "two.trace", [("ResNet-18", 32, 1, 1520, 0.0), ("ResNet-18", 32, 1, 400, 0.0)]
    )
    slow_exit = FakeBackend(1, steps_per_s=RATE, final_exit_s=exit_s)
    result = run(request(trace, tmp_path / "out", "fifo", gpus=1, round_seconds=4.0, time_scale=1), lambda _: slow_exit)
    first, second = result["jobs"]
    assert first["finish_s"] == pytest.approx(3.8)
    assert second["starts"] == [pytest.approx(second_starts, abs=0.3)]
    assert result["makespan_s"] == pytest.approx(second_starts + 1.0, abs=0.3)


class CrashingBackend(FakeBackend):
    """Job `victim` crashes the first `times` times it gets past `at` steps."""

    def __init__(self, gpus: int, victim: int, at: int, times: int) -> None:
        super().__init__(gpus, steps_per_s=RATE)
        self.victim, self.at, self.left = victim, at, times

    def status(self, job_id: int) -> GangStatus:
        status = super().status(job_id)
        if job_id == self.victim and self.left and (status.step or 0) >= self.at and not status.exited:
            self.left -= 1
            self.fail(job_id)
            return super().status(job_id)
        return status


class SwitchingBackend(FakeBackend):
    """Job `victim` stops at step `at` (a checkpoint) asking for batch size `to`, once."""

    def __init__(self, gpus: int, victim: int, at: int, to: int, startup_s: float = 0.0) -> None:
        super().__init__(gpus, steps_per_s=RATE, startup_s=startup_s)
        self.victim, self.at, self.to, self.asked = victim, at, to, False
        self.leases: list[tuple[str, float]] = []
        """Deadlines the victim was granted, in order: ("start", d) at a launch, ("extend", d) at an extension."""

    def start(self, launch: Launch) -> bool:
        if launch.job_id == self.victim:
            self.leases.append(("start", launch.deadline))
        return super().start(launch)

    def extend(self, job_id: int, deadline: float) -> None:
        if job_id == self.victim:
            self.leases.append(("extend", deadline))
        super().extend(job_id, deadline)

    def status(self, job_id: int) -> GangStatus:
        status = super().status(job_id)
        if job_id == self.victim and not self.asked and (status.step or 0) >= self.at and not status.exited:
            self.asked = True
            self.gangs[job_id].failed_at = self.at  # frozen there, like a job that checkpointed and exited
        if job_id == self.victim and self.asked and self.gangs[job_id].launch.batch_size != self.to:
            return replace(status, step=self.at, exited=True, done=False, requested_batch_size=self.to)
        return status


def test_a_batch_size_request_is_granted_at_once_keeping_the_epochs_done(trace: Path, tmp_path: Path) -> None:
    from shockwave.core.state import JobState, rescale_to_batch_size
    from shockwave.workload_model.catalog import family
    from shockwave.workload_model.profile import build_profile
    from shockwave.workload_model.throughput import load_throughputs
    from shockwave.workload_model.trace import read_trace

    switching = SwitchingBackend(4, victim=5, at=100, to=40)  # job 5: LM at batch size 10, 250 steps once scaled
    result = run(request(trace, tmp_path), lambda req: switching)
    first, second = [launch for launch in switching.launches if launch.job_id == 5][:2]
    spec = read_trace(tmp_path / "trace.scaled.trace")[5].job()
    expected = JobState.admit(5, spec, build_profile(spec, load_throughputs(None)), 1.0)
    expected.steps_done = 100
    rescale_to_batch_size(expected, 40, round_up_progress=False)
    assert (first.batch_size, second.batch_size) == (10, 40)
    relaunch = [i for i, (kind, _) in enumerate(switching.leases) if kind == "start"][1]
    assert switching.leases[relaunch - 1] == ("extend", second.deadline)  # the rest of the lease it held
    assert second.resume_step == expected.steps_done and second.total_steps == expected.total_steps
    assert second.epoch_steps == family("LM").iterations_per_epoch(40) and second.checkpoint == b"100"
    job = result["jobs"][5]
    assert job["batch_size_switches"] == [[0, 40]] and job["batch_size_changes"] == 1
    assert json.loads((tmp_path / "batch_sizes.json").read_text())["5"] == [40]
    record = Journal(tmp_path / "journal.sqlite").jobs()[5]
    assert record.status == "done" and record.steps == record.total_steps == expected.total_steps
    assert set(record.rates) == {"v100"} and set(record.rates["v100"]) <= {"10", "40"} and "10" in record.rates["v100"]
    # Steps trained at each batch size are counted once (a fidelity run's GNS job looked double-counted: it was not,
    # an LM epoch at a global batch of 20 is 2,984 steps).
    trained = record.trained["v100"]
    assert trained["10"][0] == 100 and trained["40"][0] == expected.total_steps - expected.steps_done


def test_a_switch_within_a_round_is_timed_and_its_replay_loses_as_much(trace: Path, tmp_path: Path) -> None:
    """From the last report at the old batch size to the first step at the new: here the relaunch's 0.3 s start-up
    (the fake job exits at once). The replay is told the mean by gang size."""
    switching = SwitchingBackend(4, victim=5, at=100, to=40, startup_s=0.3)
    result = run(request(trace, tmp_path, "fifo", round_seconds=2.0), lambda req: switching)
    assert result["jobs"][5]["switch_s"] == [pytest.approx(0.3)]
    assert all(job["switch_s"] == [] for job in result["jobs"] if job["id"] != 5)
    args = replay_arguments(tmp_path, result)
    gang = read_trace(tmp_path / "trace.scaled.trace")[5].scale_factor
    assert args[args.index("--switch-seconds-by-gang") + 1] == f"{gang}:0.30"


def test_a_checkpoint_at_a_step_number_seen_before_a_switch_gets_a_file_of_its_own(tmp_path: Path) -> None:
    """Steps count at the current batch size: after a switch from 10 to 20 a job checkpoints at step 100 again. The
    new file must not be the old one, which the scheduler deletes as superseded once the journal is saved."""
    from types import SimpleNamespace

    from shockwave.runtime.scheduler import RuntimeScheduler

    record = JobRecord(id=0, total_steps=250, batch_size=10)
    backend = SimpleNamespace(checkpoint=lambda job_id, newer_than: (100, b"step 100 at 10"))
    scheduler = SimpleNamespace(
        records={0: record}, backend=backend, settings=SimpleNamespace(checkpoints=tmp_path), superseded=[]
    )
    RuntimeScheduler._collect_checkpoint(scheduler, 0)  # type: ignore[arg-type]
    record.steps, record.batch_size = 50, 20  # the switch: 100 steps of 10 are 50 of 20
    record.switches.append([1, 20])
    backend.checkpoint = lambda job_id, newer_than: (100, b"step 100 at 20")
    RuntimeScheduler._collect_checkpoint(scheduler, 0)  # type: ignore[arg-type]
    for superseded in scheduler.superseded:  # what saving the journal does next
        superseded.unlink()
    assert record.checkpoint is not None and (tmp_path / record.checkpoint).read_bytes() == b"step 100 at 20"


def test_a_crashed_job_restarts_from_its_checkpoint(trace: Path, tmp_path: Path) -> None:
    crashing = CrashingBackend(4, victim=0, at=50, times=1)
    result = run(request(trace, tmp_path), lambda req: crashing)
    job = result["jobs"][0]
    assert job["restarts"] == 1 and result["unfinished_jobs"] == []
    relaunch = [launch for launch in crashing.launches if launch.job_id == 0][1]
    assert relaunch.checkpoint is not None and int(relaunch.checkpoint) >= 50


def test_a_job_that_keeps_crashing_is_given_up_with_its_reason(trace: Path, tmp_path: Path) -> None:
    crashing = CrashingBackend(4, victim=2, at=10, times=100)
    result = run(request(trace, tmp_path, max_restarts=2), lambda req: crashing)
    assert result["unfinished_jobs"] == [2]
    assert "exited with code -9" in result["failed_jobs"]["2"]
    assert len([launch for launch in crashing.launches if launch.job_id == 2]) == 3
    assert len(result["jobs"]) == 7  # the others finished


def test_resume_from_the_journal_redoes_no_finished_job(trace: Path, tmp_path: Path) -> None:
    clock = VirtualClock()  # one world: the resumed run goes on where the killed one's time stopped
    with pytest.raises(KeyboardInterrupt):
        run(request(trace, tmp_path), lambda req: DyingScheduler(4, 3, clock))
    before = Journal(tmp_path / "journal.sqlite").jobs()
    finished = {i for i, r in before.items() if r.status == "done"}
    assert 3 <= len(finished) < 8
    resumed = FakeBackend(4, steps_per_s=RATE, clock=clock)
    with pytest.raises(InputError, match=r"row 'policy': the run was started with --policy max_min_fairness, and "):
        run(request(trace, tmp_path, resume=True, policy="shockwave"), lambda req: resumed)
    result = run(request(trace, tmp_path, resume=True, gpus=99), lambda req: resumed)
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 8
    assert result["policy"] == "max_min_fairness" and result["gpus"] == 4  # the journal's cluster, not the flags
    assert not {launch.job_id for launch in resumed.launches} & finished
    first_launches = {}
    for launch in resumed.launches:
        first_launches.setdefault(launch.job_id, launch)
    for job_id, launch in first_launches.items():  # each job resumes from the checkpoint the journal names
        assert int(launch.checkpoint or b"0") == before[job_id].steps
    after = Journal(tmp_path / "journal.sqlite").jobs()
    assert all(after[i].finish_s == before[i].finish_s for i in finished)


def test_a_resumed_run_keeps_what_the_policy_learnt(trace: Path, tmp_path: Path) -> None:
    """Shockwave's forecasts and finish-time targets, and the rounds so far, survive two scheduler deaths."""
    journal = tmp_path / "journal.sqlite"

    def memory() -> Snapshot:
        _, jobs, profiles = load_workload(tmp_path / "trace.scaled.trace", None)
        return Snapshot.loads(Journal(journal).snapshot(), make_policy("shockwave"), jobs, profiles, journal)

    clock = VirtualClock()
    with pytest.raises(KeyboardInterrupt):
        run(request(trace, tmp_path, policy="shockwave"), lambda req: DyingScheduler(4, 2, clock))
    first = memory()
    with pytest.raises(KeyboardInterrupt):
        run(request(trace, tmp_path, "shockwave", resume=True), lambda req: DyingScheduler(4, 2, clock))
    second = memory()
    assert isinstance(first.policy, ShockwavePolicy) and isinstance(second.policy, ShockwavePolicy)
    carried = first.policy.forecasts.keys() & second.policy.forecasts.keys()
    assert carried  # jobs admitted before the first death, still running after the second
    for job_id in carried:  # not re-admitted as newly arrived at the resume
        assert second.policy.forecasts[job_id].submit_s == first.policy.forecasts[job_id].submit_s
        assert (
            second.policy.targets.series[job_id][: len(first.policy.targets.series[job_id])]
            == (first.policy.targets.series[job_id])
        )
    assert second.policy.stats.solves > first.policy.stats.solves
    assert second.rounds[: len(first.rounds)] == first.rounds
    result = run(
        request(trace, tmp_path, "shockwave", resume=True), lambda req: FakeBackend(4, steps_per_s=RATE, clock=clock)
    )
    assert result["unfinished_jobs"] == [] and len(result["timeline"]) == result["num_rounds"]


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_journal_counting_fewer_rounds_than_it_records_goes_on_from_the_last(trace: Path, tmp_path: Path) -> None:
    """Round 0 again would date the finish-time targets the policy remembers in the future (a negative fair
    duration, NaN priorities)."""
    with pytest.raises(KeyboardInterrupt):
        run(request(trace, tmp_path, policy="shockwave"), lambda req: DyingScheduler(4, 3, VirtualClock()))
    with Journal(tmp_path / "journal.sqlite").db as db:
        db.execute("UPDATE settings SET value = ? WHERE key = 'rounds'", ("0",))
    result = run(request(trace, tmp_path, "shockwave", resume=True), lambda req: FakeBackend(4, steps_per_s=RATE))
    assert result["unfinished_jobs"] == [] and len(result["timeline"]) == result["num_rounds"]


def test_an_unreadable_memory_is_refused_naming_the_journal(trace: Path, tmp_path: Path) -> None:
    """Not a fresh policy: that would silently forget whom the run owes (see tests/runtime/test_snapshot.py)."""
    with pytest.raises(KeyboardInterrupt):
        run(request(trace, tmp_path), lambda req: DyingScheduler(4, 3, VirtualClock()))
    with Journal(tmp_path / "journal.sqlite").db as db:
        db.execute("UPDATE memory SET data = ?", (b"not a pickle",))
    with pytest.raises(InputError, match=r"journal\.sqlite: cannot resume: .* snapshot is binary, not JSON"):
        run(request(trace, tmp_path, resume=True), lambda req: FakeBackend(4, steps_per_s=RATE))


def test_a_replay_takes_the_rounds_as_long_as_they_really_were(trace: Path, tmp_path: Path) -> None:
    """Preempted jobs take 50 ms to leave, and a round's clock starts once they have: the replay's rounds say so."""
    backend = FakeBackend(4, steps_per_s=RATE, exit_s=0.05)
    result = run(request(trace, tmp_path, realloc_seconds=0.2), lambda req: backend)
    decisions = [row[0] for row in result["timeline"]]
    period = (decisions[-1] - decisions[0]) / (len(decisions) - 1)
    assert period > 0.1
    args = replay_arguments(tmp_path, result)
    assert float(args[args.index("--round-seconds") + 1]) == pytest.approx(period, abs=1e-3)
    assert float(args[args.index("--realloc-seconds") + 1]) == pytest.approx(2 * period, abs=2e-3)
    every_round = replay_arguments(tmp_path, {**result, "realloc_seconds": result["round_seconds"]})
    assert every_round[every_round.index("--realloc-seconds") + 1] == "0.000"  # at each decision, as the run did
    replayed = shockwave("simulate", *args, "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert len(json.loads(replayed.stdout)["jobs"]) == 8


def test_a_replay_leaves_out_the_time_the_cluster_waited_for_jobs(tmp_path: Path) -> None:
    """No round runs while no job is active: the wait is journaled (idle_s) and is no part of the replay's round."""
    rows = [("ResNet-18", 32, 1, 100, 0.0), ("ResNet-18", 32, 1, 100, 40.0)]  # the second 10 s later, time-scaled
    trace = write_runtime_trace(tmp_path / "gap.trace", rows)
    result = run(request(trace, tmp_path / "run"), lambda req: FakeBackend(4, steps_per_s=RATE, clock=VirtualClock()))
    assert result["unfinished_jobs"] == [] and 9.0 < result["idle_s"] < 10.5
    decisions = [row[0] for row in result["timeline"]]
    assert decisions[-1] - decisions[0] > 9.0  # the wait lies between two decisions
    args = replay_arguments(tmp_path / "run", result)
    assert 0.1 <= float(args[args.index("--round-seconds") + 1]) < 0.2


def test_round_lengths_are_kept_only_where_they_are_the_rounds_a_replay_has() -> None:
    """Decision to decision, as the replay's rounds; none (the replay takes the mean round) where the cluster waited
    idle for jobs, where the run was resumed (its downtime lies between two decisions), or where a stop cut a round
    shorter than any round a run takes."""
    from shockwave.runtime.run import _round_lengths

    assert _round_lengths([0.0, 12.3, 24.5, 36.5], 0.0, resumed=False) == pytest.approx((12.3, 12.2, 12.0))
    assert _round_lengths([0.0, 12.3, 40.0], 15.0, resumed=False) == ()
    assert _round_lengths([0.0, 12.3, 600.0], 0.0, resumed=True) == ()
    assert _round_lengths([0.0, 12.3, 12.301], 0.0, resumed=False) == ()


class ResumesSlower(FakeBackend):
    """A job trains at RATE on its first lease and at half of it on every lease resumed from a checkpoint."""

    def rate(self, gang: Any) -> float:
        return super().rate(gang) / (2 if gang.launch.checkpoint else 1)


def test_a_replay_trains_each_job_as_long_as_the_run_did(trace: Path, tmp_path: Path) -> None:
    """The table a replay reads has every (model, batch size, gang) at all the steps its jobs trained over all the
    seconds they took, not at the smoothed rate that leans to the last lease."""
    result = run(request(trace, tmp_path), lambda req: ResumesSlower(req.gpus, steps_per_s=RATE))
    journal = Journal(tmp_path / "journal.sqlite").jobs()
    specs = read_trace(tmp_path / "trace.scaled.trace")
    totals: dict[tuple[str, int, int], list[float]] = {}
    for job_id, record in journal.items():
        [[steps, seconds]] = [pair for by_size in record.trained.values() for pair in by_size.values()]
        assert steps == record.total_steps  # every step once: no pairs, no crashes
        assert seconds == pytest.approx(record.train_seconds)
        key = (specs[job_id].model, record.batch_size, specs[job_id].scale_factor)
        totals[key] = [a + b for a, b in zip(totals.get(key, [0, 0.0]), (steps, seconds), strict=True)]
    table = load_throughputs(tmp_path / "measured_throughputs.json")
    assert {key: table.throughput(*key, "v100") for key in totals} == pytest.approx(
        {key: steps / seconds for key, (steps, seconds) in totals.items()}
    )
    averaged = {j: record.total_steps / record.train_seconds for j, record in journal.items()}
    smoothed_off = [  # jobs that trained at both rates: their smoothed rate is not what they averaged
        j for j, rate in averaged.items() if result["jobs"][j]["measured_throughput"] != pytest.approx(rate, rel=0.05)
    ]
    assert smoothed_off
    # Each job's own rate, start-ups and T_iso too, for a replay whose jobs of one kind ran at different speeds.
    measurements = json.loads((tmp_path / "measurements.json").read_text())
    decisions = [row[0] for row in result["timeline"]]
    assert measurements["rounds"] == pytest.approx([b - a for a, b in itertools.pairwise(decisions)])
    assert measurements["jobs"] == {
        str(j): {
            "rates": {"v100": {str(journal[j].batch_size): pytest.approx(rate)}},
            "startups": journal[j].startups,
            "switches": journal[j].switch_seconds,
            "t_isolated_s": result["jobs"][j]["t_isolated_s"],
        }
        for j, rate in averaged.items()
    }
    args = replay_arguments(tmp_path, result)
    assert args[args.index("--measurements") + 1] == str(tmp_path / "measurements.json")
    assert "--throughputs" not in args  # the run planned with the built-in model: so does its replay
    replayed = json.loads(shockwave("simulate", *args, "--json").stdout)
    assert [job["t_isolated_s"] for job in replayed["jobs"]] == [job["t_isolated_s"] for job in result["jobs"]]


def test_journal_misuse_is_an_input_error(trace: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no journal to resume"):
        run(request(trace, tmp_path, resume=True), lambda req: FakeBackend(4))
    run(request(trace, tmp_path), lambda req: FakeBackend(4, steps_per_s=RATE))
    with pytest.raises(InputError, match="already exists"):
        run(request(trace, tmp_path), lambda req: FakeBackend(4))
    with pytest.raises(InputError, match="needs 4 GPUs"):
        run(request(trace, tmp_path / "small", gpus=2), lambda req: FakeBackend(2))


# -- GPU types ---------------------------------------------------------------------------------------------------------
TYPED = {"v100": 2, "k80": 2}
TYPED_RATES = {"v100": RATE, "k80": RATE / 2}


@pytest.fixture
def typed(tmp_path: Path) -> dict[str, Path]:
    """A trace of gangs of 1 and 2 and a table where K80s are slower than V100s, by a factor that depends on the
    model."""
    return {
        "trace": write_runtime_trace(tmp_path / "typed.trace", TYPED_JOBS),
        "throughputs": write_typed_throughputs(tmp_path / "typed.json", TYPED_JOBS),
    }


def typed_request(
    typed: dict[str, Path], out: Path, policy: str = "max_min_fairness_perf", **changes: object
) -> RunRequest:
    """The typed trace and table on V100s and K80s, two of each (unless `changes` say otherwise)."""
    return request(
        typed["trace"], out, policy, **{"cluster": "v100:2,k80:2", "throughputs": typed["throughputs"]} | changes
    )


def leases_by_job(backend: FakeBackend) -> dict[int, list[str]]:
    types: dict[int, list[str]] = {}
    for launch in backend.launches:
        types.setdefault(launch.job_id, []).append(launch.gpu_type)
    return types


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "shockwave"])
def test_a_run_on_two_gpu_types_puts_every_lease_on_the_type_its_plan_names(
    typed: dict[str, Path], tmp_path: Path, policy: str
) -> None:
    fake = FakeBackend(TYPED, steps_per_s=TYPED_RATES)
    result = run(typed_request(typed, tmp_path, policy), lambda req: fake)
    assert result["unfinished_jobs"] == [] and result["cluster"] == "v100:2,k80:2" and result["gpus"] == 4
    assert fake.refused == []  # the plans fit each type's pool, and kept or moved jobs never overfilled one
    planned = leases_by_job(fake)
    assert {t for types in planned.values() for t in types} == {"v100", "k80"}
    journal = Journal(tmp_path / "journal.sqlite").jobs()
    for job_id, record in journal.items():
        assert record.gpu_types == planned[job_id]  # as the backend granted them, lease by lease
        assert result["jobs"][job_id]["gpu_types"] == record.gpu_types
        assert set(record.rates) == set(record.gpu_types)  # measured on each type it ran on, and only there
        for gpu_type, by_size in record.rates.items():
            assert by_size[str(TYPED_JOBS[job_id][1])] == pytest.approx(TYPED_RATES[gpu_type], rel=0.3)
    assert set(result["utilization_by_type"]) == {"v100", "k80"}
    assert all(0 < u <= 1 for u in result["utilization_by_type"].values())
    table = json.loads((tmp_path / "measured_throughputs.json").read_text())
    assert set(table) == {"v100", "k80"}
    args = replay_arguments(tmp_path, result)
    assert args[args.index("--cluster") + 1] == "v100:2,k80:2"
    # The replay's policy plans with the table the run's did; its jobs train at their measured rates.
    planned = tmp_path / "planned_throughputs.json"
    assert planned.read_bytes() == typed["throughputs"].read_bytes()
    assert args[args.index("--throughputs") + 1] == str(planned)
    own = json.loads((tmp_path / "measurements.json").read_text())["jobs"]
    for job_id, job in own.items():  # its own rates where it ran alone, its kind's measured rate elsewhere
        assert set(job["rates"]) == {"v100", "k80"}
        bs = str(TYPED_JOBS[int(job_id)][1])
        for gpu_type in set(journal[int(job_id)].gpu_types):
            assert job["rates"][gpu_type][bs] == pytest.approx(TYPED_RATES[gpu_type], rel=0.3)
    replayed = shockwave("simulate", *args, "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["unfinished_jobs"] == []


MOVING = """
from shockwave.core.plan import Assignment, RoundPlan
from shockwave.core.policy import Policy


class Moving(Policy):
    \"\"\"Every job on the other type each round (as room allows): every kept job moves.\"\"\"

    plans_gpu_types = True

    def plan(self, view):
        free = {pool.gpu_type: pool.gpus for pool in view.cluster.pools}
        planned = []
        for job in view.jobs.values():
            gpu_type = view.cluster.types[(view.round_index + job.id) % 2]
            if free[gpu_type] >= job.scale_factor:
                free[gpu_type] -= job.scale_factor
                planned.append(Assignment((job.id,), gpu_type, job.scale_factor))
        return RoundPlan(tuple(planned))

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass
"""


def test_a_running_job_planned_on_another_type_moves_there(typed: dict[str, Path], tmp_path: Path) -> None:
    """A lease is extended only on the type it holds: a job the plan puts on the other type checkpoints, leaves its
    GPUs and starts again on the new type's (else it would hold GPUs the plan gave another job)."""
    policy = tmp_path / "moving.py"
    policy.write_text(MOVING)
    fake = FakeBackend(TYPED, steps_per_s=TYPED_RATES)
    result = run(typed_request(typed, tmp_path / "out", policy=f"{policy}:Moving"), lambda req: fake)
    assert result["unfinished_jobs"] == [] and fake.refused == []
    moved = [types for types in leases_by_job(fake).values() if len(set(types)) == 2]
    assert moved and sum(job["preemptions"] for job in result["jobs"]) > 0


def test_rates_measured_on_one_type_carry_the_table_s_ratio_to_the_others(
    typed: dict[str, Path], tmp_path: Path
) -> None:
    """Real rates are not the table's: a job measured on V100s only is seen on K80s at its measured rate times the
    table's K80/V100 ratio, not at the table's K80 rate; a measured type keeps its measured rate. The policy's view
    survives a scheduler's death, and the resumed run keeps the types."""
    from runtime_trace import K80_SPEED

    journal_path = tmp_path / "journal.sqlite"
    clock = VirtualClock()
    with pytest.raises(KeyboardInterrupt):
        run(typed_request(typed, tmp_path), lambda req: DyingScheduler(TYPED, 1, clock))
    _, jobs, profiles = load_workload(tmp_path / "trace.scaled.trace", typed["throughputs"])
    policy = make_policy("max_min_fairness_perf")
    snapshot = Snapshot.loads(Journal(journal_path).snapshot(), policy, jobs, profiles, journal_path)
    records = Journal(journal_path).jobs()
    checked = 0
    for job_id, state in snapshot.jobs.items():
        measured = {t: r[str(state.batch_size)] for t, r in records[job_id].rates.items()}
        for gpu_type, rate in measured.items():
            assert state.rates[gpu_type] == pytest.approx(rate)
        if set(measured) == {"v100"}:
            speed = K80_SPEED[TYPED_JOBS[job_id][0]]
            assert state.rates["k80"] == pytest.approx(measured["v100"] * speed)
            checked += 1
    assert checked
    resumed = FakeBackend(TYPED, steps_per_s=TYPED_RATES, clock=clock)
    result = run(request(typed["trace"], tmp_path, "max_min_fairness_perf", resume=True), lambda req: resumed)
    assert result["unfinished_jobs"] == [] and result["cluster"] == "v100:2,k80:2" and resumed.refused == []
    assert {launch.gpu_type for launch in resumed.launches} <= {"v100", "k80"}
    after = Journal(journal_path).jobs()
    for job_id, types in leases_by_job(resumed).items():  # the resumed run's leases follow the killed run's
        assert after[job_id].gpu_types == records[job_id].gpu_types + types


def test_a_policy_of_one_type_is_refused_a_cluster_of_several_before_anything_starts(
    typed: dict[str, Path], tmp_path: Path
) -> None:
    policy = tmp_path / "one_type.py"
    policy.write_text(MOVING.replace("plans_gpu_types = True", "name = 'one_type'"))

    def backend(req: RunRequest) -> FakeBackend:
        raise AssertionError("no backend is started for a run that cannot go")

    with pytest.raises(InputError, match=r"policy 'one_type' schedules one GPU type; the cluster v100:2,k80:2 has 2"):
        run(typed_request(typed, tmp_path / "out", policy=f"{policy}:Moving"), backend)


def test_a_gpu_type_no_job_can_run_on_is_one_clear_error(typed: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"has no rates for GPU type 'tpu9' of the cluster"):
        run(typed_request(typed, tmp_path, cluster="v100:2,tpu9:2"), lambda req: FakeBackend(4))
    table = json.loads(typed["throughputs"].read_text())
    del table["k80"][str(("LM (batch size 20)", 2))]  # job 1's gang of 2 is known on V100s only, and fits none
    narrow = tmp_path / "narrow.json"
    narrow.write_text(json.dumps(table))
    with pytest.raises(InputError, match=r"job 1 \(LM, batch size 20, gang of 2\) can run on no GPU type"):
        run(
            typed_request(typed, tmp_path / "small", cluster="k80:2,v100:1", throughputs=narrow),
            lambda req: FakeBackend(3),
        )
    cli = shockwave(
        *("run", "--out", tmp_path / "cli", "--trace", typed["trace"], "--policy", "max_min_fairness_perf"),
        *("--cluster", "v100:2,tpu9:2", "--throughputs", typed["throughputs"]),
    )
    assert cli.returncode == 2 and "has no rates for GPU type 'tpu9'" in cli.stderr
    assert "Traceback" not in cli.stderr


def test_a_journal_of_an_earlier_layout_is_refused_in_one_line(trace: Path, tmp_path: Path) -> None:
    """Journals of before named their trace where it was and kept the job command to run: nothing is migrated."""
    journal = Journal(tmp_path / "journal.sqlite")
    with journal.db as db:
        for key, value in (("gpus", 4), ("trace", str(trace)), ("policy", "fifo"), ("command", "python x.py")):
            db.execute("INSERT INTO settings VALUES (?, ?)", (key, json.dumps(value)))
    with pytest.raises(InputError, match=r"row 'layout': this journal was written by an earlier shockwave"):
        run(request(trace, tmp_path, "fifo", resume=True), lambda req: FakeBackend(4))


# -- the job-side client -------------------------------------------------------------------------------------------
def lease_folder(tmp_path: Path, **terms: object) -> Path:
    values = {
        "job_id": 3,
        "deadline": time.time() + 60,
        "max_steps": 10**9,
        "total_steps": 50,
        "batch_size": 32,
        "checkpoint": str(tmp_path / "ckpt"),
    } | terms
    client.Terms(**values).write(tmp_path)  # type: ignore[arg-type]
    return tmp_path


def test_steps_end_at_the_total_and_report_progress(tmp_path: Path) -> None:
    lease = client.Lease(lease_folder(tmp_path))
    assert list(lease.steps(start=45)) == [45, 46, 47, 48, 49]
    assert lease.done
    progress = client.read_progress(tmp_path)
    assert progress["step"] == 50 and progress["done"] and progress["start_step"] == 45


def test_steps_end_at_the_budget_or_deadline_and_see_extensions(tmp_path: Path) -> None:
    lease = client.Lease(lease_folder(tmp_path, max_steps=3))
    assert list(lease.steps()) == [0, 1, 2] and not lease.done
    lease = client.Lease(lease_folder(tmp_path, deadline=time.time() - 1))
    assert list(lease.steps()) == []
    lease = client.Lease(lease_folder(tmp_path, max_steps=2))
    seen = []
    for step in lease.steps():
        seen.append(step)
        if step == 1:  # the runtime extends the lease while the job runs
            before = (tmp_path / client.LEASE_FILE).stat().st_mtime_ns
            lease_folder(tmp_path, max_steps=4)
            os.utime(tmp_path / client.LEASE_FILE, ns=(before + 1, before + 1))  # a new mtime, however coarse
    assert seen == [0, 1, 2, 3]


def test_a_batch_size_request_ends_the_lease(tmp_path: Path) -> None:
    lease = client.Lease(lease_folder(tmp_path))
    for step in lease.steps():
        if step == 2:
            lease.request_batch_size(64)
    assert lease.step == 3 and client.read_progress(tmp_path)["requested_batch_size"] == 64


def test_current_needs_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(client.LEASE_DIR_ENV, raising=False)
    with pytest.raises(client.LeaseError, match="shockwave run"):
        client.current()


def test_launch_and_status_types() -> None:
    launch = Launch(1, 2, ["true"], time.time(), 10, 32, None)
    assert launch.gang == 2
    status = GangStatus(
        step=30,
        reported_at=12.0,
        exited=False,
        failure=None,
        done=False,
        requested_batch_size=None,
        start_step=10,
        first_step_at=10.0,
    )
    assert status.lease_rate() == pytest.approx(10.0)


def test_a_run_whose_policy_never_plans_its_jobs_ends_with_them_unfinished(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shockwave.core.loop.MAX_EMPTY_ROUNDS", 5)
    never = tmp_path / "never.py"
    never.write_text(
        "from shockwave.core.plan import RoundPlan\nfrom shockwave.core.policy import Policy\n\n\n"
        "class NeverPlans(Policy):\n    def plan(self, view):\n        return RoundPlan()\n\n"
        "    def state_dict(self):\n        return {}\n\n    def load_state_dict(self, state):\n        pass\n"
    )
    result = run(request(trace, tmp_path / "out", policy=f"{never}:NeverPlans"), lambda req: FakeBackend(4))
    assert not result["complete"] and result["unfinished_jobs"] and result["jobs"] == []


# -- space sharing -----------------------------------------------------------------------------------------------------
class Sharing(FakeBackend):
    """Notes, for each lease of a pair, whether it joined its partner's GPUs (the partner was running as its pair)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.joined: list[tuple[int, int]] = []

    def start(self, launch: Launch) -> bool:
        started = super().start(launch)
        if started and launch.partner is not None and self.gangs[launch.job_id].joined:
            self.joined.append((launch.job_id, launch.partner))
        return started


@pytest.fixture
def paired(tmp_path: Path) -> dict[str, Path]:
    return {
        "trace": write_runtime_trace(tmp_path / "pairs.trace", PAIR_JOBS),
        "throughputs": write_pair_throughputs(tmp_path / "pairs.json", PAIR_JOBS),
    }


def pair_request(paired: dict[str, Path], out: Path, policy: str = "gandiva", **changes: object) -> RunRequest:
    """The four 1-GPU jobs on 2 GPUs, with the table that lists every two of them sharing GPUs."""
    return request(paired["trace"], out, policy, **{"gpus": 2, "throughputs": paired["throughputs"]} | changes)


@pytest.mark.parametrize("policy", ["gandiva", "max_min_fairness_packed", "finish_time_fairness_packed"])
def test_a_packed_policy_runs_pairs_on_shared_gpus_and_every_job_completes(
    paired: dict[str, Path], tmp_path: Path, policy: str
) -> None:
    fake = Sharing(2, steps_per_s=RATE)
    result = run(pair_request(paired, tmp_path, policy), lambda req: fake)
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 4
    assert fake.refused == []  # pairs took one gang's GPUs, never two
    assert fake.joined  # both jobs of a pair ran at once on the same GPUs
    journal = Journal(tmp_path / "journal.sqlite").jobs()
    assert all(r.status == "done" and r.steps == r.total_steps for r in journal.values())
    for job_id, record in journal.items():
        mine = [launch for launch in fake.launches if launch.job_id == job_id]
        assert record.partners == [launch.partner for launch in mine]
        for by_size in record.rates.values():  # measured alone only: a pair's rate is not the job's alone
            assert all(rate == pytest.approx(RATE, rel=0.3) for rate in by_size.values())
    assert 0 < result["utilization"] <= 1  # a pair's GPU time counted once


def test_a_pair_the_table_does_not_list_is_never_formed(paired: dict[str, Path], tmp_path: Path) -> None:
    fake = Sharing(2, steps_per_s=RATE)
    run(pair_request(paired, tmp_path, throughputs=None), lambda req: fake)  # the built-in model knows no pairs
    assert all(launch.partner is None for launch in fake.launches)


class DyingWithPairs(DyingScheduler):
    """Dies as `DyingScheduler` does, noting the pairs running at that moment."""

    def __init__(self, gpus: int, jobs: int, clock: Clock) -> None:
        super().__init__(gpus, jobs, clock)
        self.pairs_at_death: list[int] = []

    def start(self, launch: Launch) -> bool:
        if self.completed >= self.until:
            self.pairs_at_death = [j for j, gang in self.gangs.items() if gang.launch.partner is not None]
        return super().start(launch)


def test_a_resumed_run_with_pairs_loses_neither_job_of_a_pair(paired: dict[str, Path], tmp_path: Path) -> None:
    clock = VirtualClock()
    dying = DyingWithPairs(2, 1, clock)
    with pytest.raises(KeyboardInterrupt):
        run(pair_request(paired, tmp_path), lambda req: dying)
    assert dying.pairs_at_death  # it died while pairs were sharing GPUs
    before = Journal(tmp_path / "journal.sqlite").jobs()
    finished = {i for i, r in before.items() if r.status == "done"}
    resumed = Sharing(2, steps_per_s=RATE, clock=clock)
    result = run(pair_request(paired, tmp_path, resume=True), lambda req: resumed)
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 4
    assert resumed.joined  # the resumed run forms pairs too
    assert set(dying.pairs_at_death) <= {launch.job_id for launch in resumed.launches}
    assert not {launch.job_id for launch in resumed.launches} & finished
    first_launches: dict[int, Launch] = {}
    for launch in resumed.launches:
        first_launches.setdefault(launch.job_id, launch)
    for job_id, launch in first_launches.items():  # each job resumes from the checkpoint the journal names
        assert int(launch.checkpoint or b"0") == before[job_id].steps
