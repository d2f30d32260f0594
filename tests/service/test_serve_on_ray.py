"""`shockwave serve` for real: a local Ray instance with logical GPUs, PyTorch jobs on CPU, submitted over time from
the CLI and over HTTP, two cancelled, the service killed with SIGKILL mid-run and resumed.

The audit is each finished job's final checkpoint (full step count, exactly one completion, every later lease from a
checkpointed step) and the journal (a cancelled job never started again).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import check_results, require_module, shockwave
from processes import alive, cmdline, descendants, wait_until
from runtime_trace import journal_records

pytestmark = pytest.mark.slow
require_module("torch", "the service's tests train real PyTorch jobs: pip install torch==2.13.0")
require_module("ray", "the service needs Ray: pip install 'shockwave[cluster]'")

import httpx2 as httpx  # noqa: E402
import torch  # noqa: E402

from shockwave.core.errors import InputError  # noqa: E402
from shockwave.service.endpoint import read_endpoint  # noqa: E402

JOBS = [  # name, family, GPUs, steps: ten jobs, about a minute and a half of the two GPUs
    ("cli-0", "ResNet-18", 1, 2500),
    ("http-1", "LM", 1, 600),
    ("cli-2", "ResNet-18", 2, 1500),
    ("http-3", "ResNet-18", 1, 3000),
    ("cli-4", "LM", 1, 800),
    ("http-5", "ResNet-18", 1, 2000),
    ("cli-6", "ResNet-18", 1, 2500),
    ("http-7", "LM", 1, 700),
    ("cli-8", "ResNet-18", 1, 1800),
    ("http-9", "ResNet-18", 1, 2200),
]
TIMEOUT_S = 600


def start_service(out: Path, *extra: str) -> subprocess.Popen:
    log = (out / "service.log").open("a")
    return subprocess.Popen(
        [sys.executable, "-m", "shockwave", "serve", "--out", str(out), *extra],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_endpoint(out: Path, process: subprocess.Popen) -> None:
    """Until the service answers at the URL of its endpoint file (a killed one's file may still be there)."""

    def answers() -> bool:
        if process.poll() is not None:
            return True
        try:
            return httpx.get(f"{read_endpoint(out).url}/healthz", trust_env=False).status_code == 200
        except (InputError, httpx.HTTPError):
            return False

    assert wait_until(answers, timeout=120) and process.poll() is None, (out / "service.log").read_text()[-3000:]


def submit(out: Path, name: str, family: str, gpus: int, steps: int) -> None:
    """Even-numbered jobs through the CLI, odd ones over HTTP with the token."""
    if name.startswith("cli"):
        done = shockwave("submit", "--out", out, "--name", name, "--family", family, "--gpus", gpus, "--steps", steps)
        assert done.returncode == 0, done.stderr
        return
    endpoint = read_endpoint(out)
    answer = httpx.post(
        f"{endpoint.url}/jobs",
        json={"name": name, "family": family, "gpus": gpus, "steps": steps},
        headers={"Authorization": f"Bearer {endpoint.token}"},
        trust_env=False,
    )
    assert answer.status_code == 201, answer.text


def queue(out: Path) -> dict[str, dict[str, Any]]:
    listed = shockwave("status", "--out", out, "--json")
    assert listed.returncode == 0, listed.stderr
    return {job["name"]: job for job in json.loads(listed.stdout)}


def test_jobs_submitted_cancelled_and_a_killed_service_resumed_complete_exactly_once(tmp_path: Path) -> None:
    service = start_service(tmp_path, "--cluster", "v100:2", "--round-seconds", "4")
    wait_for_endpoint(tmp_path, service)
    for row in JOBS[:6]:
        submit(tmp_path, *row)
    # A queued job: the sixth, behind five others on two GPUs.
    assert queue(tmp_path)["http-5"]["state"] == "queued"
    assert shockwave("cancel", "--out", tmp_path, "http-5").returncode == 0
    for row in JOBS[6:]:
        submit(tmp_path, *row)
        time.sleep(1.0)

    running: list[str] = []

    def one_running() -> bool:
        jobs = queue(tmp_path)
        candidates = [
            j
            for j in jobs.values()
            if j["state"] == "running" and j["total_steps"] >= 1500 and j["progress_steps"] < j["total_steps"] / 2
        ]
        running.extend(j["name"] for j in candidates[:1])
        return bool(candidates)

    def cancel_one_running() -> bool:
        """A job can finish while the CLI starts (ResNet-18 trains 500 steps/s here): then the next one."""
        if not one_running():
            return False
        done = shockwave("cancel", "--out", tmp_path, running[-1])
        assert done.returncode == 0 or "done already" in done.stderr, done.stderr
        return done.returncode == 0

    assert wait_until(cancel_one_running, timeout=TIMEOUT_S, poll=0.5), queue(tmp_path)
    victim = running[-1]
    cancelled_at = time.time()

    def some_done() -> bool:
        records = journal_records(tmp_path)
        return sum(r["status"] == "done" for r in records.values()) >= 3

    assert wait_until(some_done, timeout=TIMEOUT_S, poll=0.5), queue(tmp_path)
    left = descendants(service.pid)
    service.send_signal(signal.SIGKILL)
    service.wait(timeout=30)
    survivors = lambda: [pid for pid in left if alive(pid)]  # noqa: E731
    assert wait_until(lambda: not survivors(), timeout=30), [cmdline(pid) for pid in survivors()]
    before = journal_records(tmp_path)
    done_before = {i: r["finish_s"] for i, r in before.items() if r["status"] == "done"}
    assert 3 <= len(done_before) < len(JOBS) - 2
    down = shockwave("status", "--out", tmp_path)  # the dead service's endpoint is left: a clear refusal
    assert down.returncode == 2 and "cannot reach" in down.stderr and "Traceback" not in down.stderr

    resumed = start_service(tmp_path, "--resume")
    wait_for_endpoint(tmp_path, resumed)
    expected = {name for name, *_ in JOBS} - {"http-5", victim}
    assert wait_until(
        lambda: all(queue(tmp_path)[name]["state"] == "done" for name in expected), timeout=TIMEOUT_S, poll=1.0
    ), queue(tmp_path)
    table = shockwave("status", "--out", tmp_path)
    assert table.returncode == 0 and "done" in table.stdout
    logs = shockwave("logs", "--out", tmp_path, sorted(expected)[0])
    assert logs.returncode == 0 and "checkpoint saved" in logs.stdout
    resumed.send_signal(signal.SIGTERM)
    assert resumed.wait(timeout=120) == 0, (tmp_path / "service.log").read_text()[-3000:]

    result = json.loads((tmp_path / "results.json").read_text())[0]
    check_results([result])
    names = result["job_names"]
    ids = {name: names.index(name) for name in names}
    assert sorted(result["cancelled_jobs"]) == sorted([ids["http-5"], ids[victim]])
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == len(expected)
    rows = {name: (family, gpus, steps) for name, family, gpus, steps in JOBS}
    for job in result["jobs"]:
        steps = rows[names[job["id"]]][2]
        [path] = (tmp_path / "checkpoints").glob(f"job-{job['id']}-switch*-step{steps}.ckpt")
        state = torch.load(path, weights_only=True)
        assert state["step"] == steps and state["completions"] == 1, (names[job["id"]], state["step"])
        assert all(start["step"] > 0 for start in state["starts"][1:])  # later leases resumed from checkpoints
    after = journal_records(tmp_path)
    assert {i: after[i]["finish_s"] for i in done_before} == done_before  # finished jobs were not run again
    assert after[ids["http-5"]]["starts"] == []  # cancelled while queued: never ran
    start_wall = json.loads(_settings(tmp_path)["start_wall"])
    assert all(start_wall + start <= cancelled_at for start in after[ids[victim]]["starts"])  # never again


def _settings(out: Path) -> dict[str, str]:
    import sqlite3

    db = sqlite3.connect(f"file:{out / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return dict(db.execute("SELECT key, value FROM settings"))
    finally:
        db.close()
