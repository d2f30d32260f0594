"""A service's folder is data, never orders (issue 31): a resumed service runs the operator's policy and command, one
service per folder, a bad queue row is quarantined while every other job goes on, and the folder moves whole. On
the fake cluster, in virtual time (see tests/service/test_service_scheduler.py)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from rich.console import Console

from service_world import World, backend_on, launched, request, spec
from shockwave.core.cluster import ClusterSpec
from shockwave.core.errors import InputError
from shockwave.io.lock import FolderLock
from shockwave.runtime.journal import Journal
from shockwave.service.api import make_app
from shockwave.service.serve import serve
from shockwave.service.status import queue_table
from shockwave.service.store import Store

TOKEN = "test-token-0123456789"


def stopped_service(folder: Path, jobs: int = 3, stop_at: float = 12.0, **changes: object) -> World:
    """A service that took `jobs` 3,000-step jobs in and was stopped with them unfinished; its world (clock)."""
    world, stop = World(), threading.Event()
    queue = Store(folder, clock=world.now)
    for i in range(jobs):
        world.at(0.0, lambda i=i: queue.submit(spec(f"job-{i}", steps=3000)))
    world.at(stop_at, stop.set)
    serve(request(folder, **changes), stop, backend_on(world, []))
    return world


def resume(folder: Path, world: World, until: float = 300.0, **changes: object) -> tuple[dict, list]:
    fakes: list = []
    stop = threading.Event()
    world.at(world.now() + until, stop.set)
    return serve(request(folder, resume=True, **changes), stop, backend_on(world, fakes)), fakes


def edit_journal(folder: Path, key: str, value: object) -> None:
    with sqlite3.connect(folder / "journal.sqlite") as db:
        db.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (key, json.dumps(value)))


def test_a_journal_edited_to_run_a_command_or_import_a_policy_is_refused(tmp_path: Path) -> None:
    world = stopped_service(tmp_path)
    mark = tmp_path.parent / f"{tmp_path.name}-imported"
    evil = tmp_path.parent / f"{tmp_path.name}-evil.py"
    evil.write_text(f"import pathlib\npathlib.Path({str(mark)!r}).touch()\nclass Evil: ...\n")
    edit_journal(tmp_path, "command", f"sh -c 'touch {mark}'")
    with pytest.raises(InputError, match=r"row 'command': the run was started with --job-command 'sh -c"):
        resume(tmp_path, world)
    edit_journal(tmp_path, "command", None)
    edit_journal(tmp_path, "policy", f"{evil}:Evil")
    with pytest.raises(InputError, match=r"row 'policy': the run was started with --policy .*evil\.py:Evil"):
        resume(tmp_path, world)
    assert not mark.exists()
    edit_journal(tmp_path, "policy", "max_min_fairness")
    result, _ = resume(tmp_path, world)
    assert result["complete"] and len(result["jobs"]) == 3


def test_a_second_service_on_a_live_service_s_folder_is_refused_with_its_pid(tmp_path: Path) -> None:
    world = stopped_service(tmp_path)
    endpoint_before = sorted(os.listdir(tmp_path))
    live = FolderLock(tmp_path)  # the live service holds its folder
    with live, pytest.raises(InputError, match=f"process {os.getpid()} is using this folder already"):
        resume(tmp_path, world)
    assert sorted(os.listdir(tmp_path)) == endpoint_before  # nothing of the live service's was touched


def test_a_bad_queue_row_is_quarantined_and_every_other_job_goes_on(tmp_path: Path) -> None:
    world = stopped_service(tmp_path, jobs=3)
    queue = Store(tmp_path, clock=world.now)
    queue.submit(spec("late", steps=500))  # while it was down
    queue.submit(spec("broken", steps=500))
    with sqlite3.connect(tmp_path / "service.sqlite") as db:
        db.execute("UPDATE jobs SET spec = ? WHERE name = 'job-1'", ('{"name": "job-1", "steps": "many"}',))
        db.execute("UPDATE jobs SET progress_steps = 'x' WHERE name = 'broken'")
    api = TestClient(make_app(queue, ClusterSpec.parse("v100:2"), TOKEN))
    listed = api.get("/jobs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert listed.status_code == 200, listed.text
    states = {job["name"]: (job["state"], job["reason"]) for job in listed.json()}
    assert states["job-1"][0] == "invalid" and "row 2 of the queue is invalid: field 'spec." in states["job-1"][1]
    assert states["broken"][0] == "invalid" and "field 'progress_steps'" in states["broken"][1]
    console = Console(record=True, width=300)
    console.print(queue_table(queue.jobs()))
    shown = console.export_text()
    assert "│ invalid │" in shown and "row 5 of the queue is invalid" in shown

    result, fakes = resume(tmp_path, world)
    assert sorted(job["id"] for job in result["jobs"]) == [0, 2, 3]  # job-0, job-2 and late: no valid job lost
    assert result["unfinished_jobs"] == [1] and "row 2 of the queue is invalid" in result["failed_jobs"]["1"]
    assert launched(fakes, 1) == []  # never run again: its command cannot be known
    assert result["job_names"] == ["job-0", "job-1", "job-2", "late"]  # "broken" was never taken in
    records = Journal(tmp_path / "journal.sqlite").jobs()
    assert records[1].status == "failed"


def test_a_service_folder_moves_whole_and_resumes_on_its_own_copies(tmp_path: Path) -> None:
    teams = tmp_path / "teams.toml"
    teams.write_text('default = "a"\n[entities.a]\nweight = 1\n[entities.b]\nweight = 2\n')
    folder = tmp_path / "svc"
    folder.mkdir(mode=0o700)
    params = ("entities=" + str(teams),)
    world = stopped_service(folder, policy="max_min_fairness_water_filling", policy_params=params)
    teams.unlink()  # the service reads its own copy
    moved = tmp_path / "moved"
    shutil.copytree(folder, moved)
    checkpoints = sorted(p.name for p in (folder / "checkpoints").iterdir())
    result, _ = resume(moved, world, policy="max_min_fairness_water_filling")
    assert result["complete"] and len(result["jobs"]) == 3
    assert sorted(p.name for p in (folder / "checkpoints").iterdir()) == checkpoints  # the original's untouched


def test_the_service_s_state_files_are_private(tmp_path: Path) -> None:
    folder = tmp_path / "svc"
    stopped_service(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for sub in ("checkpoints", "logs"):
        assert stat.S_IMODE((folder / sub).stat().st_mode) == 0o700, sub
    files = [
        folder / "service.sqlite",
        folder / "journal.sqlite",
        *folder.glob("logs/*"),
        *folder.glob("checkpoints/*"),
    ]
    assert len(files) > 3
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_gpu_type_the_throughput_model_lacks_is_refused_before_the_service_starts(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"built-in throughput model has no rates for GPU type 'a100'"):
        serve(request(tmp_path, cluster="a100:32"), threading.Event(), backend_on(World(), []))
    assert not (tmp_path / "journal.sqlite").exists()


def test_status_explains_rho_and_gives_no_finish_for_a_job_that_will_not_finish(tmp_path: Path) -> None:
    queue = Store(tmp_path, clock=lambda: 1.0e9)
    queue.submit(spec("kept", steps=500))
    queue.submit(spec("dropped", steps=500))
    with sqlite3.connect(tmp_path / "service.sqlite") as db:
        db.execute("UPDATE jobs SET estimated_finish_s = 2000000000, rho = 1.25")
        db.execute("UPDATE jobs SET state = 'cancelled' WHERE name = 'dropped'")
    console = Console(record=True, width=300)
    console.print(queue_table(queue.jobs()))
    shown = console.export_text()
    rows = {line.split("│")[2].strip(): line for line in shown.splitlines() if line.count("│") > 3}
    year = time.strftime("%Y", time.localtime(2000000000))
    assert year in rows["kept"] and year not in rows["dropped"] and "1.25" in rows["kept"]
    assert "rho: finish-time fairness" in shown
