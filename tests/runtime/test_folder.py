"""A run's folder is data, never orders (issue 31): what runs comes from the command line, a copy of the folder
resumes on its own files, one scheduler at a time, every journal row validated, state files private."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import shockwave
from runtime_trace import DyingScheduler, write_runtime_trace
from shockwave.core.clock import VirtualClock
from shockwave.core.errors import InputError
from shockwave.io.lock import FolderLock
from shockwave.runtime.fake_backend import FakeBackend
from shockwave.runtime.run import RunRequest, run

RATE = 400.0


def request(trace: Path, out: Path, **changes: object) -> RunRequest:
    fields = {"trace": trace, "policy": "max_min_fairness", "gpus": 4, "out": out, "round_seconds": 0.1}
    return replace(RunRequest(**fields, time_scale=4), **changes)  # type: ignore[arg-type]


@pytest.fixture
def killed(tmp_path: Path) -> tuple[Path, VirtualClock]:
    """A run killed after 3 of its 8 jobs finished, its trace file gone since: (its folder, its clock)."""
    trace = write_runtime_trace(tmp_path / "rt8.trace")
    clock = VirtualClock()
    with pytest.raises(KeyboardInterrupt):
        run(request(trace, tmp_path / "r4"), lambda req: DyingScheduler(4, 3, clock))
    trace.unlink()  # the run reads its own copy from now on
    return tmp_path / "r4", clock


def resume(folder: Path, clock: VirtualClock, **changes: object) -> tuple[dict, FakeBackend]:
    backend = FakeBackend(4, steps_per_s=RATE, clock=clock)
    result = run(request(Path(), folder, resume=True, **changes), lambda req: backend)
    return result, backend


def edit(folder: Path, sql: str, *values: object) -> None:
    with sqlite3.connect(folder / "journal.sqlite") as db:
        db.execute(sql, values)


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*.ckpt")}


# -- 1. what runs is the operator's ------------------------------------------------------------------------------------
def test_a_journal_edited_to_run_a_command_is_refused_and_never_runs_it(
    killed: tuple[Path, VirtualClock], tmp_path: Path
) -> None:
    folder, clock = killed
    mark = tmp_path / "MARK"
    planted = f"sh -c 'touch {mark}; sleep 1000'"
    edit(folder, "INSERT OR REPLACE INTO settings VALUES ('command', ?)", json.dumps(planted))
    backend = FakeBackend(4, steps_per_s=RATE, clock=clock)
    with pytest.raises(InputError) as refused:
        run(request(Path(), folder, resume=True), lambda req: backend)
    message = str(refused.value)
    assert "row 'command': the run was started with --job-command 'sh -c" in message
    assert "this resume gives none (the default)" in message
    assert backend.launches == [] and not mark.exists()
    with pytest.raises(InputError, match="was started with --job-command"):  # nor when the operator names another
        run(request(Path(), folder, resume=True, command="python train.py"), lambda req: backend)
    assert backend.launches == []


def test_a_journal_edited_to_name_a_policy_file_never_imports_it(
    killed: tuple[Path, VirtualClock], tmp_path: Path
) -> None:
    folder, clock = killed
    mark = tmp_path / "IMPORTED"
    (tmp_path / "evil.py").write_text(f"import pathlib\npathlib.Path({str(mark)!r}).touch()\nclass Evil: ...\n")
    edit(folder, "UPDATE settings SET value = ? WHERE key = 'policy'", json.dumps(f"{tmp_path / 'evil.py'}:Evil"))
    with pytest.raises(InputError, match=r"row 'policy': the run was started with --policy .*evil\.py:Evil"):
        resume(folder, clock)
    assert not mark.exists()


def test_the_cli_needs_the_policy_to_resume_and_names_both_on_a_mismatch(
    killed: tuple[Path, VirtualClock],
) -> None:
    folder, _ = killed
    missing = shockwave("run", "--resume", "--out", folder)
    assert missing.returncode == 2 and "--resume needs --policy" in missing.stderr
    other = shockwave("run", "--resume", "--out", folder, "--policy", "fifo")
    lines = other.stderr.strip().splitlines()
    assert other.returncode == 2 and len(lines) == 1, other.stderr
    assert "--policy max_min_fairness" in lines[0] and "gives fifo" in lines[0]


# -- 2. a folder is self-contained and relocatable ---------------------------------------------------------------------
def test_a_copied_run_resumes_on_its_own_files_and_never_touches_the_original(
    killed: tuple[Path, VirtualClock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, clock = killed
    original = digest(folder)
    assert original  # the killed run left checkpoints
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(folder, copy)
    monkeypatch.chdir(tmp_path / "elsewhere")  # another working folder: nothing is found relative to the first
    result, _ = resume(Path("copy"), VirtualClock(clock.now()))
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 8
    assert digest(folder) == original  # not one checkpoint of the original deleted or changed
    result, _ = resume(folder, clock)  # and the original resumes as well, from its own checkpoints
    assert result["unfinished_jobs"] == [] and len(result["jobs"]) == 8


def test_a_changed_copy_of_an_input_is_refused_naming_it(killed: tuple[Path, VirtualClock]) -> None:
    folder, clock = killed
    [kept] = (folder / "inputs").glob("trace*")
    kept.write_text(kept.read_text().replace("\t800\t", "\t900\t", 1))
    with pytest.raises(
        InputError, match=r"inputs/trace\.trace: this copy of the run's trace changed since the run started"
    ):
        resume(folder, clock)


def test_a_missing_checkpoint_is_named_before_anything_starts(killed: tuple[Path, VirtualClock]) -> None:
    folder, clock = killed
    next(iter((folder / "checkpoints").glob("*.ckpt"))).unlink()
    backend = FakeBackend(4, steps_per_s=RATE, clock=clock)
    with pytest.raises(InputError, match=r"table jobs, row \d+: field 'checkpoint': job \d+'s checkpoint checkpoints/"):
        run(request(Path(), folder, resume=True), lambda req: backend)
    assert backend.launches == []


# -- 3. one writer per folder ------------------------------------------------------------------------------------------
def test_a_second_scheduler_on_a_folder_is_refused_at_once_with_the_first_one_s_pid(
    killed: tuple[Path, VirtualClock],
) -> None:
    folder, _ = killed
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from shockwave.io.lock import FolderLock\n"
            "with FolderLock(Path(sys.argv[1])): print('held', flush=True); time.sleep(60)",
            str(folder),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        second = shockwave("run", "--resume", "--out", folder, "--policy", "max_min_fairness")
        assert second.returncode == 2 and f"process {holder.pid} is using this folder" in second.stderr
    finally:
        holder.kill()
        holder.wait()
    with FolderLock(folder):  # the kernel dropped the killed holder's lock: nothing stale is left
        pass


# -- 5. every value read back is checked -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("table", "key", "value", "expected"),
    [
        (
            "settings",
            "round_seconds",
            json.dumps("abc"),
            r"row 'round_seconds': field 'value': Input should be a valid",
        ),
        ("settings", "round_seconds", json.dumps(1e300), r"row 'round_seconds': field 'value': .*less than or equal"),
        ("settings", "gpus", "not json", r"row 'gpus': field 'value': not valid JSON"),
        ("settings", "placement", json.dumps("ANYWHERE"), r"row 'placement': field 'value': Input should be 'PACK'"),
        ("jobs", "steps", "many", r"table jobs, row 2: field 'steps': Input should be a valid integer"),
        ("jobs", None, json.dumps([1, 2]), r"table jobs, row 2: field 'record': expected a JSON object"),
        ("jobs", "checkpoint", "../../elsewhere.ckpt", r"row 2: field 'checkpoint': String should match pattern"),
        ("jobs", "rates", {"v100": {"32": float("nan")}}, r"row 2: field 'rates.v100.32'"),
    ],
)
def test_a_bad_journal_value_is_refused_naming_file_row_and_field_before_anything_starts(
    killed: tuple[Path, VirtualClock], table: str, key: str | None, value: object, expected: str
) -> None:
    folder, clock = killed
    if table == "settings":
        edit(folder, "UPDATE settings SET value = ? WHERE key = ?", value, key)
    else:
        with sqlite3.connect(folder / "journal.sqlite") as db:
            record = json.loads(db.execute("SELECT record FROM jobs WHERE id = 2").fetchone()[0])
        text = value if key is None else json.dumps({**record, key: value})
        edit(folder, "UPDATE jobs SET record = ? WHERE id = 2", text)
    started: list[RunRequest] = []

    def backend(req: RunRequest) -> FakeBackend:
        started.append(req)
        return FakeBackend(4, steps_per_s=RATE, clock=clock)

    with pytest.raises(InputError, match=expected) as refused:
        run(request(Path(), folder, resume=True), backend)
    assert refused.value.path == str(folder / "journal.sqlite") and started == []


def test_the_cli_refuses_a_bad_journal_value_in_one_line(killed: tuple[Path, VirtualClock]) -> None:
    folder, _ = killed
    edit(folder, "UPDATE settings SET value = ? WHERE key = 'round_seconds'", json.dumps(1e300))
    result = shockwave("run", "--resume", "--out", folder, "--policy", "max_min_fairness")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr
    assert "journal.sqlite: table settings, row 'round_seconds': field 'value'" in lines[0]


def test_absurd_rounds_are_refused_on_the_command_line_too(tmp_path: Path) -> None:
    trace = write_runtime_trace(tmp_path / "rt8.trace")
    with pytest.raises(InputError, match=r"--round-seconds must be a number from 0\.01 to 86400, got 1e\+300"):
        run(request(trace, tmp_path / "r", round_seconds=1e300), lambda req: FakeBackend(4))
    assert not (tmp_path / "r").exists()  # refused before any folder was made


# -- 8, 9. state files are private and written only where they are --------------------------------------------------
def test_state_files_and_folders_are_private(tmp_path: Path) -> None:
    trace = write_runtime_trace(tmp_path / "rt8.trace")
    run(request(trace, tmp_path / "r"), lambda req: FakeBackend(4, steps_per_s=RATE))
    folder = tmp_path / "r"
    for path in [folder, folder / "checkpoints", folder / "inputs"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    for path in [folder / "journal.sqlite", *folder.glob("inputs/*"), *folder.glob("checkpoints/*")]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_link_planted_as_the_journal_is_refused_and_one_as_a_result_is_replaced(tmp_path: Path) -> None:
    trace = write_runtime_trace(tmp_path / "rt8.trace")
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    folder = tmp_path / "r"
    folder.mkdir(mode=0o700)
    (folder / "results.json").symlink_to(victim)
    run(request(trace, folder), lambda req: FakeBackend(4, steps_per_s=RATE))
    assert victim.read_text() == "keep me" and not (folder / "results.json").is_symlink()
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    (other / "journal.sqlite").symlink_to(victim)
    with pytest.raises(InputError, match=r"journal\.sqlite: a journal already exists here"):
        run(request(trace, other), lambda req: FakeBackend(4))
    with pytest.raises(InputError, match="cannot open the journal: a link is never followed"):
        run(request(trace, other, resume=True), lambda req: FakeBackend(4))
    assert victim.read_text() == "keep me"


def test_a_folder_others_may_write_to_is_refused(tmp_path: Path) -> None:
    trace = write_runtime_trace(tmp_path / "rt8.trace")
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(InputError, match=r"others may write to the run folder .*chmod go-w"):
        run(request(trace, folder), lambda req: FakeBackend(4))
    assert os.listdir(folder) == []


def test_a_missing_extra_is_found_before_any_folder_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shockwave.runtime.run as runtime_run

    def missing(module: str, extra: str, what: str) -> None:
        raise InputError(f"{what} needs {module}: pip install 'shockwave[{extra}]'")

    monkeypatch.setattr(runtime_run, "require_extra", missing)
    trace = write_runtime_trace(tmp_path / "rt8.trace")
    with pytest.raises(InputError, match="needs ray"):
        run(request(trace, tmp_path / "new"))
    assert not (tmp_path / "new").exists()


def test_a_snapshot_changed_outside_shockwave_is_refused_by_its_digest(killed: tuple[Path, VirtualClock]) -> None:
    """The policy's own state is checked whole: a well-formed but changed value could mislead the policy later."""
    folder, clock = killed
    with sqlite3.connect(folder / "journal.sqlite") as db:
        data = json.loads(db.execute("SELECT data FROM memory").fetchone()[0])
        data["rounds"] = data["rounds"][:-1]
        db.execute("UPDATE memory SET data = ?", (json.dumps(data),))
    with pytest.raises(InputError, match=r"table memory, row 0: field 'data': the scheduler's snapshot does not match"):
        resume(folder, clock)
