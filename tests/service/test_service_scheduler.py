"""`shockwave serve`'s scheduler on the in-process fake cluster: jobs submitted and cancelled while it runs, a stop,
a crash and a resume. Virtual time: whatever happens "while it runs" happens at a given virtual second, from the
scheduler's own waits, so every run is the same run however busy the machine is."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx2 as httpx
import pytest

from conftest import shockwave
from service_world import World, backend_on, launched, request, spec
from shockwave.core.errors import InputError
from shockwave.runtime.journal import Journal
from shockwave.runtime.run import replay_arguments
from shockwave.service.endpoint import read_endpoint
from shockwave.service.serve import ServeRequest, serve
from shockwave.service.store import Store


def test_jobs_submitted_and_cancelled_while_it_runs(tmp_path: Path) -> None:
    """Six jobs over time on 2 GPUs; one cancelled while queued, one while running; then a stop once the rest
    finished: each other job completed once with all its steps, and a cancelled job never ran after its cancel."""
    world, fakes, stop = World(), [], threading.Event()
    queue = Store(tmp_path, clock=world.now)
    for i, at in enumerate([0.0, 0.0, 1.0, 12.0, 12.0, 30.0]):
        world.at(at, lambda i=i: queue.submit(spec(f"job-{i}", steps=1000 + 100 * i)))
    world.at(13.0, lambda: queue.cancel("job-4"))  # queued behind the others: 2 GPUs, 4 jobs
    cancelled_running: list[int] = []

    def cancel_a_running_one() -> None:
        running = [job for job in queue.jobs() if job.state == "running"]
        assert running, "a job should be running at 21 s"
        furthest_from_done = min(running, key=lambda job: job.progress_steps / job.total_steps)
        queue.cancel(furthest_from_done.name)
        cancelled_running.append(furthest_from_done.id - 1)

    world.at(21.0, cancel_a_running_one)
    world.at(200.0, stop.set)
    result = serve(request(tmp_path), stop, backend_on(world, fakes))

    jobs = {job.name: job for job in queue.jobs()}
    assert len(jobs) == 6 and jobs["job-4"].state == "cancelled"
    running_name = f"job-{cancelled_running[0]}"
    assert jobs[running_name].state == "cancelled" and running_name != "job-4"
    done = [job for job in jobs.values() if job.state == "done"]
    assert len(done) == 4 and all(job.progress_steps == job.total_steps for job in done)
    assert all(job.rho is not None and job.rho > 0 for job in done)
    records = Journal(tmp_path / "journal.sqlite").jobs()
    assert sorted(r.status for r in records.values()) == ["cancelled"] * 2 + ["done"] * 4
    assert launched(fakes, 4) == []  # cancelled before it ever ran
    cancelled_at = 21.0
    assert all(launch.deadline <= cancelled_at + 10 for launch in launched(fakes, cancelled_running[0]))
    released = [at for job_id, at in fakes[0].released if job_id == cancelled_running[0]]
    assert cancelled_at <= released[-1] <= cancelled_at + 0.25  # within a poll, not at the round's end (25 s)
    assert result["cancelled_jobs"] == sorted([4, cancelled_running[0]])
    assert result["unfinished_jobs"] == [] and result["complete"]
    assert result["job_names"] == [f"job-{i}" for i in range(6)]
    saved = json.loads((tmp_path / "results.json").read_text())[0]
    assert saved["jobs"] == result["jobs"] and len(saved["jobs"]) == 4
    assert (tmp_path / "trace.scaled.trace").read_text().count("\n") == 6
    assert "at step 1000" in (tmp_path / "logs" / "job-0.log").read_text()
    assert not (tmp_path / "endpoint.json").exists()  # a stopped service cannot be reached
    replay = shockwave("simulate", *replay_arguments(tmp_path, result), "--json")
    assert replay.returncode == 0, replay.stderr
    assert len(json.loads(replay.stdout)["jobs"]) == 6  # a replay runs the cancelled jobs too: it cannot cancel
    assert shockwave("report", tmp_path).returncode == 0
    rounds = queue.rounds(1000)
    assert rounds and all(sum(r.busy.values()) <= 2 for r in rounds)
    assert any(p.job == "job-0" for r in rounds for p in r.plan)


def test_a_stop_checkpoints_the_running_jobs_and_a_resume_finishes_them(tmp_path: Path) -> None:
    world, fakes, stop = World(), [], threading.Event()
    queue = Store(tmp_path, clock=world.now)
    for i in range(3):
        world.at(0.0, lambda i=i: queue.submit(spec(f"job-{i}", steps=3000)))
    world.at(12.0, stop.set)
    first = serve(request(tmp_path), stop, backend_on(world, fakes))
    assert first["jobs"] == [] and sorted(first["unfinished_jobs"]) == [0, 1, 2] and not first["complete"]
    records = Journal(tmp_path / "journal.sqlite").jobs()
    stopped = {i: r.steps for i, r in records.items() if r.steps > 0}
    assert len(stopped) >= 2  # those that ran kept their steps in a checkpoint
    assert first["wall_seconds"] < 12.5  # the round in progress ended at the stop, not at its end (15 s)

    stop = threading.Event()
    world.at(world.now() + 1.0, lambda: queue.submit(spec("late", steps=500)))  # while it was down
    world.at(world.now() + 200.0, stop.set)
    with pytest.raises(InputError, match=r"started with --policy max_min_fairness, and this resume gives shockwave"):
        serve(request(tmp_path, resume=True, policy="shockwave", cluster="v100:9"), stop, backend_on(world, fakes))
    resumed = serve(request(tmp_path, resume=True, cluster="v100:9"), stop, backend_on(world, fakes))
    assert resumed["policy"] == first["policy"] and resumed["cluster"] == "v100:2"  # the journal's cluster
    assert resumed["complete"] and len(resumed["jobs"]) == 4
    for job_id, steps in stopped.items():
        assert int(launched(fakes[1:], job_id)[0].checkpoint or b"0") == steps
    assert {job.state for job in queue.jobs()} == {"done"}


class Crash(Exception):
    pass


def test_a_crashed_service_resumes_with_its_queue_and_never_reruns_a_finished_or_cancelled_job(tmp_path: Path) -> None:
    world, fakes = World(), []
    queue = Store(tmp_path, clock=world.now)
    for i in range(4):
        world.at(2.0 * i, lambda i=i: queue.submit(spec(f"job-{i}", steps=500 if i == 0 else 2000)))
    world.at(7.0, lambda: queue.cancel("job-3"))

    def crash() -> None:
        raise Crash

    world.at(22.0, crash)
    with pytest.raises(Crash):
        serve(request(tmp_path), threading.Event(), backend_on(world, fakes))
    before = Journal(tmp_path / "journal.sqlite").jobs()
    finished = {i for i, r in before.items() if r.status == "done"}
    assert 0 < len(finished) < 3 and before[3].status == "cancelled"

    stop = threading.Event()
    world.at(world.now() + 300.0, stop.set)
    result = serve(request(tmp_path, resume=True), stop, backend_on(world, fakes))
    again = {launch.job_id for launch in fakes[1].launches}
    assert not again & finished and 3 not in again
    assert sorted(job["id"] for job in result["jobs"]) == [0, 1, 2] and result["cancelled_jobs"] == [3]
    after = Journal(tmp_path / "journal.sqlite").jobs()
    assert all(after[i].finish_s == before[i].finish_s for i in finished)


def test_a_job_runs_only_on_the_gpu_types_its_spec_allows(tmp_path: Path) -> None:
    world, fakes, stop = World(), [], threading.Event()
    queue = Store(tmp_path, clock=world.now)
    world.at(0.0, lambda: queue.submit(spec("k80-only", steps=2000, gpu_types=["k80"])))
    world.at(0.0, lambda: queue.submit(spec("anywhere", steps=2000)))
    world.at(120.0, stop.set)
    cluster = "v100:1,k80:1"
    result = serve(request(tmp_path, cluster=cluster, policy="max_min_fairness_perf"), stop, backend_on(world, fakes))
    assert result["complete"] and len(result["jobs"]) == 2
    assert {launch.gpu_type for launch in launched(fakes, 0)} == {"k80"}


def test_the_api_is_served_while_it_runs_and_submissions_over_http_are_scheduled(tmp_path: Path) -> None:
    """The endpoint file appears once the service listens; a job posted with its token is run to the end."""
    world, fakes, stop = World(), [], threading.Event()
    answers: list[int] = []

    def post() -> None:
        endpoint = read_endpoint(tmp_path)
        headers = {"Authorization": f"Bearer {endpoint.token}"}
        body = {"name": "posted", "family": "ResNet-18", "steps": 500}
        answers.append(httpx.post(f"{endpoint.url}/jobs", json=body, headers=headers, trust_env=False).status_code)
        answers.append(httpx.post(f"{endpoint.url}/jobs", json=body, trust_env=False).status_code)

    def scrape() -> None:
        endpoint = read_endpoint(tmp_path)
        headers = {"Authorization": f"Bearer {endpoint.token}"}
        metrics.append(httpx.get(f"{endpoint.url}/metrics", headers=headers, trust_env=False).text)

    metrics: list[str] = []
    world.at(1.0, post)
    world.at(8.0, scrape)
    world.at(60.0, stop.set)
    result = serve(request(tmp_path), stop, backend_on(world, fakes))
    assert answers == [201, 401]
    assert 'shockwave_gpu_utilisation_ratio{gpu_type="v100"} 0.5' in metrics[0]  # one job on two GPUs
    assert 'shockwave_jobs{state="running"} 1.0' in metrics[0]
    assert "shockwave_solve_seconds " in metrics[0] and "shockwave_round_seconds 5.0" in metrics[0]
    assert len(result["jobs"]) == 1 and result["job_names"] == ["posted"]


def test_what_cannot_start_a_service_is_refused_before_anything_runs(tmp_path: Path) -> None:
    stop = threading.Event()
    with pytest.raises(InputError, match="no journal to resume"):
        serve(request(tmp_path / "a", resume=True), stop, lambda cluster: pytest.fail("no backend"))
    with pytest.raises(InputError, match="--cluster"):
        serve(ServeRequest(out=tmp_path / "b"), stop, lambda cluster: pytest.fail("no backend"))
    with pytest.raises(InputError, match="round-seconds"):
        serve(request(tmp_path / "c", round_seconds=float("nan")), stop, lambda cluster: pytest.fail("no backend"))
    (tmp_path / "d").mkdir()
    Journal(tmp_path / "d" / "journal.sqlite").close()
    with pytest.raises(InputError, match="add --resume"):
        serve(request(tmp_path / "d"), stop, lambda cluster: pytest.fail("no backend"))


def test_a_service_stopped_while_a_job_runs_past_the_last_finish_writes_a_valid_result(tmp_path: Path) -> None:
    """Utilisation counts GPU time up to the last finish: the running job's lease goes on past it."""
    world, fakes, stop = World(), [], threading.Event()
    queue = Store(tmp_path, clock=world.now)
    world.at(0.0, lambda: queue.submit(spec("short", steps=200)))
    world.at(0.0, lambda: queue.submit(spec("long", steps=100_000)))
    world.at(60.0, stop.set)
    result = serve(request(tmp_path), stop, backend_on(world, fakes))
    assert [job["id"] for job in result["jobs"]] == [0] and result["unfinished_jobs"] == [1]
    assert 0 < result["utilization"] <= 1


def test_a_service_stopped_before_any_submission_has_an_empty_result_that_prints(tmp_path: Path) -> None:
    from rich.console import Console

    from shockwave.results.report import print_run_summary

    world, stop = World(), threading.Event()
    world.at(30.0, stop.set)
    result = serve(request(tmp_path), stop, backend_on(world, []))
    assert result["jobs"] == [] and result["complete"] and result["makespan_lower_bound_s"] == 0
    console = Console(record=True, width=120)
    print_run_summary(console, result)
    assert "makespan" in console.export_text()


def test_entities_share_the_cluster_by_weight_and_a_job_of_no_entity_is_refused(tmp_path: Path) -> None:
    """Two teams, weights 3 and 1, four long jobs each on 4 GPUs: multi-level max-min fairness gives the first team
    three GPUs' time for each of the second's. A job naming no entity (the file has no default) or an unknown one is
    refused with the field named, and nothing is queued."""
    teams = tmp_path / "teams.toml"
    teams.write_text("[entities]\nvision = 3\nspeech = 1\n")
    out = tmp_path / "service"
    world, fakes, stop = World(), [], threading.Event()
    queue = Store(out, clock=world.now)
    refusals: list[tuple[int, str]] = []
    for i in range(8):
        team = "vision" if i % 2 == 0 else "speech"
        world.at(0.0, lambda i=i, team=team: queue.submit(spec(f"{team}-{i}", steps=100_000, entity=team)))

    def refused() -> None:
        endpoint = read_endpoint(out)
        headers = {"Authorization": f"Bearer {endpoint.token}"}
        for entity in (None, "finance"):
            body = {"name": f"stray-{entity}", "family": "ResNet-18", "steps": 10, "entity": entity}
            answer = httpx.post(f"{endpoint.url}/jobs", json=body, headers=headers, trust_env=False)
            refusals.append((answer.status_code, answer.json()["field"]))

    world.at(1.0, refused)
    world.at(400.0, stop.set)
    changes = {"cluster": "v100:4", "policy": "max_min_fairness_water_filling", "policy_params": (f"entities={teams}",)}
    result = serve(request(out, **changes), stop, backend_on(world, fakes))
    assert refusals == [(422, "entity"), (422, "entity")] and len(queue.jobs()) == 8
    records = Journal(out / "journal.sqlite").jobs()
    names = result["job_names"]
    held = {
        team: sum(r.run_seconds for i, r in records.items() if names[i].startswith(team))
        for team in ("vision", "speech")
    }
    assert held["vision"] / held["speech"] == pytest.approx(3.0, rel=0.15)


def test_a_job_the_throughput_table_cannot_plan_is_refused_at_submission(tmp_path: Path) -> None:
    """With a table that knows ResNet-18 alone, an LM job would wait forever; a 2-GPU ResNet-18 is planned at the
    rate the table estimates for its gang."""
    from shockwave.workload_model.throughput import TableThroughputs

    table = tmp_path / "table.json"
    table.write_text(json.dumps(TableThroughputs({("v100", "ResNet-18", 32, 1): 50.0}, "tiny").to_json()))
    out = tmp_path / "service"
    world, stop = World(), threading.Event()
    answers: list[tuple[int, str | None]] = []

    def post() -> None:
        endpoint = read_endpoint(out)
        headers = {"Authorization": f"Bearer {endpoint.token}"}
        for name, family, gpus in (("ok", "ResNet-18", 1), ("lm", "LM", 1), ("gang", "ResNet-18", 2)):
            body = {"name": name, "family": family, "gpus": gpus, "steps": 100, "batch_size": 32}
            answer = httpx.post(f"{endpoint.url}/jobs", json=body, headers=headers, trust_env=False)
            answers.append((answer.status_code, answer.json().get("field")))

    world.at(1.0, post)
    world.at(60.0, stop.set)
    result = serve(request(out, throughputs=table), stop, backend_on(world, []))
    assert answers == [(201, None), (422, "family"), (201, None)]
    assert result["job_names"] == ["ok", "gang"] and result["complete"]


def test_the_queue_the_dashboard_and_results_json_say_the_same_rho(tmp_path: Path) -> None:
    """Five jobs on two GPUs (rho's max(1, N/G) is 2.5): a finished job's rho is the result's, wherever it is read."""
    from shockwave.service.dashboard import job_row

    world, fakes, stop = World(), [], threading.Event()
    queue = Store(tmp_path, clock=world.now)
    for i in range(5):
        world.at(2.0 * i, lambda i=i: queue.submit(spec(f"job-{i}", steps=400 + 300 * i)))
    world.at(300.0, stop.set)
    result = serve(request(tmp_path), stop, backend_on(world, fakes))
    assert len(result["jobs"]) == 5
    by_name = {job.name: job for job in queue.jobs()}
    for job in result["jobs"]:
        stored = by_name[result["job_names"][job["id"]]]
        assert stored.rho == job["ftf"] == job_row(stored)["rho"]
