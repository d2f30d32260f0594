"""`shockwave run` for real: local Ray instances with logical GPUs, PyTorch jobs on CPU, kills and resumes.

Every job's final checkpoint is the audit: it must hold the job's full step count, exactly one completion, and a
start for each lease, each later one from a checkpointed step.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import check_results, require_module, shockwave
from processes import alive, cmdline, descendants, is_loopback, listening, wait_until
from runtime_trace import (
    JOBS,
    PAIR_JOBS,
    PREEMPTING_JOBS,
    PREEMPTING_ROUND,
    TYPED_JOBS,
    Row,
    journal_records,
    write_pair_throughputs,
    write_runtime_trace,
    write_typed_throughputs,
)

pytestmark = pytest.mark.slow
require_module("torch", "the runtime tests train real PyTorch jobs: pip install torch==2.13.0")
require_module("ray", "the runtime needs Ray: pip install 'shockwave[cluster]'")

import ray  # noqa: E402  (after the check above)
import torch  # noqa: E402

from shockwave.runtime.ray_backend import scratch_folder  # noqa: E402

ROUND = "4"


def command(out: Path, *extra: str | Path) -> list[str]:
    return [sys.executable, "-m", "shockwave", "run", "--out", str(out), *map(str, extra)]


def start_run(trace: Path, out: Path, policy: str, round_seconds: str = ROUND) -> subprocess.Popen:
    """The scheduler in its own process; its output goes to a file (a pipe nobody reads would block it)."""
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "scheduler.log").open("a")
    return subprocess.Popen(
        command(out, "--trace", trace, "--policy", policy, "--gpus", 4, "--round-seconds", round_seconds),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def finish(process: subprocess.Popen, out: Path, timeout: float = 1200) -> None:
    """Wait for the run, with a guard against a hang (not a race: the preemption trace took 399 s on a slow 2-core
    machine, against 600 s allowed before)."""
    process.wait(timeout=timeout)
    assert process.returncode == 0, (out / "scheduler.log").read_text()[-3000:]


def audit(out: Path, jobs: list[Row]) -> dict[int, dict[str, Any]]:
    """Each job's final checkpoint: full step count, one completion, every resume from a checkpoint."""
    result = json.loads((out / "results.json").read_text())[0]
    check_results([result])
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == len(jobs)
    checkpoints = {}
    for job in result["jobs"]:
        total = jobs[job["id"]][3]
        [path] = (out / "checkpoints").glob(f"job-{job['id']}-switch*-step{total}.ckpt")
        state = torch.load(path, weights_only=False)
        assert state["step"] == total and state["completions"] == 1, (job["id"], state["step"])
        assert state["batch_size"] == jobs[job["id"]][1]
        assert all(start["step"] > 0 for start in state["starts"][1:])  # later leases resumed, never restarted at 0
        checkpoints[job["id"]] = state
    return checkpoints


KILL_JOBS = [JOBS[i] for i in (0, 1, 2, 4, 5)]
"""Enough for the kill tests (completions before the kill, jobs still running), and half a minute shorter."""


@pytest.fixture(scope="module")
def kill_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_runtime_trace(tmp_path_factory.mktemp("trace") / "kill5.trace", KILL_JOBS)


@pytest.fixture(scope="module")
def preempting_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_runtime_trace(tmp_path_factory.mktemp("trace") / "preempting.trace", PREEMPTING_JOBS)


@pytest.mark.parametrize("policy", ["shockwave", "max_min_fairness"])
def test_the_trace_runs_to_completion_with_preemptions_and_resumes(
    preempting_trace: Path, tmp_path: Path, policy: str
) -> None:
    finish(start_run(preempting_trace, tmp_path, policy, PREEMPTING_ROUND), tmp_path)
    checkpoints = audit(tmp_path, PREEMPTING_JOBS)
    result = json.loads((tmp_path / "results.json").read_text())[0]
    preemptions = {job["id"]: job["preemptions"] for job in result["jobs"]}
    assert sum(preemptions.values()) > 0
    resumed = [i for i, state in checkpoints.items() if len(state["starts"]) > 1]
    starts = {i: [start["step"] for start in state["starts"]] for i, state in checkpoints.items()}
    assert resumed, f"no job was preempted after a checkpoint and resumed: preemptions {preemptions}, starts {starts}"
    assert all(job["measured_throughput"] > 0 for job in result["jobs"])
    report = shockwave("report", tmp_path)
    assert report.returncode == 0, report.stderr


def test_a_scheduler_killed_with_sigkill_resumes_and_loses_no_job(kill_trace: Path, tmp_path: Path) -> None:
    process = start_run(kill_trace, tmp_path, "max_min_fairness")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        records = journal_records(tmp_path)
        if sum(r["status"] == "done" for r in records.values()) >= 2:
            break
        time.sleep(0.5)
    left = descendants(process.pid)  # its Ray instance, the reaper, job processes
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    before = journal_records(tmp_path)
    done_before = {i: r["finish_s"] for i, r in before.items() if r["status"] == "done"}
    assert 2 <= len(done_before) < len(KILL_JOBS)
    survivors = lambda: [pid for pid in left if alive(pid)]  # noqa: E731
    assert wait_until(lambda: not survivors(), timeout=30), [cmdline(pid) for pid in survivors()]
    with (tmp_path / "scheduler.log").open("a") as log:
        resume = command(tmp_path, "--resume", "--policy", "max_min_fairness")
        finish(subprocess.Popen(resume, stdout=log, stderr=subprocess.STDOUT), tmp_path)
    audit(tmp_path, KILL_JOBS)
    after = journal_records(tmp_path)
    assert {i: after[i]["finish_s"] for i in done_before} == done_before  # finished jobs were not run again


def test_a_killed_job_process_resumes_from_its_checkpoint(kill_trace: Path, tmp_path: Path) -> None:
    started = time.time()
    process = start_run(kill_trace, tmp_path, "max_min_fairness")
    nodes = scratch_folder()
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and time.monotonic() < deadline:
        for path in nodes.glob(f"run-*-{process.pid}/job-*/rank-0/progress.json"):  # this run's, not another's
            try:
                progress = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            # A lease that ended leaves its progress behind (not done: the job is not) and its process a zombie
            # until reaped: a SIGKILL there kills nothing (seen under load: the job was never restarted).
            running = (progress.get("checkpoint_step") or 0) > 0 and not progress["done"] and alive(progress["pid"])
            if path.stat().st_mtime > started and running:
                victim = (int(path.parent.parent.name.split("-")[1]), progress["pid"], progress["checkpoint_step"])
                break
        time.sleep(0.1)
    assert victim is not None, "no job reached a checkpoint"
    job_id, pid, checkpointed = victim
    os.kill(pid, signal.SIGKILL)
    finish(process, tmp_path)
    checkpoints = audit(tmp_path, KILL_JOBS)
    result = json.loads((tmp_path / "results.json").read_text())[0]
    assert result["jobs"][job_id]["restarts"] >= 1
    assert any(start["step"] >= checkpointed for start in checkpoints[job_id]["starts"][1:])


def test_gangs_are_placed_within_or_across_nodes_by_strategy(tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    from shockwave.core.cluster import ClusterSpec
    from shockwave.core.errors import InputError
    from shockwave.runtime.backend import Launch
    from shockwave.runtime.ray_backend import RayBackend
    from shockwave.runtime.run import RunRequest, run

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 2})
    cluster.add_node(num_cpus=4, num_gpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, logging_level="warning", log_to_driver=False)
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    try:

        def place(strategy: str, gang: int) -> set[str] | None:
            backend = RayBackend(ClusterSpec.of(4), None, strategy)
            try:
                if not backend.start(Launch(1, gang, sleeper, time.time() + 60, 10, 32, None)):
                    return None
                return {member["node_id"] for member in backend.member_nodes(1)}
            finally:
                backend.close()  # its workers hold the cluster's GPUs until then

        assert len(place("STRICT_PACK", 2) or ()) == 1
        assert len(place("STRICT_SPREAD", 2) or ()) == 2
        assert len(place("PACK", 4) or ()) == 2  # 2 GPUs per node: a gang of 4 spans both
        assert place("STRICT_PACK", 4) is None  # no node has 4 GPUs
        # A real run on the two-node cluster: a 4-GPU data-parallel gang across the nodes, and a 1-GPU job.
        two = tmp_path / "two.trace"
        lines = write_runtime_trace(tmp_path / "all.trace").read_text().splitlines()
        two.write_text("\n".join([lines[3], lines[4]]) + "\n")
        result = run(
            RunRequest(
                trace=two,
                policy="fifo",  # placement is under test, not time sharing: no preemption churn under load
                gpus=4,
                out=tmp_path / "run",
                address=cluster.address,
                round_seconds=4.0,
            )
        )
        assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 2
        # Its nodes declare GPUs but not their types: a cluster of two types is refused, naming what is missing.
        with pytest.raises(InputError, match=r"'gpu_type:v100' counts 0 of 2; 'gpu_type:k80' counts 0 of 2"):
            RayBackend(ClusterSpec.parse("v100:2,k80:2"), None)
        one = write_runtime_trace(tmp_path / "one.trace", [JOBS[4]])
        typed = shockwave(
            *("run", "--out", tmp_path / "typed", "--address", cluster.address, "--trace", one),
            *("--policy", "fifo_perf", "--cluster", "v100:2,k80:2"),
            *("--throughputs", write_typed_throughputs(tmp_path / "typed.json", [JOBS[4]])),
        )
        assert typed.returncode == 2 and "lacks GPUs by type" in typed.stderr, typed.stderr
        assert "'gpu_type:k80' counts 0 of 2" in typed.stderr and "Traceback" not in typed.stderr
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_a_local_instance_listens_on_loopback_only_and_leaves_nothing_behind() -> None:
    """Without --address, Ray's GCS, raylet, agents, workers and the driver accept connections from this machine
    only; once the backend is closed, none of its processes is left."""
    from shockwave.core.cluster import ClusterSpec
    from shockwave.runtime.backend import Launch
    from shockwave.runtime.ray_backend import RayBackend

    me = os.getpid()
    before = set(descendants(me))  # earlier tests' helpers (a multiprocessing resource tracker) are not Ray's
    backend = RayBackend(ClusterSpec.of(2), None)
    try:
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        assert backend.start(Launch(1, 2, sleeper, time.time() + 60, 10, 32, None))  # two actors, a job process each
        sockets = [(pid, cmdline(pid)[:80], address, port) for pid, address, port in listening({me, *descendants(me)})]
    finally:
        backend.close()
    assert len({pid for pid, *_ in sockets}) >= 5, sockets  # at least GCS, raylet, driver, two actors' workers
    assert all(is_loopback(address) for *_, address, _ in sockets), sockets
    survivors = lambda: [pid for pid in descendants(me) if alive(pid) and pid not in before]  # noqa: E731
    assert wait_until(lambda: not survivors(), timeout=30), [cmdline(pid) for pid in survivors()]


def test_adaptive_jobs_switch_batch_size_for_real_and_the_run_replays_in_simulation(tmp_path: Path) -> None:
    """A GNS job and an Accordion gang pick their batch sizes from their own gradients; the scheduler grants each
    request at once, converts the step count (epochs kept) and restarts the job from its checkpoint."""
    from shockwave.runtime.run import replay_arguments
    from shockwave.workload_model.catalog import family
    from shockwave.workload_model.trace import catalog_job, write_trace

    epochs = {0: 3, 1: 3}
    jobs = [
        catalog_job("Transformer", 16, 1, family("Transformer").iterations_per_epoch(16) * epochs[0], "gns", 0.0),
        catalog_job("Transformer", 32, 2, family("Transformer").iterations_per_epoch(32) * epochs[1], "accordion", 0.0),
        catalog_job("LM", 20, 1, 1500, "static", 2.0),
    ]
    trace = tmp_path / "adaptive.trace"
    write_trace(jobs, trace)
    out = tmp_path / "run"
    out.mkdir()
    with (out / "scheduler.log").open("w") as log:
        process = subprocess.Popen(
            command(out, "--trace", trace, "--policy", "shockwave", "--gpus", 3, "--round-seconds", 8),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    finish(process, out)
    result = json.loads((out / "results.json").read_text())[0]
    schedules = json.loads((out / "batch_sizes.json").read_text())
    assert "trains at batch size" in (out / "scheduler.log").read_text()
    for job_id in (0, 1):
        record = result["jobs"][job_id]
        spec = jobs[job_id]
        assert record["batch_size_switches"], f"job {job_id} never changed its batch size"
        assert record["batch_size_changes"] == len(record["batch_size_switches"])
        assert len(schedules[str(job_id)]) == epochs[job_id] and len(set(schedules[str(job_id)])) > 1
        final_bs = record["batch_size_switches"][-1][1]
        state = torch.load(next((out / "checkpoints").glob(f"job-{job_id}-switch*-step*.ckpt")), weights_only=False)
        assert state["completions"] == 1 and state["batch_size"] == final_bs
        for before, after in itertools.pairwise(state["starts"]):
            if after["batch_size"] != before["batch_size"]:  # resumed at the new size, at a whole epoch
                epoch = family("Transformer").iterations_per_epoch(after["batch_size"])
                assert after["step"] > 0 and after["step"] % epoch == 0
        # The same epochs, so (up to rounding the last epoch) the same samples as at the initial batch size.
        assert abs(state["samples"] - spec.total_steps * spec.batch_size) <= final_bs * spec.scale_factor * 2
    assert result["jobs"][2]["batch_size_switches"] == []
    replayed = shockwave("simulate", *replay_arguments(out, result), "--json")
    assert replayed.returncode == 0, replayed.stderr
    simulated = json.loads(replayed.stdout)
    # A round-based simulator switches at round boundaries: a switch just before a job's end may never happen there
    # (job 0 trains 3 short epochs: 2 steps short of its first epoch at the end of a replayed round, it never did).
    changes = [j["batch_size_changes"] for j in simulated["jobs"]]
    real = [len(result["jobs"][i]["batch_size_switches"]) for i in (0, 1)]
    assert changes[0] <= real[0] and changes[1] <= real[1] and changes[0] + changes[1] > 0 and changes[2] == 0


def test_a_two_type_run_puts_every_job_on_gpus_of_its_planned_type(tmp_path: Path) -> None:
    """V100s and K80s, two of each, on a local instance; K80s slower in the table, so fifo_perf puts each job on a
    V100 while one is free and on a K80 otherwise. Every lease's members hold the type resource of the type the plan
    named (as Ray assigned it, not as asked), and the journal records each lease on that type."""
    from shockwave.runtime.backend import Launch
    from shockwave.runtime.journal import Journal
    from shockwave.runtime.ray_backend import RayBackend, type_resource
    from shockwave.runtime.run import RunRequest, run

    leases: list[tuple[int, str, list[dict[str, float]]]] = []
    """(job, planned type, each member's assigned resources) per lease."""

    class Audited(RayBackend):
        def start(self, launch: Launch) -> bool:
            if not super().start(launch):
                return False
            held = [node["resources"] for node in self.member_nodes(launch.job_id)]
            leases.append((launch.job_id, launch.gpu_type, held))
            return True

    trace = write_runtime_trace(tmp_path / "typed.trace", TYPED_JOBS)
    request = RunRequest(
        trace=trace,
        policy="fifo_perf",
        gpus=4,
        cluster="v100:2,k80:2",
        throughputs=write_typed_throughputs(tmp_path / "typed.json", TYPED_JOBS),
        out=tmp_path / "run",
        round_seconds=float(ROUND),
    )
    result = run(request, lambda req: Audited(req.cluster_spec, None, req.placement))
    audit(tmp_path / "run", TYPED_JOBS)
    assert {planned for _, planned, _ in leases} == {"v100", "k80"}
    for job_id, planned, held in leases:
        assert len(held) == TYPED_JOBS[job_id][2]  # one member per GPU of the gang
        for resources in held:
            assert resources.get(type_resource(planned)) == 1.0 and resources.get("GPU") == 1.0, resources
            assert [name for name in resources if name.startswith("gpu_type:")] == [type_resource(planned)]
    records = Journal(tmp_path / "run" / "journal.sqlite").jobs()
    for job_id, record in records.items():
        assert record.gpu_types == [planned for j, planned, _ in leases if j == job_id]
        assert set(record.rates) <= set(record.gpu_types) and record.rates
    assert set(result["utilization_by_type"]) == {"v100", "k80"}


def test_a_pair_runs_both_jobs_at_once_on_halves_of_one_gpu_and_both_complete(tmp_path: Path) -> None:
    """Two 1-GPU jobs on one logical GPU, with a table that lists them sharing it: gandiva pairs them, the second
    joins the first on its GPU's worker while it trains, and both complete."""
    from shockwave.runtime.backend import Launch
    from shockwave.runtime.journal import Journal
    from shockwave.runtime.ray_backend import RayBackend, type_resource
    from shockwave.runtime.run import RunRequest, run

    leases: list[tuple[int, int | None, dict[str, Any], bool]] = []
    """(job, partner, its member's node, whether the partner was training on the GPU then) per lease."""

    class Audited(RayBackend):
        def start(self, launch: Launch) -> bool:
            if not super().start(launch):
                return False
            partner = launch.partner
            training = partner in self.gangs and not self.status(partner).exited
            leases.append((launch.job_id, partner, self.member_nodes(launch.job_id)[0], training))
            return True

    jobs = PAIR_JOBS[:2]
    request = RunRequest(
        trace=write_runtime_trace(tmp_path / "pair.trace", jobs),
        policy="gandiva",
        gpus=1,
        throughputs=write_pair_throughputs(tmp_path / "pairs.json", jobs),
        out=tmp_path / "run",
        round_seconds=float(ROUND),
    )
    run(request, lambda req: Audited(req.cluster_spec, None, req.placement))
    audit(tmp_path / "run", jobs)
    shared = [(job, node, training) for job, partner, node, training in leases if partner is not None]
    assert {job for job, _, _ in shared} == {0, 1}
    for _, node, _ in shared:
        assert node["resources"].get("GPU") == 1.0 and node["resources"].get(type_resource("v100")) == 1.0, node
    joined = [(job, node) for job, node, training in shared if training]
    assert joined, leases  # one job started while its partner was running on the GPU
    assert {tuple(node["gpus"]) for _, node, _ in shared} == {tuple(leases[0][2]["gpus"])}  # the one GPU
    records = Journal(tmp_path / "run" / "journal.sqlite").jobs()
    assert all(record.partners[0] == 1 - job_id for job_id, record in records.items())
